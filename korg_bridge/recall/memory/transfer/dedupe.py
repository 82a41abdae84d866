"""An import's near-duplicate candidates, found in memory instead of by a query per memory.

``remember`` asks the store for the best BM25 matches of its one new memory. An
import doing the same for each of thousands became quadratic: every query scores
everything a common word of the scope matches, and the scope grows as the import
writes (10,000 mem0 memories took five minutes). So an import loads the current
heads of the scopes it writes to once, into a :class:`ScopeIndex` per scope that it
keeps up to date as it plans, and finds each memory's candidates there:

* only words held by at most :data:`RARE` memories of the scope *nominate*
  candidates: a word most memories share says little about which fact a memory
  is (BM25 gives it almost no weight either), and following it would make each
  memory cost as much as the scope is large;
* nominated memories are ranked by the rarity of all the words they share with
  the new one (``idf`` summed, BM25's weighting without term frequencies), and
  the best :data:`~.policy.CANDIDATES` ``* 2`` -- as many rows as ``remember``
  reads -- go to the write policy's own judgement (:func:`.policy.judge`): the
  thresholds and the difference guard are the same.

A memory's cost is bounded by its distinct words times :data:`RARE`, whatever the
scope's size: an import is linear in what it reads and what it holds. A near
duplicate that shares only common words with a memory is not found -- a missed
merge, which costs one line; a wrong merge is never made for it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from korg_bridge.recall.memory.normalize import word_set
from korg_bridge.recall.memory.records import Version
from korg_bridge.recall.memory.write_policy import CANDIDATES

__all__ = ["RARE", "ScopeIndex", "words_of"]

RARE = 64
"""Memories of a scope a word may be held by and still nominate candidates."""


def words_of(title: str, body: str) -> frozenset[str]:
    """The words a memory is found by: its body's and its title's content words, stemmed."""
    return word_set(f"{title}\n{body}")


@dataclass(slots=True)
class ScopeIndex:
    """The live and pending heads of one scope, one per lineage (live before pending, as the
    policy prefers), by word."""

    heads: dict[str, Version] = field(default_factory=dict)
    words: dict[str, frozenset[str]] = field(default_factory=dict)
    postings: dict[str, set[str]] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)
    """When each lineage's head was put (ties go to the newest)."""
    _clock: int = 0

    def put(self, version: Version) -> None:
        """Make ``version`` its lineage's head here (replacing the one it supersedes)."""
        self.drop(version.id)
        found = words_of(version.title, version.body)
        self.heads[version.id] = version
        self.words[version.id] = found
        self._clock += 1
        self.order[version.id] = self._clock
        for word in found:
            self.postings.setdefault(word, set()).add(version.id)

    def drop(self, memory_id: str) -> None:
        if memory_id not in self.heads:
            return
        for word in self.words.pop(memory_id):
            holders = self.postings[word]
            holders.discard(memory_id)
            if not holders:
                del self.postings[word]
        del self.heads[memory_id]
        del self.order[memory_id]

    def candidates(self, title: str, body: str, limit: int = CANDIDATES * 2) -> list[Version]:
        """The heads most like a new memory's text, best first (at most ``limit``)."""
        mine = words_of(title, body)
        total = len(self.heads)
        nominated: Counter[str] = Counter()
        for word in mine:
            holders = self.postings.get(word)
            if holders and len(holders) <= RARE:
                nominated.update(holders)
        if not nominated:
            return []

        def idf(word: str) -> float:
            held = len(self.postings.get(word, ()))
            return math.log(1 + (total - held + 0.5) / (held + 0.5))

        weights = {word: idf(word) for word in mine}
        scored = [
            (sum(weights[word] for word in mine & self.words[memory_id]), self.order[memory_id], memory_id)
            for memory_id in nominated
        ]
        scored.sort(reverse=True)
        return [self.heads[memory_id] for _, _, memory_id in scored[:limit]]
