"""Search the recall index in any mode, with filters, collapsing and snippets.

Two text modes, both over the flattened text of :mod:`korg_bridge.recall.history.ingest.text`:

* ``substring`` keeps the reference server's semantics: every lower-cased
  query term must occur in the lower-cased text. Its score favours concise
  events, ``1 - min(0.5, len(text) / 2000)``: from 1.0 for a tiny text down
  to 0.5 for 1,000 characters or more (ties in file order).
* ``keyword`` ranks with FTS5 ``bm25()`` over any of the terms (see
  :func:`~korg_bridge.recall.history.query.fts.quote_fts`), so partial matches still rank,
  below fuller ones. The score maps the raw BM25 value ``r`` (higher is
  better) to ``r / (r + 5)``: stable (it depends on the event, the query and
  the corpus, not on the other hits), monotone, in 0 to 1; one rare term
  matched scores about 0.6, several matched terms 0.8 and more.

``semantic`` and ``hybrid`` rank with embeddings and need a
:class:`~korg_bridge.recall.history.query.hits.Ranker` from the caller (the one that loaded
the model builds a :class:`~korg_bridge.recall.semantic.rank.SemanticRanker`): history never
imports the semantic layer, so the two modes above never load numpy.

``min_score`` is the cosine floor of the semantic mode. Hybrid, keyword and
substring do not apply it: in hybrid every candidate with a keyword match or a
positive cosine competes, and a BM25 value is not a cosine (the CLI's default
floor, 0.30, would drop good keyword hits in small or repetitive histories).
Every mode returns at most ``top_n`` hits, best first.

Filters (files under ``sources``, tools, agents, ``since``/``until``, project) are
applied in SQL. Hits with the same session and the same text (ignoring case
and spacing) are collapsed to the best one: a retried command or a repeated
prompt is one memory. Snippets are cut at word boundaries where possible, so a
secret is never half shown: redaction (:mod:`korg_bridge.redact`) is the
caller's, which can count what it hides and honour ``KORG_RECALL_ALLOW_SECRETS``.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from korg_bridge.errors import UsageError
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.query.context import context_of
from korg_bridge.recall.history.query.fts import (
    Filters,
    details_sql,
    outside_sources_sql,
    query_terms,
    quote_fts,
    substring_sql,
)
from korg_bridge.recall.history.query.hits import Hit, Ranked, Ranker
from korg_bridge.recall.history.query.keyword import Rank, full_ranking, ranking
from korg_bridge.recall.history.query.scores import KEYWORD_HALF_SCORE, keyword_score
from korg_bridge.recall.history.query.snippets import make_snippet
from korg_bridge.recall.history.query.timeparse import iso_to_epoch

if TYPE_CHECKING:
    from korg_bridge.recall.history.query.hits import Breakdown

__all__ = ["MODES", "TEXT_MODES", "EventFilters", "search"]

MODES = ("substring", "keyword", "semantic", "hybrid")
TEXT_MODES = ("substring", "keyword")
"""The modes that need no embedding model."""

SUBSTRING_LENGTH_CAP = 1000
"""Texts longer than this all get the floor score 0.5 (the reference formula's cap)."""
FIRST_PAGE = 50
"""Ranked ids fetched before collapsing; more pages follow only when collapsing ate too many."""

_Details = tuple[
    int, str | None, str | None, str | None, str | None, str, str | None, str | None, str | None, int
]
"""What :func:`~korg_bridge.recall.history.query.fts.details_sql` selects, but the id."""
CHUNK = 64


class _Collector:
    """Turns ranked ids into collapsed, redacted hits until ``top_n`` are found."""

    def __init__(self, conn: sqlite3.Connection, terms: Sequence[str], top_n: int) -> None:
        self.conn = conn
        self.terms = terms
        self.top_n = top_n
        self.hits: list[Hit] = []
        self.seen: set[tuple[str | None, str]] = set()

    @property
    def full(self) -> bool:
        return len(self.hits) >= self.top_n

    def reset(self) -> None:
        self.hits.clear()
        self.seen.clear()

    def details(self, ids: Sequence[int]) -> dict[int, _Details]:
        if not ids:
            return {}
        rows = self.conn.execute(details_sql(len(ids)), list(ids)).fetchall()
        return {row[0]: row[1:] for row in rows}

    def add(self, event_id: int, score: float, row: _Details, breakdown: Breakdown | None = None) -> None:
        seq, agent, tool, session, timestamp, text, body, project, extra, gone = row
        key = (session, " ".join(text.lower().split()))
        if key in self.seen:
            return
        self.seen.add(key)
        self.hits.append(
            Hit(
                ref=f"e{event_id}",
                seq=seq,
                score=round(score, 4),
                agent=agent,
                tool=tool,
                session=session,
                timestamp=timestamp,
                snippet=make_snippet(text, self.terms, body=body),
                event_id=event_id,
                breakdown=breakdown,
                project=project,
                context=context_of(extra),
                gone=bool(gone),
            )
        )


class EventFilters(TypedDict, total=False):
    """Which events :func:`search` may return, besides those from files under its ``sources``."""

    tool_filter: Sequence[str]
    agent_filter: Sequence[str]
    since: float | None
    """Epoch seconds; events before it are left out."""
    until: float | None
    project: str | None
    """A project root (see :func:`~korg_bridge.recall.project.project_root`): only its events."""


def search(
    index: Index,
    query: str,
    *,
    mode: str,
    top_n: int,
    min_score: float,
    sources: Sequence[Path],
    ranker: Ranker | None = None,
    **filters: Unpack[EventFilters],
) -> list[Hit]:
    """Return the best ``top_n`` events for ``query`` among those from files under ``sources``.

    ``min_score`` applies to semantic and hybrid only (see the module
    docstring). ``ranker`` is required by those two modes; it carries what they
    need (the embedder, hybrid's weights and clock). A keyword or substring
    query with no letter or digit, or a blank semantic query, returns no hits.

    Raises:
        UsageError: ``mode`` is unknown, or semantic/hybrid without a ranker.
        KorgError: the index cannot be read (locked past the busy timeout).
    """
    if mode not in MODES or (mode not in TEXT_MODES and ranker is None):
        raise UsageError(
            f"search mode {mode!r} needs an embedding model; without one, use one of {', '.join(TEXT_MODES)}."
            if mode in MODES
            else f"unknown search mode {mode!r}: use one of {', '.join(MODES)}."
        )
    if top_n < 1:
        return []
    roots = [os.path.abspath(source) for source in sources]
    if not roots:
        return []
    outside_sql, outside_params = outside_sources_sql(roots)
    # Usually every indexed file is under this call's sources: then no source filter at all.
    scoped = index.read(lambda conn: conn.execute(outside_sql, outside_params).fetchone() is not None)
    where = Filters(
        sources=roots if scoped else None,
        tools=tuple(filters.get("tool_filter", ())),
        agents=tuple(filters.get("agent_filter", ())),
        since=filters.get("since"),
        until=filters.get("until"),
        project=filters.get("project"),
    )
    if ranker is not None and mode not in TEXT_MODES:
        if not query.strip():
            return []
        ranked = ranker.rank(index, query, mode=mode, filters=where, min_score=min_score, top_n=top_n)
        terms = query_terms(query)
        return index.read(lambda conn: _ranked(_Collector(conn, terms, top_n), ranked))
    if mode == "keyword":
        match = quote_fts(query)
        if not match:
            return []
        terms = query_terms(query)
        return index.read(lambda conn: _keyword(_Collector(conn, terms, top_n), match, where))
    terms = query_terms(query, drop_stopwords=False)
    if not terms:
        return []
    return index.read(lambda conn: _substring(_Collector(conn, terms, top_n), where))


def _keyword(collector: _Collector, match: str, filters: Filters) -> list[Hit]:
    conn = collector.conn
    first = max(FIRST_PAGE, collector.top_n * 4)
    ranked, windowed = ranking(conn, match, collector.terms, filters, first=first)
    _collect(collector, ranked, chunk=first)
    if collector.full or not windowed:
        return collector.hits
    # Filters or collapsing left too few within the window: rank them all.
    collector.reset()
    return _collect(collector, full_ranking(conn, match, filters, first=first), chunk=first)


def _collect(collector: _Collector, ranked: Iterable[Rank], *, chunk: int = CHUNK) -> list[Hit]:
    """Turn ``(id, bm25)`` pairs, best first, into hits until the collector is full.

    ``chunk`` (rows whose details are read at once) should not exceed a ranking
    page, so a full collector never costs another ranking query.
    """
    stream = iter(ranked)
    while not collector.full:
        page = list(itertools.islice(stream, chunk))
        if not page:
            break
        rows = collector.details([event_id for event_id, _ in page])
        page.sort(key=lambda item: _tie_break(item, rows))
        for event_id, rank in page:
            row = rows.get(event_id)
            if row is None:  # deleted by a concurrent refresh between the two queries
                continue
            score = round(keyword_score(rank, KEYWORD_HALF_SCORE), 4)
            collector.add(
                event_id, score, row, {"bm25": score, "vector": None, "recency": None, "total": score}
            )
            if collector.full:
                break
    return collector.hits


def _tie_break(item: Rank, rows: Mapping[int, tuple[Any, ...]]) -> tuple[float, float, int]:
    """Best rank first; equal ranks (copies of one event) newest first, then by id: FTS5 leaves
    their order unspecified, and a result must not change between two runs."""
    row = rows.get(item[0])
    moment = iso_to_epoch(row[4]) if row is not None else None
    return item[1], -(moment or 0.0), item[0]


def _ranked(collector: _Collector, ranked: Sequence[Ranked]) -> list[Hit]:
    for start in range(0, len(ranked), CHUNK):
        page = ranked[start : start + CHUNK]
        rows = collector.details([item.event_id for item in page])
        for item in page:
            row = rows.get(item.event_id)
            if row is None:  # deleted by a concurrent refresh between the two queries
                continue
            collector.add(item.event_id, item.score, row, item.breakdown)
            if collector.full:
                return collector.hits
    return collector.hits


def _substring(collector: _Collector, filters: Filters) -> list[Hit]:
    sql, params = substring_sql(collector.terms, filters, length_cap=SUBSTRING_LENGTH_CAP)
    cursor = collector.conn.execute(sql, params)
    try:
        while not collector.full:
            ids = [row[0] for row in cursor.fetchmany(CHUNK)]
            if not ids:
                break
            rows = collector.details(ids)
            for event_id in ids:
                row = rows.get(event_id)
                if row is None:  # deleted by a concurrent refresh between the two queries
                    continue
                text = f"{row[5]} {row[6]}" if row[6] else row[5]  # head and body: the whole event
                lowered = text.lower()  # the exact check: SQL only folded ASCII
                if all(term in lowered for term in collector.terms):
                    score = round(1.0 - min(0.5, len(text) / 2000.0), 4)
                    collector.add(
                        event_id, score, row, {"bm25": None, "vector": None, "recency": None, "total": score}
                    )
                    if collector.full:
                        break
    finally:
        cursor.close()
    return collector.hits
