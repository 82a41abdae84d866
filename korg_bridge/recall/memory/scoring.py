"""A memory hit's score: its parts, the weights that make the total, and the breakdown in words.

:mod:`.search` finds the candidates and orders the hits; this module scores them.

**Scores, by mode** (each part in 0..1, the same scales as history hits'):

* ``bm25`` -- keyword evidence: the store's BM25 of the query's words (:class:`~.backend.FullText`:
  user words reach it only as quoted terms; every matched word weighs above 0, so 0 means
  no query word matched), as ``r / (r + half)`` (:func:`~korg_bridge.recall.history.query.scores.keyword_score`):
  ``half`` is :data:`~korg_bridge.recall.history.query.scores.KEYWORD_HALF_SCORE` in keyword mode, as for
  history, and :data:`HYBRID_HALF_SCORE` in hybrid;
* ``vector`` -- meaning: the cosine of the query with the memory's best-matching version,
  floored at 0; a memory not embedded yet takes the cosine found at its keyword rank in the
  vector ranking (``vector_imputed``; ``vector`` None): never penalised for the background
  indexer not having reached it, as history's events;
* ``recency`` -- ``exp(-age_days / tau_days)`` of when the version was recorded;
* ``pinned`` -- :data:`PINNED_BONUS` for a pinned memory, else 0;
* ``decay`` -- ``1 - 0.2·(1 - exp(-age_days/180))`` (0.8 at the least; 1 for pinned memories
  and types ``user``/``feedback``): in keyword mode, old facts rank a little lower, never hidden.

``keyword``: ``total = bm25 · decay``. ``hybrid``: ``total = w_bm25·bm25 + w_vector·vector +
w_recency·recency + pinned`` over the union of the best keyword and vector candidates (one that
holds no query word needs a cosine of :data:`MEANING_ALONE_FLOOR`). ``semantic``: ``total = vector
+ pinned`` over embedded memories whose cosine reaches ``min_score`` (:func:`semantic_floor`: the
same noise floor unless a call sets its own). Being returned never raises a score: the use count a
recall keeps is bookkeeping, not evidence (it used to multiply the score, so a memory recalled often
outranked a better match).

**No age decay by meaning.** In keyword mode two statements of one fact match the same words with
nearly the same BM25, and decay orders them newest first. By meaning a score is how close a memory
is to the question, and a discount of up to a fifth for age reorders memories whose cosines lie a
few hundredths apart: on the tune half of the memory ranking suite it cost paraphrases (semantic
hit@1 0.36 -> 0.32, hit@5 0.73 -> 0.71) and the newer statement of changed facts its first place
(hit@1 0.46 -> 0.43), while the generated knowledge-update suite hardly moved (newest first 197
of 202 with it, 195 without; its top hit 179 either way). Which of two statements is current is :mod:`.search`'s tie and link
rules' to say: they compare the two, where decay discounted every old memory alike. ``decay`` is
None in these modes' breakdowns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from korg_bridge.recall.history.query.scores import KEYWORD_HALF_SCORE, keyword_score, recency
from korg_bridge.recall.memory.records import Version, age_days, parse_iso, source_kind
from korg_bridge.recall.memory.safety import age_label, render_block

__all__ = [
    "HYBRID_HALF_SCORE",
    "MEANING_ALONE_FLOOR",
    "MEMORY_WEIGHTS",
    "PINNED_BONUS",
    "Candidate",
    "Meaning",
    "MemoryHit",
    "decay_of",
    "score",
    "semantic_floor",
]

DECAY_WEIGHT = 0.2
"""How much age can take off a score (decay is at least 1 - this): enough to order equals by
recency, too little to put a fresh memory that barely matches above an old one that matches well.
Measured on the knowledge-update suite (0.1-0.3 score within a point; 0.5 loses three)."""
DECAY_TAU_DAYS = 180.0
NO_DECAY_TYPES = frozenset({"user", "feedback"})

HYBRID_HALF_SCORE = 60.0
"""The BM25 value that counts as 0.5 of keyword evidence in a hybrid total, as for history: it takes
several rare matching words to count for much, so a word a paraphrase shares by chance does not
outweigh its meaning. Chosen on the tune half of the memory ranking suite (``bench/memory_bench.py
--ranking``): 20 and 60 within a question of each other, 5 lost up to a third of the paraphrases."""
MEANING_ALONE_FLOOR = 0.15
"""The cosine a hybrid hit needs when it holds no word of the query, and a semantic hit unless the
call sets its own floor: below it a likeness is noise (unrelated short texts lie around 0.0-0.2
with the packaged MiniLM), and every recall would show memories. On the tune half it cost one
paraphrase in 154 against no floor; 0.2 cost three."""
HISTORY_MIN_SCORE = 0.30
"""The recall call's default ``min_score`` (history's semantic floor,
:data:`korg_bridge.recall.semantic.DEFAULT_MIN_SCORE`; repeated so that scoring memories never
imports the history ranking)."""
PINNED_BONUS = 0.05
"""Added to a pinned memory's hybrid or semantic total: a tie-breaker, not a trump."""
MEMORY_WEIGHTS: dict[str, float] = {"bm25": 0.1, "vector": 0.9, "recency": 0.0, "tau_days": 90.0}
"""The hybrid weights of memories, unless a call passes its own (``weights``). Chosen on the tune
half of the memory ranking suite: memories are short statements of one fact each, so a cosine says
more of them than of a long history event, and a paraphrase's keyword matches are words it shares
by chance: with the floor, decay, tie and link fixes, ``bm25`` 0.15 and 0.2 each lost two tune
paraphrases against 0.1 (hit@5 0.71 against 0.73, semantic's own) and 0.05 gained none, while every
keyword-style question stayed at keyword mode's figures (hit@1 0.99, hit@5 1.00). Recency cost
paraphrases too (0.1 with a 90-day time constant: hit@5 0.70 -> 0.60; knowledge updates did not
gain): which of two versions is newer is the tie and link rules' to say."""


@dataclass(frozen=True, slots=True)
class Meaning:
    """What ranking memories by meaning needs: the mode, the query's vector and its model, the weights."""

    mode: str
    """``hybrid`` or ``semantic``."""
    vector: Any
    model_id: str
    dim: int
    bm25: float = MEMORY_WEIGHTS["bm25"]
    weight_vector: float = MEMORY_WEIGHTS["vector"]
    weight_recency: float = MEMORY_WEIGHTS["recency"]
    tau_days: float = MEMORY_WEIGHTS["tau_days"]
    min_score: float = MEANING_ALONE_FLOOR
    """The cosine a memory needs in ``semantic`` mode (:func:`semantic_floor`)."""


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
    how: str = ""
    """The breakdown in words: what each part is and how they make the total."""

    @property
    def matched_words(self) -> bool:
        """Whether the memory holds a word of the query (its keyword evidence is above 0)."""
        return bool(self.breakdown.get("bm25"))

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


def semantic_floor(min_score: float | None) -> float:
    """The cosine a memory needs in ``semantic`` mode, for a recall call's ``min_score``.

    The call's default (:data:`HISTORY_MIN_SCORE`, 0.30) is history's floor, and a memory is one
    short statement: with the packaged MiniLM a question asking for it in other words often lies
    0.15-0.30 from it. On the tune half of the memory ranking suite that floor held semantic mode's
    paraphrase hit@5 at 0.62 where the bare cosine of every memory reaches 0.73 (0.15: 0.70, and
    0.73 with the tie, link and decay fixes). So memories take :data:`MEANING_ALONE_FLOOR`,
    hybrid's noise floor, unless the call asks for another floor than the default; a call asking
    for 0.30 itself is read as the default (the schema fills the default in before the call is seen).
    """
    if min_score is None or min_score == HISTORY_MIN_SCORE:
        return MEANING_ALONE_FLOOR
    return min_score


def decay_of(version: Version, now: float) -> float:
    """How much age takes off the memory's score: 1 down to ``1 - DECAY_WEIGHT``."""
    if version.pinned or version.type in NO_DECAY_TYPES:
        return 1.0
    fresh = math.exp(-age_days(version.recorded_at, now) / DECAY_TAU_DAYS)
    return 1.0 - DECAY_WEIGHT * (1.0 - fresh)


@dataclass(slots=True)
class Candidate:
    """A version to show, with the best evidence of what it stands for (its lineage, or itself)."""

    version: Version
    raw: float
    """BM25 (0: no query word)."""
    cosine: float | None
    """Cosine with the query (None: no vector)."""
    current: bool
    complete: bool = False
    """Holds every word of the query (in a version it stands for)."""


def _recorded(version: Version) -> float | None:
    try:
        return parse_iso(version.recorded_at)
    except (ValueError, OverflowError, OSError):
        return None


def score(candidates: Sequence[Candidate], meaning: Meaning | None, now: float) -> list[MemoryHit]:
    """Each candidate's total and breakdown, for the mode (see the module docstring)."""
    hits: list[MemoryHit] = []
    if meaning is None:
        for c in candidates:
            bm25, decay = keyword_score(-c.raw, KEYWORD_HALF_SCORE), decay_of(c.version, now)
            total = bm25 * decay
            breakdown: dict[str, float | None] = {
                "bm25": round(bm25, 4), "vector": None, "recency": None, "pinned": None,
                "decay": round(decay, 4), "total": round(total, 4),
            }  # fmt: skip
            how = f"keyword match (bm25) {bm25:.2f} * age decay {decay:.2f} = {total:.2f}"
            hits.append(MemoryHit(c.version, total, breakdown, c.current, how=how))
        return hits
    # The vector ranking of the candidates, and their keyword ranks: a memory without a vector is
    # given the cosine found at its keyword rank (history's rule), so only those above it by keyword
    # and those closer in meaning can pass it.
    ranked_cosines = sorted((max(0.0, c.cosine) for c in candidates if c.cosine is not None), reverse=True)
    by_keyword = sorted((c for c in candidates if c.raw > 0), key=lambda c: -c.raw)
    keyword_rank = {id(c): position for position, c in enumerate(by_keyword)}

    def at_rank(c: Candidate) -> float:
        rank = keyword_rank.get(id(c))
        return ranked_cosines[rank] if rank is not None and rank < len(ranked_cosines) else 0.0

    for c in candidates:
        pinned = PINNED_BONUS if c.version.pinned else 0.0
        if meaning.mode == "semantic":
            if c.cosine is None or c.cosine < meaning.min_score:
                continue
            vector = max(0.0, c.cosine)
            total = vector + pinned
            breakdown = {
                "bm25": None, "vector": round(vector, 4), "recency": None, "pinned": round(pinned, 4),
                "decay": None, "total": round(total, 4),
            }  # fmt: skip
            how = f"meaning (cosine) {vector:.2f}{_pinned(pinned)} = {total:.2f}"
            hits.append(MemoryHit(c.version, total, breakdown, c.current, how=how))
            continue
        bm25 = keyword_score(-c.raw, HYBRID_HALF_SCORE)
        if c.cosine is None:
            vector = at_rank(c)
        else:
            vector = max(0.0, c.cosine)
            if c.complete:  # it holds every query word: its meaning counts at least as its keyword rank's
                vector = max(vector, at_rank(c))
        if bm25 <= 0 and vector < max(MEANING_ALONE_FLOOR, 1e-9):
            continue  # recency alone never makes a hit, nor a faint likeness alone
        fresh = recency(_recorded(c.version), now, meaning.tau_days)
        weighted = meaning.bm25 * bm25 + meaning.weight_vector * vector + meaning.weight_recency * fresh
        total = weighted + pinned
        breakdown = {
            "bm25": round(bm25, 4),
            "vector": None if c.cosine is None else round(vector, 4),
            "recency": round(fresh, 4),
            "pinned": round(pinned, 4),
            "decay": None,
            "total": round(total, 4),
        }
        imputed = ""
        if c.cosine is None:
            breakdown["vector_imputed"] = round(vector, 4)
            imputed = " (not embedded yet: the cosine at its keyword rank)"
        how = (
            f"{meaning.bm25:g} * keyword match (bm25) {bm25:.2f} + {meaning.weight_vector:g} * meaning "
            f"(cosine) {vector:.2f}{imputed} + {meaning.weight_recency:g} * recency {fresh:.2f}{_pinned(pinned)} "
            f"= {total:.2f}"
        )
        hits.append(MemoryHit(c.version, total, breakdown, c.current, how=how))
    return hits


def _pinned(bonus: float) -> str:
    return f" + pinned {bonus:.2f}" if bonus else ""
