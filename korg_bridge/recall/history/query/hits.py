"""What a recall answer is made of: one history hit, how its score was made, and the
:class:`Ranker` that ranks events by a means history does not own.

Its own module because the search (:mod:`.search`), the ranking modes
(:mod:`korg_bridge.recall.semantic.rank`) and the context a hit is judged by (:mod:`.context`)
all speak of hits, and none of them should import another only for the type. The
:class:`Ranker` protocol is why history never imports the semantic layer: the caller that
loaded an embedding model hands its ranker to :func:`~.search.search`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.history.query.fts import Filters

__all__ = ["Breakdown", "Hit", "Ranked", "Ranker"]

Breakdown = dict[str, float | None]
"""``{"bm25", "vector", "recency", "total"}``; None for a part that takes no part in the score."""


@dataclass
class Hit:
    """One search result; ``ref`` is what ``show`` takes."""

    ref: str
    seq: int
    score: float
    agent: str | None
    tool: str | None
    session: str | None
    timestamp: str | None
    snippet: str
    event_id: int
    breakdown: Breakdown | None = None
    """How ``score`` was made: ``{bm25, vector, recency, total}``, None for a part the mode does not use."""
    project: str | None = None
    """The project the session ran in (the git root of its cwd)."""
    context: dict[str, Any] = field(default_factory=dict)
    """Where it happened: ``cwd`` (when not the project itself), ``git_branch``, ``agent_id`` (a
    sub-agent), ``sidechain``, ``meta``."""
    gone: bool = False
    """Its file has been deleted since it was indexed (``korg-recall prune --gone`` drops such events)."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked event, before collapsing and snippets."""

    event_id: int
    score: float
    breakdown: Breakdown


class Ranker(Protocol):
    """Ranks events for the modes that need more than the index's text (``semantic``, ``hybrid``).

    :class:`korg_bridge.recall.semantic.rank.SemanticRanker` is the one implementation: it
    holds the embedder, the hybrid weights and the clock, so :func:`~.search.search` needs
    none of them.
    """

    def rank(
        self, index: Index, query: str, *, mode: str, filters: Filters, min_score: float, top_n: int
    ) -> list[Ranked]:
        """Events for ``query`` in ``mode``, best first; more than ``top_n``, as repeats are collapsed after.

        Raises:
            UsageError: ``mode`` is not one this ranker knows.
            KorgError: the index cannot be read.
        """
        ...
