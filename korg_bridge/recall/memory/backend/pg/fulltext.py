"""Keyword search of a team store: a generated ``tsvector``, ranked by BM25 computed in SQL.

Column ``memory.tsv`` is generated from title, body and tags (:data:`.schema.TEXT_CONFIG`:
English stemming, no stop words, unicode61's separators), so an UPDATE -- a purge
-- recomputes it and no token of the old text stays. Each query word becomes a
``phraseto_tsquery`` of a bound parameter (a word of several tokens, ``billing-api``,
is a phrase, as FTS5 reads a quoted term), so no tsquery syntax in user text
survives.

**Ranking.** PostgreSQL's own ``ts_rank`` knows nothing of how rare a word is,
and rare words are what tell memories apart. So the score is Okapi BM25 (k1 = 1.2,
b = 0.75, the constants of SQLite's FTS5), computed in one statement:

* the tenant's rows that hold any query word are read once; ``unnest(tsv)`` gives
  each one's frequency of each query lexeme, and how many rows hold it (its
  document frequency, over every version but purged ones, as FTS5 counts);
* ``N`` and the average length are the tenant's non-purged rows';
* a row's score is the sum over the query lexemes it holds of
  ``idf · tf·(k1+1) / (tf + k1·(1 - b + b·len/avglen))``,
  ``idf = ln(1 + (N - df + 0.5)/(df + 0.5))``.

Where it still differs from FTS5's ``bm25()``: lexemes, not phrases, are counted
(``billing-api`` scores as ``billing`` plus ``api``); a row's length is its number of
distinct lexemes, not of tokens; and a word that only ever occurs inside a
matched phrase has its document frequency counted over the rows holding the whole
phrase. The knowledge-update and dedup suites measure what that costs
(``docs/benchmarks.md``).

Under row-level security PostgreSQL evaluates ``@@`` (not leakproof) only after
the tenant filter, so a GIN index on ``tsv`` would never serve the application
role: a search reads the tenant's rows through the ``(tenant_id, …)`` b-trees,
which is milliseconds for thousands of memories.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from korg_bridge.recall.memory.backend.pg.schema import SEPARATORS, TEXT_CONFIG

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["BM25_B", "BM25_K1", "PG_TEXT", "PgText", "query_sql", "ranked_sql"]

BM25_K1 = 1.2
BM25_B = 0.75
_BLANKS = " " * len(SEPARATORS)


def _words(expression: str) -> str:
    """The same separators as the generated column, applied to a query value."""
    return f"translate({expression}, '{SEPARATORS}', '{_BLANKS}')"


def query_sql(count: int, joiner: str) -> str:
    """A tsquery of ``count`` bound words, each a phrase, joined by ``||`` (any) or ``&&`` (every)."""
    phrase = f"phraseto_tsquery('{TEXT_CONFIG}', {_words('?')})"
    return "(" + f" {joiner} ".join([phrase] * count) + ")"


def ranked_sql(count: int, where: str) -> str:
    """BM25 over rows matching any of ``count`` words and ``where`` (on ``m``), best first.

    Params, in order: the query text (all words, for its lexemes), ``where``'s params, the
    ``count`` words, the limit.
    """
    k1, b = BM25_K1, BM25_B
    return f"""
        WITH q AS (
            SELECT DISTINCT u.lexeme FROM unnest(to_tsvector('{TEXT_CONFIG}', {_words("?")})) AS u
        ),
        hits AS MATERIALIZED (
            SELECT m.rowid, m.tsv, ({where}) AS wanted FROM memory m WHERE m.tsv @@ {query_sql(count, "||")}
        ),
        terms AS (
            SELECT h.rowid, h.wanted, length(h.tsv) AS len, u.lexeme, cardinality(u.positions) AS tf
            FROM hits h CROSS JOIN LATERAL unnest(h.tsv) AS u
            WHERE u.lexeme IN (SELECT lexeme FROM q)
        ),
        df AS (SELECT lexeme, count(*)::float8 AS df FROM terms GROUP BY lexeme),
        corpus AS (
            SELECT count(*)::float8 AS n, greatest(avg(length(tsv)), 1)::float8 AS avglen
            FROM memory WHERE state <> 'purged'
        )
        SELECT t.rowid, sum(
            ln(1 + (c.n - d.df + 0.5) / (d.df + 0.5))
            * t.tf * {k1 + 1} / (t.tf + {k1} * (1 - {b} + {b} * t.len / c.avglen))
        ) AS score
        FROM terms t JOIN df d USING (lexeme) CROSS JOIN corpus c
        WHERE t.wanted
        GROUP BY t.rowid
        ORDER BY score DESC, t.rowid
        LIMIT ?
    """


class PgText:
    """:class:`~..backend.FullText` on the generated ``tsvector``."""

    def ranked(
        self, tx: Tx, terms: Sequence[str], *, where: str, params: Sequence[object], limit: int
    ) -> list[tuple[int, float]]:
        if not terms:
            return []
        sql = ranked_sql(len(terms), where)
        rows = tx.execute(sql, (" ".join(terms), *params, *terms, limit)).fetchall()
        return [(int(rowid), float(score)) for rowid, score in rows]

    def condition(self, terms: Sequence[str], *, every: bool) -> tuple[str, list[object]]:
        return f"m.tsv @@ {query_sql(len(terms), '&&' if every else '||')}", list(terms)

    def holding(self, tx: Tx, rowids: Sequence[int], terms: Sequence[str]) -> set[int]:
        if not rowids:
            return set()
        condition, params = self.condition(terms, every=True)
        marks = ", ".join("?" * len(rowids))
        sql = f"SELECT m.rowid FROM memory m WHERE m.rowid IN ({marks}) AND {condition}"
        return {int(row[0]) for row in tx.execute(sql, (*rowids, *params))}

    def index(self, tx: Tx, rowid: int, title: str, body: str, tags: Sequence[str]) -> None:
        """Nothing to do: the column is generated from the row."""

    def index_many(self, tx: Tx, rows: Sequence[tuple[int, str, str, Sequence[str]]]) -> None:
        """Nothing to do: the column is generated from each row."""

    def after_purge(self, tx: Tx) -> None:
        """Nothing to do: the purge's UPDATE recomputed the column."""


PG_TEXT = PgText()
