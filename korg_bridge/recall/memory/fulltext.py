"""Keyword search of a SQLite store: FTS5 over title, body and tags, ranked by BM25.

``memory_fts`` is an external-content FTS5 table (porter stemming, unicode61
tokens, like the recall index) over table ``memory``: every version that is not
purged is indexed and the queries filter (heads, scopes, states). User words
reach ``MATCH`` only as double-quoted phrases with inner quotes doubled, so
``NOT``, ``OR``, ``"``, ``*`` or a column filter in a query are plain words.

The team store's counterpart is :mod:`.pg.fulltext`; both implement
:class:`~.backend.FullText`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Tx

__all__ = ["SqliteText", "fts_expression", "ranked_sql"]


def fts_expression(terms: Sequence[str], joiner: str) -> str:
    """``terms`` as an FTS5 expression: each a quoted phrase, joined by ``OR`` or ``AND``."""
    return f" {joiner} ".join('"' + term.replace('"', '""') + '"' for term in terms)


def ranked_sql(where: str) -> str:
    """Rows matching an FTS5 expression and ``where`` (on ``m``), best BM25 first.
    Params: the expression, ``where``'s, the limit. FTS5's ``bm25`` is lower for better
    matches; the score is its negation, so higher is better as the protocol says."""
    return (
        "SELECT m.rowid, -bm25(memory_fts) FROM memory_fts JOIN memory m ON m.rowid = memory_fts.rowid "
        f"WHERE memory_fts MATCH ? AND {where} ORDER BY bm25(memory_fts) LIMIT ?"
    )


class SqliteText:
    """:class:`~.backend.FullText` on ``memory_fts``."""

    def ranked(
        self, tx: Tx, terms: Sequence[str], *, where: str, params: Sequence[object], limit: int
    ) -> list[tuple[int, float]]:
        if not terms:
            return []
        rows = tx.execute(ranked_sql(where), (fts_expression(terms, "OR"), *params, limit)).fetchall()
        return [(int(rowid), float(score)) for rowid, score in rows]

    def condition(self, terms: Sequence[str], *, every: bool) -> tuple[str, list[object]]:
        return (
            "m.rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?)",
            [fts_expression(terms, "AND" if every else "OR")],
        )

    def index(self, tx: Tx, rowid: int, title: str, body: str, tags: Sequence[str]) -> None:
        tx.execute(
            "INSERT INTO memory_fts (rowid, title, body, tags) VALUES (?, ?, ?, ?)",
            (rowid, title, body, " ".join(tags)),
        )

    def index_many(self, tx: Tx, rows: Sequence[tuple[int, str, str, Sequence[str]]]) -> None:
        tx.executemany(
            "INSERT INTO memory_fts (rowid, title, body, tags) VALUES (?, ?, ?, ?)",
            [(rowid, title, body, " ".join(tags)) for rowid, title, body, tags in rows],
        )

    def after_purge(self, tx: Tx) -> None:
        # External content: the index is rebuilt from the emptied rows, so no token of the
        # purged text survives in its segments.
        tx.execute("INSERT INTO memory_fts (memory_fts) VALUES ('rebuild')")


SQLITE_TEXT = SqliteText()
