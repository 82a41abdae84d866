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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx
    from korg_bridge.recall.memory.committed import CommittedChange
    from korg_bridge.recall.memory.scopes import Context

__all__ = ["join"]


def _claude_writeback(store: Store, change: CommittedChange) -> dict[str, Any]:
    from korg_bridge.recall.interop.claude import writeback

    return writeback.project(store, change)


def _claude_may_hold(env: Mapping[str, str], scopes: Sequence[str]) -> bool:
    from korg_bridge.recall.interop.claude.paths import may_hold_files

    return may_hold_files(env, scopes)


def _claude_anything_to_read(ctx: Context, scopes: Sequence[str]) -> bool:
    from korg_bridge.recall.interop.claude.scan import anything_to_read

    return anything_to_read(ctx, scopes)


def _claude_take_in(store: Store, ctx: Context, scopes: Sequence[str]) -> list[str]:
    from korg_bridge.recall.interop.claude import intake

    return intake.refresh(store, ctx, scopes)


def _claude_describe(store: Store, conn: Tx) -> dict[str, Any] | None:
    from korg_bridge.recall.interop.claude.records import summary

    # Claude Code's folders are read into one person's store only (see interop/claude/scan.py).
    return summary(conn) if store.kind == "sqlite" else None


def join() -> None:
    """Register Claude Code's write-back and intake with the memory store (idempotent)."""
    from korg_bridge.recall.memory import projections, sources

    projections.add_projection("claude_writeback", _claude_writeback)
    sources.add_source(
        sources.Source(
            "claude",
            may_hold=_claude_may_hold,
            anything_to_read=_claude_anything_to_read,
            take_in=_claude_take_in,
            describe=_claude_describe,
        )
    )
