"""BM25 ranking over the FTS5 index, bounded on broad queries: the keyword side of every mode.

Keyword search (:mod:`korg_bridge.recall.history.query.search`) and hybrid search
(:mod:`korg_bridge.recall.semantic.rank`) take their keyword candidates from the
same ranking, so hybrid starts from exactly the events keyword mode would
show. Ranks are ``(event id, bm25)`` pairs, best first (FTS5's ``bm25()`` is
lower for better matches).

A query matching more than :data:`~korg_bridge.recall.history.query.fts.RANK_WINDOW` events
ranks the newest of them plus every older event holding one of its selective
terms, scored exactly (see :func:`~korg_bridge.recall.history.query.fts.older_selective_sql`);
:func:`ranking` says whether it did, so a caller whose filters or collapsing
left too few can ask for :func:`full_ranking`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

from korg_bridge.recall.history.query.fts import (
    Filters,
    keyword_sql,
    older_selective_sql,
    quote_fts,
    selective_sql,
    window_sql,
)

__all__ = ["Rank", "full_ranking", "ranking"]

Rank = tuple[int, float]
"""An event id and its FTS5 ``bm25()`` value (lower is better)."""


def ranking(
    conn: sqlite3.Connection, match: str, terms: Sequence[str], filters: Filters, *, first: int
) -> tuple[Iterator[Rank], bool]:
    """``(ranks best first, windowed)``: windowed is True when only the newest matches plus the
    older ones holding a selective term are ranked (then :func:`full_ranking` ranks them all)."""
    sql, params = window_sql(match)
    edge = conn.execute(sql, params).fetchone()
    if edge is None:
        return full_ranking(conn, match, filters, first=first), False
    ranked = _pages(conn, match, filters, min_rowid=int(edge[0]), first=first)
    selective = quote_fts(" ".join(term for term in terms if _is_selective(conn, term)))
    if selective:
        older = _older_selective(conn, match, selective, filters, below=int(edge[0]))
        ranked = _merged(ranked, older)
    return ranked, True


def full_ranking(conn: sqlite3.Connection, match: str, filters: Filters, *, first: int) -> Iterator[Rank]:
    """Every match, best first, fetched a page at a time."""
    return _pages(conn, match, filters, min_rowid=None, first=first)


def _is_selective(conn: sqlite3.Connection, term: str) -> bool:
    sql, params = selective_sql(term)
    return bool(conn.execute(sql, params).fetchone()[0])


def _pages(
    conn: sqlite3.Connection, match: str, filters: Filters, *, min_rowid: int | None, first: int
) -> Iterator[Rank]:
    """``(id, bm25)`` best first, fetched a page at a time (pages grow: collapsing may eat many)."""
    limit, offset = first, 0
    while True:
        sql, params = keyword_sql(match, filters, limit=limit, offset=offset, min_rowid=min_rowid)
        rows = conn.execute(sql, params).fetchall()
        yield from rows
        if len(rows) < limit:
            return
        offset += limit
        limit *= 4


def _older_selective(
    conn: sqlite3.Connection, match: str, selective: str, filters: Filters, *, below: int
) -> list[Rank]:
    """Events below rowid ``below`` holding a selective term, with their exact BM25, best first."""
    (both_sql, both_params), (sel_sql, sel_params) = older_selective_sql(
        match, selective, filters, below=below
    )
    own = dict(conn.execute(sel_sql, sel_params).fetchall())
    scored = [
        (event_id, value - own.get(event_id, 0.0)) for event_id, value in conn.execute(both_sql, both_params)
    ]
    scored.sort(key=lambda item: item[1])
    return scored


def _merged(pages: Iterator[Rank], older: list[Rank]) -> Iterator[Rank]:
    """Both streams in one, best first, never reading ``pages`` further than what is yielded
    (``heapq.merge`` reads one ahead: here that would run the next page's ranking query)."""
    position = 0
    for item in pages:
        while position < len(older) and older[position][1] < item[1]:
            yield older[position]
            position += 1
        yield item
    yield from older[position:]
