"""Keyword search of a SQLite store: FTS5 over title, body and tags, ranked by BM25.

``memory_fts`` is an external-content FTS5 table (porter stemming, unicode61
tokens, like the recall index) over table ``memory``: every version that is not
purged is indexed and the queries filter (heads, scopes, states). User words
reach ``MATCH`` only as double-quoted phrases with inner quotes doubled, so
``NOT``, ``OR``, ``"``, ``*`` or a column filter in a query are plain words.

**The score.** FTS5's ``bm25()`` takes a word's weight as
``ln((N - n + 0.5) / (n + 0.5))`` and, where that is not positive -- a word
that half the rows hold or more -- as 1e-6. In a store of a few memories
that is every word: a memory that matches the query well scored 0.000001,
shown as "bm25 0.0", and any other score built on it (a hybrid total, a
comparison with history hits) read it as no match at all. So the score here
weighs each word ``ln(1 + (N - n + 0.5) / (n + 0.5))`` (Lucene's; the team
store's :mod:`.pg.fulltext` uses the same), always above 0 for a word that
matches: a row's FTS5 value is multiplied by the sum of these weights of the
query words it holds over the sum of FTS5's weights of the same words. That
is exactly Okapi BM25 with the new weights when the words a row holds occur
in it equally often -- once each, in a memory of one fact, nearly always --
and costs one read of each query word's rows (asking FTS5 for each word's
own ``bm25()`` over the candidates cost four times the whole search at 10,000
memories). ``N`` is FTS5's own (the rows of ``memory_fts_docsize``), ``n`` the
rows matching the word. Candidates are chosen by FTS5's own ranking (the best
:data:`~.search.RANK_WINDOW`), far more than any answer shows.

The team store's counterpart is :mod:`.pg.fulltext`; both implement
:class:`~.backend.FullText`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "FTS5_IDF_FLOOR",
    "SqliteText",
    "fts_expression",
    "idf",
    "members",
    "members_sql",
    "ranked_sql",
    "rescored",
]

FTS5_IDF_FLOOR = 1e-6
"""The weight FTS5's ``bm25()`` gives a word whose ``ln((N - n + 0.5) / (n + 0.5))`` is not positive."""


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


def members_sql() -> str:
    """Every row holding one quoted word (the parameter), as one JSON array: its length is the
    word's ``n``, and the candidates among them are found in Python (``rowid IN (…)`` here would
    restart the FTS5 query once per listed row). One array, not a row per rowid: a common word is
    thousands of rows, and building a Python row for each was half the read."""
    return "SELECT json_group_array(rowid) FROM memory_fts WHERE memory_fts MATCH ?"


def members(tx: Tx, expression: str) -> frozenset[int]:
    """The rows matching the FTS5 ``expression``: read once per read-only transaction (its
    ``fts_members``), else each time."""
    memo: dict[str, frozenset[int]] | None = getattr(tx, "fts_members", None)
    found = None if memo is None else memo.get(expression)
    if found is None:
        found = frozenset(json.loads(tx.execute(members_sql(), (expression,)).fetchone()[0]))
        if memo is not None:
            memo[expression] = found
    return found


def idf(rows: int, matching: int, *, fts5: bool = False) -> float:
    """A word's BM25 weight among ``rows`` rows of which ``matching`` hold it: Lucene's
    ``ln(1 + (N - n + 0.5) / (n + 0.5))``, or (``fts5``) the one FTS5's ``bm25()`` used."""
    ratio = (rows - matching + 0.5) / (matching + 0.5)
    if fts5:
        weight = math.log(ratio) if ratio > 0 else 0.0
        return weight if weight > 0 else FTS5_IDF_FLOOR
    return math.log1p(max(0.0, ratio))


def rescored(tx: Tx, terms: Sequence[str], ranked: Sequence[tuple[int, float]]) -> dict[int, float]:
    """``ranked`` (rowid, FTS5's value) with Lucene's word weights instead of FTS5's (see the module
    docstring): per distinct word, one read of the rows holding it."""
    if not ranked:
        return {}
    rowids = [rowid for rowid, _ in ranked]
    total = int(tx.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0])
    ours = dict.fromkeys(rowids, 0.0)
    theirs = dict.fromkeys(rowids, 0.0)
    for term in dict.fromkeys(terms):
        holding = members(tx, fts_expression([term], "OR"))
        if not holding:
            continue
        mine, fts5 = idf(total, len(holding)), idf(total, len(holding), fts5=True)
        for rowid in ours.keys() & holding:
            ours[rowid] += mine
            theirs[rowid] += fts5
    return {
        rowid: max(0.0, value) * ours[rowid] / theirs[rowid] if theirs[rowid] > 0 else 0.0
        for rowid, value in ranked
    }


class SqliteText:
    """:class:`~.backend.FullText` on ``memory_fts``."""

    def ranked(
        self, tx: Tx, terms: Sequence[str], *, where: str, params: Sequence[object], limit: int
    ) -> list[tuple[int, float]]:
        if not terms:
            return []
        rows = tx.execute(ranked_sql(where), (fts_expression(terms, "OR"), *params, limit)).fetchall()
        scores = rescored(tx, terms, [(int(rowid), float(value)) for rowid, value in rows])
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))

    def condition(self, terms: Sequence[str], *, every: bool) -> tuple[str, list[object]]:
        return (
            "m.rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?)",
            [fts_expression(terms, "AND" if every else "OR")],
        )

    def holding(self, tx: Tx, rowids: Sequence[int], terms: Sequence[str]) -> set[int]:
        # FTS5's AND of quoted phrases is the intersection of each phrase's rows.
        rows = [members(tx, fts_expression([term], "OR")) for term in dict.fromkeys(terms)]
        return {rowid for rowid in rowids if all(rowid in found for found in rows)}

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
