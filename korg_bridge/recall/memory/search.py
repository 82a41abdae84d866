"""Finding memories: ranked hits with their score breakdown, and ``forget``'s exact matching.

:func:`search_memories` is what ``recall`` over memories builds on: BM25 over the
store's keyword index (:class:`~.backend.FullText`: user words reach it only as
quoted terms), restricted to the given scopes, showing lineage heads by default --
or older versions too (``include_superseded``), or what held at a past time
(``as_of``). Every version is matched, and a lineage ranks by its best-matching
one: a revision that words a fact differently is still about what its older
wording names. A hit's
score is its relevance (its BM25 over the best hit's, so a memory that matches
more, or rarer, words of the query keeps its lead) times decay times use,
bounded, so decay only ranks and never hides:
``decay = 1 - 0.2·(1 - exp(-age_days/180))`` (0.8 at the least; 1 for pinned
memories and types ``user``/``feedback``), ``use = 1 + min(0.3, 0.1·ln(1 +
use_count))``.

Knowledge changes, and the newest statement of a fact should come first even
when an older one words it closer to the query. Two rules do that, both measured
on the knowledge-update suite of ``bench/memory_bench.py``:

* hits that match exactly the same words of the query, within
  :data:`TIE_BAND` of each other's score, are one tie: the newest (by
  ``valid_from``, else ``recorded_at``) goes first;
* lineages joined by a ``similar`` link are ranked together: the newer first,
  the older marked "older than" -- unless the two name different things
  (:func:`~.normalize.differences` finds names that differ), since then the
  link joins two facts of the same shape, not two versions of one fact.

:func:`forget_matches` is deliberately stricter: every query term must match,
no decay, ordered by id -- the same store gives the same list, which is what
the two-step ``forget`` confirms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.fts import STOPWORDS, query_terms
from korg_bridge.recall.memory.claude_records import source_kind
from korg_bridge.recall.memory.records import Version, age_days, iso
from korg_bridge.recall.memory.rows import head, lineage, select_versions
from korg_bridge.recall.memory.safety import age_label, render_block

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Tx

__all__ = [
    "FORGET_MAX",
    "MemoryHit",
    "forget_matches",
    "match_where",
    "search_memories",
]

DECAY_WEIGHT = 0.2
"""How much age can take off a score (decay is at least 1 - this): enough to order equals by
recency, too little to put a fresh memory that barely matches above an old one that matches well.
Measured on the knowledge-update suite (0.1-0.3 score within a point; 0.5 loses three)."""
DECAY_TAU_DAYS = 180.0
TIE_BAND = 0.7
"""Hits matching the same query words count as a tie, newest first, within this ratio of scores."""
USE_CAP = 0.3
NO_DECAY_TYPES = frozenset({"user", "feedback"})
ORDER_WINDOW = 64
"""Best-scored hits that ties and similar links may reorder (far above any useful ``top_n``)."""
_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>"
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
            "source_kind": source_kind(v.source),
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


def match_where(scope_count: int, type_count: int, *, heads_only: bool) -> str:
    """Which rows a search ranks: in ``scope_count`` scopes (and ``type_count`` types), neither
    purged nor pending, heads only unless older versions are asked for. A condition on ``m``;
    params: the scopes, then the types."""
    clauses = [f"m.scope IN ({', '.join('?' * scope_count)})", "m.state NOT IN ('purged', 'pending')"]
    if type_count:
        clauses.append(f"m.type IN ({', '.join('?' * type_count)})")
    if heads_only:
        clauses.append("m.superseded_by IS NULL")
    return " AND ".join(clauses)


def _factors(version: Version, now: float) -> tuple[float, float]:
    if version.pinned or version.type in NO_DECAY_TYPES:
        decay = 1.0
    else:
        fresh = math.exp(-age_days(version.recorded_at, now) / DECAY_TAU_DAYS)
        decay = 1.0 - DECAY_WEIGHT * (1.0 - fresh)
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
    conn: Tx,
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
    # Every version is searched, even when only heads are shown: a lineage is one fact, and a
    # revision that words it differently ("release 3.8" for "version 3.5") is still about what the
    # older wording names. A lineage ranks by its best-matching version and shows its head.
    where = match_where(len(scopes), len(types), heads_only=False)
    rows = conn.text.ranked(conn, terms, where=where, params=(*scopes, *types), limit=RANK_WINDOW)
    if not rows:
        return []
    ranks = dict(rows)
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
    elif include_superseded:
        for version in found:
            if version.is_head and (version.state != "live" or (version.expires_at or "~") <= now_iso):
                continue
            chosen.append((version, ranks[version.rowid or 0], version.is_head))
    else:
        best_of: dict[str, float] = {}
        heads: dict[str, Version] = {}
        for version in found:
            best_of[version.id] = max(best_of.get(version.id, 0.0), ranks[version.rowid or 0])
            if version.is_head:
                heads[version.id] = version
        for memory_id, raw in best_of.items():
            latest = heads.get(memory_id) or head(conn, memory_id)
            if latest is None or latest.state != "live" or (latest.expires_at or "~") <= now_iso:
                continue
            chosen.append((latest, raw, True))
    hits: list[MemoryHit] = []
    wanted_tags = set(tags)
    chosen = [c for c in chosen if not wanted_tags or wanted_tags & set(c[0].tags)]
    top = max((raw for _, raw, _ in chosen), default=0.0)
    for version, raw, current in chosen:
        relevance = raw / top if top > 0 else 0.0
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
    # Ties and links reorder the best hits only: what they move lands in the first places, and
    # finding which words 500 rows match costs more than the whole search.
    leading, rest = hits[:ORDER_WINDOW], hits[ORDER_WINDOW:]
    matched = _lineage_terms(conn, terms, leading, found)
    leading = _newest_of_ties(leading, matched)
    return (_newer_first(conn, leading, matched, at_a_time=as_of is not None) + rest)[:top_n]


def _start(version: Version) -> str:
    return version.valid_from or version.recorded_at


def _matched_terms(conn: Tx, terms: Sequence[str], rowids: Sequence[int]) -> dict[int, frozenset[str]]:
    """Which content words of the query each row matches (one FTS query per word, over these rows)."""
    words: list[str] = []
    for term in terms:
        core = term.strip(_EDGE_PUNCTUATION)
        if core and core not in STOPWORDS and core not in words:
            words.append(core)
    found: dict[int, set[str]] = {rowid: set() for rowid in rowids}
    if len(rowids) < 2:
        return {rowid: frozenset(hit) for rowid, hit in found.items()}
    marks = ", ".join("?" * len(rowids))
    for word in words:
        condition, params = conn.text.condition([word], every=True)
        sql = f"SELECT m.rowid FROM memory m WHERE m.rowid IN ({marks}) AND {condition}"
        for (rowid,) in conn.execute(sql, (*rowids, *params)):
            found[int(rowid)].add(word)
    return {rowid: frozenset(hit) for rowid, hit in found.items()}


def _lineage_terms(
    conn: Tx, terms: Sequence[str], hits: Sequence[MemoryHit], found: Sequence[Version]
) -> dict[int, frozenset[str]]:
    """The query words each shown hit's lineage matches, in any of its versions found, keyed by
    the shown version's rowid (an older version shown as such keeps only its own words)."""
    rows_of: dict[str, list[int]] = {}
    for version in found:
        rows_of.setdefault(version.id, []).append(version.rowid or 0)
    wanted: dict[int, list[int]] = {}
    for hit in hits:
        shown = hit.version.rowid or 0
        wanted[shown] = [shown] if not hit.current else sorted({shown, *rows_of.get(hit.version.id, ())})
    every = sorted({rowid for rowids in wanted.values() for rowid in rowids})
    matched = _matched_terms(conn, terms, every)
    return {
        shown: frozenset().union(*(matched.get(rowid, frozenset()) for rowid in rowids))
        for shown, rowids in wanted.items()
    }


def _newest_of_ties(hits: list[MemoryHit], matched: dict[int, frozenset[str]]) -> list[MemoryHit]:
    """Hits that match the same query words within :data:`TIE_BAND` of each other: newest first.

    Such hits differ in score only by length and term counts, which says nothing about which is
    current; the newer statement of a fact is the one to show.
    """
    buckets: dict[frozenset[str], list[int]] = {}
    for index, hit in enumerate(hits):  # each bucket in score order
        buckets.setdefault(matched.get(hit.version.rowid or 0, frozenset()), []).append(index)
    placed: set[int] = set()
    out: list[MemoryHit] = []
    for index, hit in enumerate(hits):
        if index in placed:
            continue
        bucket = buckets[matched.get(hit.version.rowid or 0, frozenset())]
        tie = [j for j in bucket if j not in placed and hits[j].score >= TIE_BAND * hit.score]
        tie.sort(key=lambda j: (_start(hits[j].version), hits[j].version.version), reverse=True)
        for j in tie:
            placed.add(j)
            out.append(hits[j])
    return out


def _rarest(conn: Tx, words: frozenset[str], cache: dict[str, int]) -> str | None:
    """The word of ``words`` the fewest rows hold: the subject, more often than not. A word no
    other row holds says how this memory was worded rather than what it is about, so it counts
    only when nothing else matched."""
    for word in words - cache.keys():
        condition, params = conn.text.condition([word], every=True)
        row = conn.execute(f"SELECT count(*) FROM memory m WHERE {condition}", params)
        cache[word] = int(row.fetchone()[0])
    shared = [word for word in words if cache[word] > 1] or list(words)
    return min(shared, key=lambda word: (cache[word], word)) if shared else None


def _newer_first(
    conn: Tx,
    hits: list[MemoryHit],
    matched: dict[int, frozenset[str]],
    *,
    at_a_time: bool = False,
) -> list[MemoryHit]:
    """Place the newer of two ``similar``-linked hits first and mark the older one -- when they are
    two versions of one fact: they name the same things, and the newer one matches the rarest word
    of the query the older one matches (its subject), so a link between two services' ports never
    puts the wrong service first."""
    # With as_of each lineage shows once, as it stood then: those versions are the ones to order.
    shown = [hit for hit in hits if hit.current or at_a_time]
    ids = {hit.version.id for hit in shown}
    if len(ids) < 2:
        return hits
    marks = ", ".join("?" * len(ids))
    pairs = conn.execute(
        f"SELECT src, dst FROM memory_links WHERE kind = 'similar' AND src IN ({marks}) AND dst IN ({marks})",
        (*ids, *ids),
    ).fetchall()
    if not pairs:
        return hits
    from korg_bridge.recall.memory.normalize import differences  # its patterns compile on import: only here

    document_counts: dict[str, int] = {}
    for src, dst in pairs:
        by_id = {hit.version.id: hit for hit in shown}
        first, second = by_id[src], by_id[dst]
        if any(d.startswith("names differ") for d in differences(first.version.body, second.version.body)):
            continue  # two facts of one shape ("Rust 1.75" / "Redis 7.2"), not two versions of one
        newer, older = (first, second) if _start(first.version) >= _start(second.version) else (second, first)
        theirs = matched.get(older.version.rowid or 0, frozenset())
        mine = matched.get(newer.version.rowid or 0, frozenset())
        subject = _rarest(conn, theirs, document_counts)
        if subject is not None and subject not in mine and 2 * len(mine & theirs) <= len(theirs):
            continue  # the newer one misses the older one's subject and most of what it matched
        older.older_than = newer.version.id
        if hits.index(older) < hits.index(newer):
            hits.remove(older)
            hits.insert(hits.index(newer) + 1, older)
    return hits


def forget_matches(conn: Tx, query: str, scopes: Sequence[str], mode: str) -> list[Version]:
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
    condition, params = conn.text.condition(terms, every=True)
    sql = (
        f"SELECT DISTINCT m.id FROM memory m WHERE {condition} AND m.scope IN ({marks}) "
        f"AND m.state != 'purged' {heads_only} ORDER BY m.id LIMIT ?"
    )
    ids = [row[0] for row in conn.execute(sql, (*params, *scopes, FORGET_MAX + 1))]
    out: list[Version] = []
    for memory_id in ids:
        current = head(conn, memory_id)
        if current is not None and current.state != "purged":
            out.append(current)
    return out
