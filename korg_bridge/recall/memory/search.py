"""Finding memories: ranked hits with their score breakdown, and ``forget``'s exact matching.

:func:`search_memories` is what ``recall`` over memories builds on, restricted to the
given scopes, showing lineage heads by default -- or older versions too
(``include_superseded``), or what held at a past time (``as_of``). Every version is
matched, and a lineage ranks by its best-matching one: a revision that words a fact
differently is still about what its older wording names.

**Scores** -- keyword, hybrid or semantic, with their breakdown -- are :mod:`.scoring`'s: this
module finds the candidates (the best keyword rows, the closest rows by meaning) and the version
each lineage shows, and orders the scored hits.

Knowledge changes, and the newest statement of a fact should come first even
when an older one words it closer to the query. Two rules do that, both measured
on the knowledge-update suite of ``bench/memory_bench.py``:

* hits that match exactly the same words of the query (at least one), within
  :data:`TIE_BAND` of each other's score, are one tie: the newest (by
  ``valid_from``, else ``recorded_at``) goes first. Ranked by meaning, two hits
  tie only if their own vectors are :data:`SAME_FACT_COSINE` alike too: there a
  score is mostly a cosine, and a word two memories share with a paraphrase by
  chance ("team", "request") says nothing of their being one fact;
* lineages joined by a ``similar`` link are ranked together: the newer takes
  the place of the older when the older ranks above it, the older right after
  it, marked "older than" -- unless the two name different things
  (:func:`~.normalize.differences` finds names that differ), since then the
  link joins two facts of the same shape, not two versions of one fact.

:func:`forget_matches` is deliberately stricter: every query term must match,
no decay, ordered by id -- the same store gives the same list, which is what
the two-step ``forget`` confirms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict, Unpack

from korg_bridge.recall.history.query.fts import STOPWORDS, query_terms
from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.rows import heads, lineage, match_where, select_versions
from korg_bridge.recall.memory.scoring import MEMORY_WEIGHTS, Candidate, Meaning, MemoryHit, score

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "FORGET_MAX",
    "MEMORY_WEIGHTS",
    "Meaning",
    "MemoryFilters",
    "MemoryHit",
    "forget_matches",
    "match_where",
    "search_memories",
]

TIE_BAND = 0.7
"""Hits matching the same query words count as a tie, newest first, within this ratio of scores."""
SAME_FACT_COSINE = 0.4
"""How alike two memories' vectors must be to tie when ranked by meaning. Two statements of one
fact lie closer (with the packaged MiniLM: the changed facts of the memory ranking suite's tune
half 0.51-0.83, the versions of the generated knowledge-update suite 0.41 and up); two memories of
the tune half taken at random lie below 0.38 ninety-nine times in a hundred. Without this rule
ties cost two tune paraphrases at hit@5 in semantic mode; without ties at all the newer of two
statements lost its first place (hit@1 0.46 -> 0.39; the generated suite's "newest first" 195 ->
184 of 202)."""
ORDER_WINDOW = 64
"""Best-scored hits that ties and similar links may reorder (far above any useful ``top_n``)."""
_EDGE_PUNCTUATION = "\"'`.,;:!?()[]{}<>"
RANK_WINDOW = 500
"""Best BM25 rows ranked in Python (decay, links): far above any useful ``top_n``."""
VECTOR_WINDOW = 100
"""Closest rows by meaning fed to hybrid and semantic ranking (4 x top_n when larger)."""
FORGET_MAX = 50
"""Memories one ``forget(query)`` may act on; more must be narrowed down first."""


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


def _evidence(
    conn: Tx, terms: Sequence[str], where: str, params: Sequence[object], meaning: Meaning | None, top_n: int
) -> tuple[dict[int, float], dict[int, float], set[int]]:
    """BM25 of the rows matching a query word (none in semantic mode), the cosine of every such
    row and of the closest rows by meaning (none without ``meaning``), and which rows hold every word."""
    raw: dict[int, float] = {}
    if terms and (meaning is None or meaning.mode == "hybrid"):
        raw = dict(conn.text.ranked(conn, terms, where=where, params=params, limit=RANK_WINDOW))
    cosines: dict[int, float] = {}
    complete: set[int] = set()
    if meaning is not None:
        window = max(VECTOR_WINDOW, 4 * top_n)
        vector, model, dim = meaning.vector, meaning.model_id, meaning.dim
        cosines.update(conn.vectors.nearest_rows(conn, where, params, model, dim, vector, window))
        unknown = [rowid for rowid in raw if rowid not in cosines]
        cosines.update(conn.vectors.cosines_of(conn, unknown, model, dim, vector))
        if raw and len(terms) > 1:
            complete = conn.text.holding(conn, list(raw), terms)
        elif raw:
            complete = set(raw)
    return raw, cosines, complete


def _best(values: Sequence[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def _candidates(
    conn: Tx,
    found: Sequence[Version],
    raw: dict[int, float],
    cosines: dict[int, float],
    complete: set[int],
    *,
    as_of: float | None,
    include_superseded: bool,
    now: float,
) -> list[Candidate]:
    """The versions to show -- per lineage its head, or what held ``as_of``; or every version found
    (``include_superseded``) -- each with the best evidence among the versions it stands for."""
    now_iso = iso(now)
    out: list[Candidate] = []
    if include_superseded and as_of is None:
        for version in found:
            if version.is_head and (version.state != "live" or (version.expires_at or "~") <= now_iso):
                continue
            rowid = version.rowid or 0
            out.append(
                Candidate(
                    version, raw.get(rowid, 0.0), cosines.get(rowid), version.is_head, rowid in complete
                )
            )
        return out
    rows_of: dict[str, list[Version]] = {}
    for version in found:
        rows_of.setdefault(version.id, []).append(version)
    headless = [i for i, vs in rows_of.items() if as_of is None and not any(v.is_head for v in vs)]
    current = heads(conn, headless) if headless else {}
    for memory_id, versions in rows_of.items():
        rowids = [v.rowid or 0 for v in versions]
        best_raw = max(raw.get(rowid, 0.0) for rowid in rowids)
        best_cosine = _best([cosines.get(rowid) for rowid in rowids])
        whole = any(rowid in complete for rowid in rowids)
        if as_of is not None:
            every = lineage(conn, memory_id)
            effective = _effective_at(every, iso(as_of))
            if effective is not None:
                newest = max(v.version for v in every if v.state != "pending")
                out.append(Candidate(effective, best_raw, best_cosine, effective.version == newest, whole))
            continue
        latest = next((v for v in versions if v.is_head), None) or current.get(memory_id)
        if latest is None or latest.state != "live" or (latest.expires_at or "~") <= now_iso:
            continue
        out.append(Candidate(latest, best_raw, best_cosine, True, whole))
        if latest.conflict:  # two machines revised one version (sync): every current text is shown
            for other in lineage(conn, memory_id):
                if other.is_head and other.state == "live" and other.version != latest.version:
                    out.append(Candidate(other, best_raw, best_cosine, True, whole))
    return out


class MemoryFilters(TypedDict, total=False):
    """Which memories of its scopes :func:`search_memories` may return, and which version of each."""

    types: Sequence[str]
    """Only these types (all when empty)."""
    tags: Sequence[str]
    """Only memories holding one of these tags (all when empty)."""
    as_of: float | None
    """Epoch seconds: per lineage, the version that held then."""
    include_superseded: bool
    """Older versions too (``current=False``)."""


def search_memories(
    conn: Tx,
    query: str,
    *,
    scopes: Sequence[str],
    top_n: int = 10,
    now: float,
    meaning: Meaning | None = None,
    **filters: Unpack[MemoryFilters],
) -> list[MemoryHit]:
    """Memories matching ``query`` in ``scopes``, best first, at most ``top_n``.

    By default only current, live, unexpired heads. ``include_superseded`` adds older
    versions (``current=False``); ``as_of`` (epoch seconds) shows per lineage the version
    that held then. Without ``meaning`` the ranking is by keywords; with it, ``hybrid`` or
    ``semantic`` (see the module docstring). ``breakdown`` = ``{bm25, vector, recency,
    pinned, decay, total}`` (None for a part the mode does not use).
    """
    types, tags = filters.get("types", ()), filters.get("tags", ())
    as_of, include_superseded = filters.get("as_of"), filters.get("include_superseded", False)
    terms = query_terms(query)
    if not scopes or not (terms if meaning is None else query.strip()):
        return []
    # Every version is searched, even when only heads are shown: a lineage is one fact, and a
    # revision that words it differently ("release 3.8" for "version 3.5") is still about what the
    # older wording names. A lineage ranks by its best-matching version and shows its head.
    where = match_where(len(scopes), len(types), heads_only=False)
    raw, cosines, complete = _evidence(conn, terms, where, (*scopes, *types), meaning, top_n)
    rowids = list(dict.fromkeys([*raw, *cosines]))
    if not rowids:
        return []
    found = select_versions(conn, f"rowid IN ({', '.join('?' * len(rowids))})", tuple(rowids))
    chosen = _candidates(
        conn, found, raw, cosines, complete, as_of=as_of, include_superseded=include_superseded, now=now
    )
    wanted_tags = set(tags)
    chosen = [c for c in chosen if not wanted_tags or wanted_tags & set(c.version.tags)]
    hits = score(chosen, meaning, now)
    hits.sort(key=lambda hit: (-hit.score, hit.version.id, -hit.version.version))
    # Ties and links reorder the best hits only: what they move lands in the first places, and
    # finding which words 500 rows match costs more than the whole search.
    leading, rest = hits[:ORDER_WINDOW], hits[ORDER_WINDOW:]
    matched = _lineage_terms(conn, terms, leading, found)
    alike = None
    if meaning is not None:
        shown = [hit.version.rowid for hit in leading if hit.version.rowid is not None]
        alike = conn.vectors.alike(conn, shown, meaning.model_id, meaning.dim)
    leading = _newest_of_ties(leading, matched, alike)
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
    for word in words:
        for rowid in conn.text.holding(conn, rowids, [word]):
            found[rowid].add(word)
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


def _one_fact(alike: dict[tuple[int, int], float] | None, first: MemoryHit, second: MemoryHit) -> bool:
    """Whether two hits may be two statements of one fact: always by keywords (``alike`` None);
    by meaning, when their vectors are :data:`SAME_FACT_COSINE` alike, or one of them has none yet
    (then the words decide, as by keywords)."""
    if alike is None or first is second:
        return True
    one, two = first.version.rowid or 0, second.version.rowid or 0
    cosine = alike.get((min(one, two), max(one, two)))
    return cosine is None or cosine >= SAME_FACT_COSINE


def _newest_of_ties(
    hits: list[MemoryHit],
    matched: dict[int, frozenset[str]],
    alike: dict[tuple[int, int], float] | None = None,
) -> list[MemoryHit]:
    """Hits that match the same query words within :data:`TIE_BAND` of each other: newest first.

    By keywords such hits differ in score only by length and term counts, which says nothing about
    which is current; the newer statement of a fact is the one to show. By meaning (``alike``: the
    cosines between the hits' own vectors) they must also be alike enough to be one fact.
    """
    buckets: dict[frozenset[str], list[int]] = {}
    for index, hit in enumerate(hits):  # each bucket in score order
        buckets.setdefault(matched.get(hit.version.rowid or 0, frozenset()), []).append(index)
    placed: set[int] = set()
    out: list[MemoryHit] = []
    for index, hit in enumerate(hits):
        if index in placed:
            continue
        words = matched.get(hit.version.rowid or 0, frozenset())
        if not words:  # found by meaning alone: no words to say it states the same fact
            placed.add(index)
            out.append(hit)
            continue
        bucket = buckets[words]
        tie = [
            j
            for j in bucket
            if j not in placed and hits[j].score >= TIE_BAND * hit.score and _one_fact(alike, hit, hits[j])
        ]
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
    puts the wrong service first.

    The newer one moves up to the older one's place, the older right after it: where the fact ranks
    is the older one's evidence. Moving the older one down below the newer instead, wherever that
    ranked, buried a memory that matched well under ones that barely did whenever a link was loose
    (a paraphrase's target fell from the fourth place to the fifteenth); on the tune seed of the
    generated knowledge-update suite the fact's newest value also came first more often (top hit
    178 -> 183 of 202 by keyword)."""
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
            hits.remove(newer)
            hits.insert(hits.index(older), newer)
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
    current = heads(conn, ids)
    return [current[i] for i in ids if i in current and current[i].state != "purged"]
