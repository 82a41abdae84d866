"""User text to FTS5 queries, and the SQL of every search, built apart from running it.

A query is what a person or a model typed, never FTS5 syntax: ``foo NOT
bar`` looks for the three words, ``"`` or ``*`` or ``col:val`` mean nothing
special. :func:`quote_fts` is the only path from user text to ``MATCH``: each
token becomes a quoted phrase (inner quotes doubled), so no operator
survives, and tokens are OR-ed so a document matching some of the words
still ranks, below those matching all of them (BM25 sums per term).

The builders return ``(sql, params)``; :mod:`korg_bridge.recall.history.query.search` runs
them, and tests read them as text. (Pattern: sqlite-utils ``search_sql`` and
``quote_fts``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FTS_DELETE_ROW",
    "FTS_INSERT_ROW",
    "Filters",
    "details_sql",
    "filter_sql",
    "keyword_sql",
    "like_pattern",
    "outside_sources_sql",
    "query_terms",
    "quote_fts",
    "substring_sql",
]

FTS_INSERT_ROW = "INSERT INTO events_fts (rowid, text, body) VALUES (?, ?, ?)"
"""Index one event's head and body (an external-content table is fed by hand)."""
FTS_DELETE_ROW = "INSERT INTO events_fts (events_fts, rowid, text, body) VALUES ('delete', ?, ?, ?)"
"""Remove one event's terms: FTS5 needs the exact values it indexed."""

STOPWORDS = frozenset(
    """a an and are as at be but by did do does for from had has have how i if in into is it its me my
    of on or our so that the their then there these this those to was we were what when where which who
    why will with would you your""".split()  # noqa: SIM905 (a word list reads best as words)
)
"""Dropped from keyword queries (unless nothing else is left): they match most events, cost
the most to score, and move BM25 ranks by noise only."""


def query_terms(query: str, *, drop_stopwords: bool = True) -> list[str]:
    """Split ``query`` on whitespace into distinct lower-cased terms that hold a letter or digit.

    Punctuation-only tokens (``*``, ``-``, ``"``) carry no searchable text;
    keeping them would make an empty phrase.
    """
    terms: list[str] = []
    for token in query.lower().split():
        if any(ch.isalnum() for ch in token) and token not in terms:
            terms.append(token)
    if drop_stopwords:
        content = [term for term in terms if term not in STOPWORDS]
        if content:
            return content
    return terms


def quote_fts(query: str) -> str:
    """Return ``query`` as an FTS5 expression matching ANY of its terms ("" when it has none).

    Each term is a double-quoted phrase with inner quotes doubled, so FTS5
    operators and column filters in user text are plain words.
    """
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in query_terms(query))


@dataclass(frozen=True, slots=True)
class Filters:
    """Restrictions every search applies in SQL, on the ``events`` table aliased ``e``."""

    sources: Sequence[str] | None = ()
    """Files or folders (absolute paths): only events from files at or under them. Empty: no
    event at all; None: no restriction (every indexed file is under the call's sources)."""
    tools: Sequence[str] = ()
    """Exact tool names."""
    agents: Sequence[str] = ()
    """Agent names or prefixes: ``claude-code`` matches ``claude-code#ab12cd34`` and
    ``agent:claude-code@2.1.0``."""
    since: float | None = None
    until: float | None = None
    project: str | None = None
    """A project root (:func:`~korg_bridge.recall.project.project_root`): only events of that
    project, or of a folder under it (a session whose cwd no longer exists keeps its own)."""


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _under_sql(sources: Sequence[str]) -> tuple[str, list[Any]]:
    """``path`` is one of ``sources`` or inside one of them (``/a/led`` does not hold ``/a/ledger2``)."""
    paths: list[str] = []
    params: list[Any] = []
    for source in sources:
        prefix = source.rstrip("/") + "/"
        paths.append("path = ? OR substr(path, 1, ?) = ?")
        params.extend([source, len(prefix), prefix])
    return " OR ".join(paths), params


def outside_sources_sql(sources: Sequence[str]) -> tuple[str, list[Any]]:
    """Select one indexed file that is not under ``sources`` (none: the source filter can be skipped)."""
    under, params = _under_sql(sources)
    return f"SELECT path FROM sources WHERE NOT ({under}) LIMIT 1", params


def filter_sql(filters: Filters) -> tuple[str, list[Any]]:
    """Return the ``AND``-joined conditions for ``filters`` ("" when nothing restricts) and their params.

    A search scoped to no source at all matches nothing: results must come
    from the ledgers of this call only.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if filters.sources:
        under, params = _under_sql(filters.sources)
        clauses.append(f"e.source_id IN (SELECT id FROM sources WHERE {under})")
    elif filters.sources is not None:
        clauses.append("0")
    if filters.tools:
        clauses.append(f"e.tool IN ({_placeholders(len(filters.tools))})")
        params.extend(filters.tools)
    if filters.agents:
        options: list[str] = []
        for agent in filters.agents:
            for prefix in dict.fromkeys([agent, agent if agent.startswith("agent:") else "agent:" + agent]):
                options.append("substr(e.agent, 1, ?) = ?")
                params.extend([len(prefix), prefix])
        clauses.append(f"({' OR '.join(options)})")
    if filters.since is not None:
        clauses.append("e.ts >= ?")
        params.append(filters.since)
    if filters.until is not None:
        clauses.append("e.ts <= ?")
        params.append(filters.until)
    if filters.project is not None:
        prefix = filters.project.rstrip("/") + "/"
        clauses.append("(e.project = ? OR substr(e.project, 1, ?) = ?)")
        params.extend([filters.project, len(prefix), prefix])
    return " AND ".join(clauses), params


RANK_WINDOW = 10_000
"""Of the events holding only common query terms, at most this many of the newest are ranked.

Computing ``bm25()`` costs time per matching row (an FTS5 doclist walk plus a
lookup of the row's length): a word found in 400k of a million events takes
~0.4 s to rank in full. So a query matching more events than this ranks the
newest ``RANK_WINDOW`` matches, plus every older event that holds one of its
*selective* terms (:data:`SELECTIVE_MAX_DF`), scored exactly as if everything
had been ranked (:func:`older_selective_sql`). Only old events holding nothing
but common words — whose BM25 is low anyway, a common word's IDF being low —
are left out; narrower queries rank every match."""

SELECTIVE_MAX_DF = 5_000
"""A query term found in at most this many events is selective: its events are always ranked."""


def window_sql(match: str, window: int | None = None) -> tuple[str, list[Any]]:
    """The rowid of the ``window``-th newest match (a cheap walk of the doclists
    in rowid order), or no row when fewer match: then everything is ranked."""
    sql = "SELECT rowid FROM events_fts WHERE events_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"
    return sql, [match, (RANK_WINDOW if window is None else window) - 1]


def selective_sql(term: str) -> tuple[str, list[Any]]:
    """One row, 1 when ``term`` (one query term) is selective, else 0; stops counting past the limit."""
    sql = "SELECT count(*) <= ? FROM (SELECT rowid FROM events_fts WHERE events_fts MATCH ? LIMIT ?)"
    return sql, [SELECTIVE_MAX_DF, quote_fts(term), SELECTIVE_MAX_DF + 1]


def _ranking_sql(
    expression: str, filters: Filters, rowid_clause: str, rowid_params: list[Any], tail: str
) -> tuple[str, list[Any]]:
    """``(id, bm25)`` of the events matching ``expression``, restricted as given; no ``events``
    join unless a filter needs it (a third faster when a common word matches half the history)."""
    where, params = filter_sql(filters)
    if not where:
        sql = f"SELECT rowid, bm25(events_fts) AS rank\nFROM events_fts\nWHERE events_fts MATCH ?{rowid_clause}{tail}"
        return sql, [expression, *rowid_params]
    sql = (
        "SELECT e.id, bm25(events_fts) AS rank\n"
        "FROM events_fts JOIN events e ON e.id = events_fts.rowid\n"
        f"WHERE events_fts MATCH ?{rowid_clause} AND {where}{tail}"
    )
    return sql, [expression, *rowid_params, *params]


def keyword_sql(
    match: str, filters: Filters, *, limit: int, offset: int = 0, min_rowid: int | None = None
) -> tuple[str, list[Any]]:
    """Rank events matching the FTS5 expression ``match`` (from :func:`quote_fts`) by BM25.

    Returns rows ``(id, rank)``; ``rank`` is FTS5's ``bm25()``, lower is
    better. Only ids are sorted: the text is fetched for the few rows shown.
    ``min_rowid`` limits the ranking to the newest matches (a rowid range
    FTS5 seeks to; see :data:`RANK_WINDOW`).
    """
    clause, clause_params = ("", []) if min_rowid is None else (" AND events_fts.rowid >= ?", [min_rowid])
    sql, params = _ranking_sql(match, filters, clause, clause_params, "\nORDER BY rank\nLIMIT ? OFFSET ?")
    return sql, [*params, limit, offset]


def older_selective_sql(
    match: str, selective: str, filters: Filters, *, below: int
) -> list[tuple[str, list[Any]]]:
    """Two queries whose difference is the exact BM25 of ``match`` for every event below rowid
    ``below`` holding a ``selective`` term: rows ``(id, bm25)`` of each.

    FTS5 cannot rank only chosen rows of a broad match without walking all of
    it, but its ``bm25()`` is a sum over the expression's phrases, each with its
    own IDF. ``(S) AND (M)`` holds exactly the events of ``S`` (every selective
    term is a phrase of ``M``) and scores them ``2·bm25(S) + bm25(M without S)``;
    minus ``bm25(S)`` that is ``bm25(M)``. Both walks are driven by the short
    selective doclists.
    """
    clause = " AND events_fts.rowid < ?"
    return [
        _ranking_sql(f"({selective}) AND ({match})", filters, clause, [below], ""),
        _ranking_sql(selective, filters, clause, [below], ""),
    ]


def like_pattern(term: str) -> str:
    """Return a ``LIKE … ESCAPE '\\'`` pattern matching ``term`` anywhere, its ``%``/``_`` literal."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def substring_sql(terms: Sequence[str], filters: Filters, *, length_cap: int) -> tuple[str, list[Any]]:
    """Select events whose head or body contains every ASCII term, ignoring ASCII case; shortest first.

    ``LIKE`` folds ASCII case only (and scans twice as fast as
    ``instr(lower(…))``), so non-ASCII terms are left to the caller's exact
    check in Python. Lengths over ``length_cap`` tie (they share the floor
    score), broken by file order. Returns rows ``(id,)``.
    """
    where, params = filter_sql(filters)
    ascii_terms = [term for term in terms if term.isascii()]
    clauses = ["(e.text LIKE ? ESCAPE '\\' OR e.body LIKE ? ESCAPE '\\')" for _ in ascii_terms]
    condition = " AND ".join([*clauses, where] if where else clauses) or "1"
    length = "length(e.text) + coalesce(length(e.body), 0)"
    sql = f"SELECT e.id\nFROM events e\nWHERE {condition}\nORDER BY min({length}, ?), e.id"
    patterns = [pattern for term in ascii_terms for pattern in (like_pattern(term),) * 2]
    return sql, [*patterns, *params, length_cap]


def details_sql(count: int) -> str:
    """Select what a hit shows for ``count`` event ids (``?`` placeholders): its fields, head,
    body (for a snippet of a match the head does not hold), context (project, extra) and whether
    its file is gone."""
    return (
        "SELECT e.id, e.seq, e.agent, e.tool, e.session, e.timestamp, e.text, e.body, e.project, e.extra,"
        " s.gone_at IS NOT NULL\n"
        f"FROM events e JOIN sources s ON s.id = e.source_id WHERE e.id IN ({_placeholders(count)})"
    )
