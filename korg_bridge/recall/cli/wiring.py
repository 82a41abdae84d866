"""korg-recall's composition root: what the memory store's writes and reads are joined to.

``recall/memory`` knows nothing of Claude Code: a write hands what it committed to the
projections of :mod:`~korg_bridge.recall.memory.projections`, a read takes in the outside
sources of :mod:`~korg_bridge.recall.memory.sources` first. This module -- run once when
korg-recall's entry point is imported -- joins Claude Code's side to both: the write-back
as the projection after the mirror, the reading of its memory folders and instructions
files as the source a read takes in. Everything is imported where it is called, so joining
costs korg-recall's cold start nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store
    from korg_bridge.recall.memory.projections import CommittedChange

__all__ = ["join"]


def _claude_writeback(store: Store, change: CommittedChange) -> dict[str, Any]:
    from korg_bridge.recall.interop.claude import writeback

    return writeback.project(store, change)


def join() -> None:
    """Register Claude Code's write-back and intake with the memory store (idempotent)."""
    from korg_bridge.recall.memory import projections

    projections.add_projection("claude_writeback", _claude_writeback)
