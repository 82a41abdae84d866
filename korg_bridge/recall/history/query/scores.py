"""Score scales every mode shares: a BM25 value as 0..1, and recency.

Keyword ranking (:mod:`korg_bridge.recall.history.query.search`) and the embedding modes
(:mod:`korg_bridge.recall.semantic.rank`) both turn FTS5's ``bm25()`` into a score
the same way; the formulas live here so that the dependency runs one way,
search → semantic → scores, and neither imports the other's internals.
Pure arithmetic: no numpy, nothing heavy.
"""

from __future__ import annotations

import math

__all__ = [
    "KEYWORD_HALF_SCORE",
    "SECONDS_PER_DAY",
    "keyword_score",
    "recency",
]

KEYWORD_HALF_SCORE = 5.0
"""The raw BM25 value that maps to 0.5: about one term found in a few percent of events."""
SECONDS_PER_DAY = 86400.0


def keyword_score(rank: float, half: float = KEYWORD_HALF_SCORE) -> float:
    """The score for an FTS5 ``bm25()`` value (lower is better): ``r / (r + half)`` of ``r = -rank``.

    Stable (it depends on the event, the query and the corpus, not on the other
    hits), monotone, in 0 to 1.
    """
    raw = max(0.0, -rank)
    return raw / (raw + half)


def recency(ts: float | None, now: float, tau_days: float) -> float:
    """``exp(-age_days / tau_days)``; 0 without a timestamp, 1 for one dated in the future."""
    if ts is None:
        return 0.0
    age_days = max(0.0, now - ts) / SECONDS_PER_DAY
    return math.exp(-age_days / tau_days)
