"""What a recall answer is made of: one history hit, and how its score was made.

Its own module because the search (:mod:`.search`), the ranking modes (:mod:`.semantic`)
and the context a hit is judged by (:mod:`.context`) all speak of hits, and none of them
should import another only for the type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Breakdown", "Hit"]

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
