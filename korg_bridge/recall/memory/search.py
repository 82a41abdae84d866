"""Finding memories: ranked hits with their score breakdown, and ``forget``'s exact matching.

:func:`search_memories` is what ``recall`` over memories builds on: BM25 over
``memory_fts`` (user text reaches ``MATCH`` only as quoted terms), restricted to
the given scopes, on the lineage heads by default -- or on older versions too
(``include_superseded``), or on what held at a past time (``as_of``). A hit's
score is its relevance times decay times use, bounded, so decay only ranks and
never hides: ``decay = max(0.5, exp(-age_days/90))`` (1 for pinned memories and
types ``user``/``feedback``), ``use = 1 + min(0.3, 0.1·ln(1 + use_count))``.
Lineages joined by a ``similar`` link are ranked together: the newer first, the
older marked "older than".

:func:`forget_matches` is deliberately stricter: every query term must match,
no decay, ordered by id -- the same store gives the same list, which is what
the two-step ``forget`` confirms.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from korg_bridge.recall.fts import query_terms
from korg_bridge.recall.memory.records import Version, age_days, iso
from korg_bridge.recall.memory.rows import head, lineage, select_versions
from korg_bridge.recall.memory.safety import age_label, render_block

__all__ = [
    "FORGET_MAX",
    "MemoryHit",
    "forget_matches",
    "match_sql",
    "search_memories",
]

KEYWORD_HALF = 5.0
"""Raw BM25 at which relevance is 0.5 (``r / (r + half)``), as in keyword recall."""
DECAY_TAU_DAYS = 90.0
DECAY_FLOOR = 0.5
USE_CAP = 0.3
NO_DECAY_TYPES = frozenset({"user", "feedback"})
RANK_WINDOW = 500
"""Best BM25 rows ranked in Python (decay, use, links): far above any useful ``top_n``."""
FORGET_MAX = 50
"""Memories one ``forget(query)`` may act on; more must be narrowed down first."""


@dataclass(slots=True)
class MemoryHit:
    """One memory found: the version shown, its score and how the score was made."""

    version: Version
    score: float
    breakdown: dict[str, float | None]
    current: bool = True
    """False for an older version (``include_superseded``, or ``as_of`` before the latest)."""
    older_than: str | None = None
    """Id of a newer, similar memory that also matched: this one may be out of date."""

    def to_dict(self, now: float) -> dict[str, Any]:
        v = self.version
        return {
            "id": v.id,
            "version": v.version,
            "type": v.type,
            "scope": v.scope,
            "title": v.title,
            "age": age_label(v.recorded_at, now),
            "recorded_at": v.recorded_at,
            "actor": v.actor,
            "trust": v.trust,
            "state": v.state,
            "current": self.current,
            "older_than": self.older_than,
            "score": round(self.score, 4),
            "breakdown": self.breakdown,
        }

    def render(self, now: float) -> str:
        """The hit as a delimited ``<memory …>`` block (see :func:`~.safety.render_block`)."""
        extra: dict[str, object] = {}
        if not self.current:
            extra["superseded"] = "true"
        if self.older_than:
            extra["older_than"] = self.older_than
        return render_block(self.version, now, extra)


def match_sql(scope_count: int, type_count: int, *, heads_only: bool) -> str:
    """Rows matching an FTS5 expression in ``scope_count`` scopes (and ``type_count`` types), best
    BM25 first. Params: the expression, the scopes, the types, the limit."""
    clauses = [f"m.scope IN ({', '.join('?' * scope_count)})", "m.state NOT IN ('purged', 'pending')"]
    if type_count:
        clauses.append(f"m.type IN ({', '.join('?' * type_count)})")
    if heads_only:
        clauses.append("m.superseded_by IS NULL")
    return (
        "SELECT m.rowid, bm25(memory_fts) FROM memory_fts JOIN memory m ON m.rowid = memory_fts.rowid "
        f"WHERE memory_fts MATCH ? AND {' AND '.join(clauses)} ORDER BY bm25(memory_fts) LIMIT ?"
    )


def _quoted(terms: Sequence[str], joiner: str) -> str:
    return joiner.join('"' + term.replace('"', '""') + '"' for term in terms)


def _factors(version: Version, now: float) -> tuple[float, float]:
    if version.pinned or version.type in NO_DECAY_TYPES:
        decay = 1.0
    else:
        decay = max(DECAY_FLOOR, math.exp(-age_days(version.recorded_at, now) / DECAY_TAU_DAYS))
    use = 1.0 + min(USE_CAP, 0.1 * math.log1p(max(0, version.use_count)))
    return decay, use


def _effective_at(versions: Sequence[Version], at: str) -> Version | None:
    """What a lineage held at ``at``: the version with the greatest start (valid_from, else
    recorded_at) at or before it, unless that version's validity, retirement or expiry ended."""
    held = [v for v in versions if v.state in ("live", "retired")]
    started = [v for v in held if (v.valid_from or v.recorded_at) <= at]
    if not started:
        return None
    chosen = max(started, key=lambda v: ((v.valid_from or v.recorded_at), v.version))
    if chosen.valid_to is not None and chosen.valid_to < at:
        return None
    if chosen.retired_at is not None and chosen.retired_at <= at:
        return None
    if chosen.expires_at is not None and chosen.expires_at <= at:
        return None
    return chosen


def search_memories(
    conn: sqlite3.Connection,
    query: str,
    *,
    scopes: Sequence[str],
    types: Sequence[str] = (),
    tags: Sequence[str] = (),
    as_of: float | None = None,
    include_superseded: bool = False,
    top_n: int = 10,
    now: float,
) -> list[MemoryHit]:
    """Memories matching ``query`` in ``scopes``, best first, at most ``top_n``.

    By default only current, live, unexpired heads. ``include_superseded`` adds older
    versions (``current=False``); ``as_of`` (epoch seconds) shows per lineage the version
    that held then. ``breakdown`` = ``{bm25, vector, relevance, decay, use, total}``
    (``vector`` is None: keyword only in this phase).
    """
    terms = query_terms(query)
    if not terms or not scopes:
        return []
    sql = match_sql(len(scopes), len(types), heads_only=as_of is None and not include_superseded)
    rows = conn.execute(sql, (_quoted(terms, " OR "), *scopes, *types, RANK_WINDOW)).fetchall()
    if not rows:
        return []
    ranks = {int(rowid): -float(rank) for rowid, rank in rows}
    marks = ", ".join("?" * len(ranks))
    found = select_versions(conn, f"rowid IN ({marks})", tuple(ranks))
    now_iso = iso(now)
    chosen: list[tuple[Version, float, bool]] = []
    if as_of is not None:
        at = iso(as_of)
        best: dict[str, float] = {}
        for version in found:
            best[version.id] = max(best.get(version.id, 0.0), ranks[version.rowid or 0])
        for memory_id, raw in best.items():
            versions = lineage(conn, memory_id)
            effective = _effective_at(versions, at)
            if effective is not None:
                newest = max(v.version for v in versions if v.state != "pending")
                chosen.append((effective, raw, effective.version == newest))
    else:
        for version in found:
            if version.is_head and (version.state != "live" or (version.expires_at or "~") <= now_iso):
                continue
            chosen.append((version, ranks[version.rowid or 0], version.is_head))
    hits: list[MemoryHit] = []
    wanted_tags = set(tags)
    for version, raw, current in chosen:
        if wanted_tags and not wanted_tags & set(version.tags):
            continue
        relevance = raw / (raw + KEYWORD_HALF)
        decay, use = _factors(version, now)
        total = relevance * decay * use
        breakdown: dict[str, float | None] = {
            "bm25": round(raw, 4),
            "vector": None,
            "relevance": round(relevance, 4),
            "decay": round(decay, 4),
            "use": round(use, 4),
            "total": round(total, 4),
        }
        hits.append(MemoryHit(version, total, breakdown, current))
    hits.sort(key=lambda hit: (-hit.score, hit.version.id, -hit.version.version))
    return _newer_first(conn, hits)[:top_n]


def _newer_first(conn: sqlite3.Connection, hits: list[MemoryHit]) -> list[MemoryHit]:
    """Place the newer of two ``similar``-linked hits first and mark the older one."""
    ids = {hit.version.id for hit in hits if hit.current}
    if len(ids) < 2:
        return hits
    marks = ", ".join("?" * len(ids))
    pairs = conn.execute(
        f"SELECT src, dst FROM memory_links WHERE kind = 'similar' AND src IN ({marks}) AND dst IN ({marks})",
        (*ids, *ids),
    ).fetchall()
    for src, dst in pairs:
        by_id = {hit.version.id: hit for hit in hits if hit.current}
        first, second = by_id[src], by_id[dst]
        newer, older = (
            (first, second) if first.version.recorded_at >= second.version.recorded_at else (second, first)
        )
        older.older_than = newer.version.id
        if hits.index(older) < hits.index(newer):
            hits.remove(older)
            hits.insert(hits.index(newer) + 1, older)
    return hits


def forget_matches(conn: sqlite3.Connection, query: str, scopes: Sequence[str], mode: str) -> list[Version]:
    """The memories ``forget(query)`` would act on: every term of ``query`` matches, in ``scopes``.

    ``retire`` looks at current live or pending text; ``purge`` at every version (a fact
    that was once written down is forgotten too). Returns current heads, ordered by id,
    at most :data:`FORGET_MAX` + 1 (one more tells the caller to narrow the query).
    """
    terms = query_terms(query)
    if not terms or not scopes:
        return []
    marks = ", ".join("?" * len(scopes))
    heads_only = "AND m.superseded_by IS NULL AND m.state IN ('live', 'pending')" if mode == "retire" else ""
    sql = (
        "SELECT DISTINCT m.id FROM memory_fts JOIN memory m ON m.rowid = memory_fts.rowid "
        f"WHERE memory_fts MATCH ? AND m.scope IN ({marks}) AND m.state != 'purged' {heads_only} "
        "ORDER BY m.id LIMIT ?"
    )
    ids = [row[0] for row in conn.execute(sql, (_quoted(terms, " AND "), *scopes, FORGET_MAX + 1))]
    out: list[Version] = []
    for memory_id in ids:
        current = head(conn, memory_id)
        if current is not None and current.state != "purged":
            out.append(current)
    return out
