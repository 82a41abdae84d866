"""The write policy of ``remember``: deterministic decisions, no model in the loop.

Given a new memory (a :class:`Draft`) and the live memories of its scope,
:func:`decide` says what the write becomes, in this order:

1. **key** -- a live memory with the same ``key`` in the scope gets a new
   version (``superseded``; identical content: ``exists``);
2. **supersedes** -- a new version of that lineage (``superseded``);
3. **exact duplicate** -- same normalised hash: ``exists`` (the id comes back,
   provenance grows, nothing is duplicated or deleted);
4. **near duplicate** -- candidates by BM25 (and cosine when a model ran);
   similarity at or above the merge threshold *and* no difference found by
   :func:`~.normalize.differences` -> ``merged`` into a new version of it;
   similar but differing -> stored as new (``created``) with ``similar[]``;
5. otherwise ``created``.

The thresholds are chosen for precision: a wrong merge hides a fact, a missed
merge costs one line. Nothing here writes; :mod:`.operations` applies the
decision inside the same transaction it was taken in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.history.query.fts import STOPWORDS
from korg_bridge.recall.memory.normalize import differences, has_value, jaccard, word_set, words
from korg_bridge.recall.memory.records import Version, derived_refusal, is_derived
from korg_bridge.recall.memory.rows import head, select_versions

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "CANDIDATES_WHERE",
    "MERGE_COSINE",
    "MERGE_JACCARD",
    "SCOPE_SOFT_CAP",
    "SIMILAR_COSINE",
    "SIMILAR_JACCARD",
    "Decision",
    "Draft",
    "Similar",
    "decide",
    "judge",
]

MERGE_JACCARD = 0.7
"""Word-set overlap from which two memories with nothing differing are one fact reworded."""
SIMILAR_JACCARD = 0.35
"""Overlap from which a new memory is returned with ``similar[]`` (and linked)."""
MERGE_COSINE = 0.92
"""Embedding cosine from which two memories with nothing differing are merged."""
SIMILAR_COSINE = 0.80
VALUE_JACCARD = 0.15
"""Overlap from which a new memory that differs from a candidate only in values (numbers, dates)
and wording is linked to it as similar: the same fact updated in other words. Measured on the
knowledge-update suite of bench/memory_bench.py (tuning seed): rewordings of one fact overlap
0.15-0.35; at 0.15 half of them are linked (0.2: 0.97 newest-first instead of 0.985), and 13 of the
25 links this adds join facts of one shape about different lower-case subjects, which retrieval
does not reorder (see search._newer_first) and which only add a line to similar[]."""
_VALUE_DIFFERENCES = ("numbers differ", "dates or times differ")
CANDIDATES = 10
"""Live memories of the scope compared with a new one (by BM25, plus cosine when it ran)."""
MAX_QUERY_TERMS = 64
"""Distinct words of a new memory used to find candidates: a 8 KB body has hundreds."""
SCOPE_SOFT_CAP = 2000
"""Live memories per scope from which ``remember`` and ``stats`` say the scope needs review.
Nothing is refused or dropped because of it."""

CURRENT_STATES = ("live", "pending")


@dataclass(slots=True)
class Draft:
    """What a ``remember`` call asks to store, validated, redacted and classified."""

    body: str
    title: str
    title_given: bool
    type: str
    scope: str
    content_hash: str
    trust: str
    tags: list[str] = field(default_factory=list)
    key: str | None = None
    supersedes: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    pinned: bool = False
    source: dict[str, Any] | None = None


@dataclass(slots=True)
class Similar:
    """A live memory alike to the new one, and how."""

    id: str
    version: int
    title: str
    similarity: float
    measure: str
    differences: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "version": self.version,
            "title": self.title,
            "similarity": round(self.similarity, 3),
            "measure": self.measure,
            "differs": self.differences,
        }


@dataclass(slots=True)
class Decision:
    """What a write becomes: ``status``, the lineage it lands on (None: a new one), the rest."""

    status: str
    target: Version | None
    similar: list[Similar] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)


CANDIDATES_WHERE = "m.scope = ? AND m.superseded_by IS NULL AND m.state IN ('live', 'pending')"
"""Live and pending heads of one scope (param: the scope): what a new memory is compared with,
found by keyword search on any of its words, best first."""


def _match_terms(text: str) -> list[str]:
    terms: list[str] = []
    for word in words(text):
        if word in STOPWORDS or word in terms:
            continue
        terms.append(word)
        if len(terms) >= MAX_QUERY_TERMS:
            break
    return terms


def _current(conn: Tx, where: str, params: tuple[object, ...]) -> list[Version]:
    rows = select_versions(
        conn,
        # "state || ''": never an index on state -- the planner would pick (scope, state) over the
        # (scope, content_hash) index an exact-repeat check needs (7 ms instead of 0.05 at 10k). An
        # expression, not SQLite's unary "+", so the same SQL runs on PostgreSQL.
        f"{where} AND superseded_by IS NULL AND (state || '') IN ('live', 'pending') ORDER BY state, version",
        params,
    )
    by_id: dict[str, Version] = {}
    for row in rows:  # a lineage's live head before its pending proposal
        by_id.setdefault(row.id, row)
    return list(by_id.values())


def _candidates(conn: Tx, draft: Draft, cosines: dict[str, float]) -> list[Version]:
    found: dict[str, Version] = {}
    terms = _match_terms(draft.body + " " + draft.title)
    if terms:
        ranked = conn.text.ranked(
            conn, terms, where=CANDIDATES_WHERE, params=(draft.scope,), limit=CANDIDATES * 2
        )
        rowids = [rowid for rowid, _score in ranked]
        if rowids:
            marks = ", ".join("?" * len(rowids))
            for version in _current(conn, f"rowid IN ({marks})", tuple(rowids)):
                found.setdefault(version.id, version)
    close = sorted((c for c in cosines.items() if c[1] >= SIMILAR_COSINE), key=lambda c: -c[1])[:CANDIDATES]
    missing = [mid for mid, _ in close if mid not in found]
    if missing:
        marks = ", ".join("?" * len(missing))
        for version in _current(conn, f"scope = ? AND id IN ({marks})", (draft.scope, *missing)):
            found.setdefault(version.id, version)
    return list(found.values())


_REWORDED = ("words differ", "tense differs")
"""Differences a new value may come with: other words, and the tense of a change ("moved to March
19" after "is due by …") -- a link, never a merge."""


def _value_update(differing: list[str]) -> bool:
    """True when two texts differ in a value (a number, a date or time) and otherwise at most in
    wording or tense -- not in names, negation or order: the same fact with a new value, reworded."""
    values = [d for d in differing if d.startswith(_VALUE_DIFFERENCES)]
    return bool(values) and all(d.startswith((*_VALUE_DIFFERENCES, *_REWORDED)) for d in differing)


def decide(conn: Tx, draft: Draft, cosines: dict[str, float]) -> Decision:
    """The decision for ``draft`` against the store as it is inside the caller's transaction.

    ``cosines`` maps memory ids of the scope to their cosine with the draft ({} when no
    model ran).

    Raises:
        UsageError: ``supersedes`` names no memory, or one that was purged.
    """
    if draft.key is not None:
        keyed = _current(conn, "scope = ? AND key = ?", (draft.scope, draft.key))
        if keyed:
            target = keyed[0]
            if target.content_hash == draft.content_hash:
                return Decision("exists", target, checks={"key": f"same content as {target.id}"})
            return Decision("superseded", target, checks={"key": f"new version of {target.id}"})
    if draft.supersedes is not None:
        target_head = head(conn, draft.supersedes)
        if target_head is None:
            raise UsageError(
                f"supersedes={draft.supersedes}: no such memory. List ids with `korg-recall memories`."
            )
        if target_head.state == "purged":
            raise UsageError(
                f"supersedes={draft.supersedes}: that memory was purged; remember this one anew."
            )
        if is_derived(target_head):
            raise UsageError(derived_refusal(target_head))
        return Decision("superseded", target_head, checks={"supersedes": draft.supersedes})
    exact = _current(conn, "scope = ? AND content_hash = ?", (draft.scope, draft.content_hash))
    if exact:
        return Decision("exists", exact[0], checks={"exact": f"duplicate of {exact[0].id}"})
    return _near(conn, draft, cosines)


def _near(conn: Tx, draft: Draft, cosines: dict[str, float]) -> Decision:
    return judge(draft, _candidates(conn, draft, cosines), cosines)


def judge(draft: Draft, candidates: list[Version], cosines: dict[str, float]) -> Decision:
    """The near-duplicate step of :func:`decide`: ``merged`` into one of ``candidates`` (live or
    pending heads of the draft's scope, found by the caller), else ``created`` with the similar
    ones. An import finds its candidates its own way (:mod:`.dedupe`) and judges them here."""
    mine = word_set(draft.body)
    merge: tuple[float, Version, Similar] | None = None
    similar: list[Similar] = []
    best = 0.0
    for candidate in candidates:
        overlap = jaccard(mine, word_set(candidate.body))
        cosine = cosines.get(candidate.id)
        best = max(best, overlap)
        merge_by = overlap >= MERGE_JACCARD or (cosine is not None and cosine >= MERGE_COSINE)
        alike = overlap >= SIMILAR_JACCARD or (cosine is not None and cosine >= SIMILAR_COSINE)
        maybe_value = overlap >= VALUE_JACCARD and (has_value(draft.body) or has_value(candidate.body))
        differing = differences(draft.body, candidate.body) if alike or maybe_value else []
        if not alike and not _value_update(differing):
            continue
        measure, score = (
            ("cosine", cosine) if cosine is not None and cosine > overlap else ("jaccard", overlap)
        )
        entry = Similar(
            candidate.id, candidate.version, candidate.title, float(score or 0.0), measure, differing
        )
        # Never merged into a copy of Claude Code's file: the file would undo it on its next change.
        if merge_by and not differing and candidate.state == "live" and not is_derived(candidate):
            if merge is None or entry.similarity > merge[0]:
                merge = (entry.similarity, candidate, entry)
            continue
        similar.append(entry)
    checks: dict[str, Any] = {
        "keyword": f"ran: {len(candidates)} candidate(s), best word overlap {best:.2f}",
    }
    similar.sort(key=lambda s: -s.similarity)
    if merge is not None:
        checks["merged_into"] = merge[1].id
        return Decision("merged", merge[1], [s for s in similar if s.id != merge[1].id], checks)
    return Decision("created", None, similar, checks)
