"""Which shape a ledger line has, and the events it holds: one module per shape family.

Five on-disk shapes reach korg-recall, and this package is the only place
that knows them; everything downstream sees
:class:`~korg_bridge.recall.history.ingest.event.Event` and
:class:`~korg_bridge.recall.history.ingest.event.ToolResult`:

* :mod:`~korg_bridge.recall.history.ingest.shapes.ledger` — ``legacy``, ``journal``,
  ``envelope`` (korg ledgers: one line, one event);
* :mod:`~korg_bridge.recall.history.ingest.shapes.codex` — ``codex`` (Codex CLI rollouts);
* :mod:`~korg_bridge.recall.history.ingest.shapes.claude` — ``claude-code`` (Claude Code
  transcripts and stream-json output).

Each family module has ``NAMES`` (its shape names), ``detect(obj)`` (a
shape name or None, a few dict lookups: it runs for every line) and
``parse(obj, shape, where, state)``. To read a sixth shape, write its module
and add it to :data:`FAMILIES`; the first family whose ``detect`` answers
wins, so put a shape whose test is stricter first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from korg_bridge.recall.history.ingest.event import Event, ToolResult
from korg_bridge.recall.history.ingest.shapes import claude, codex, ledger
from korg_bridge.recall.history.ingest.shapes.common import State, Where, normalize_timestamp

__all__ = ["FAMILIES", "SHAPES", "State", "Where", "detect_shape", "normalize_timestamp", "parse_line"]


class ShapeFamily(Protocol):
    """What a shape module offers (modules satisfy it structurally)."""

    NAMES: tuple[str, ...]

    def detect(self, obj: Mapping[str, Any], /) -> str | None: ...

    def parse(
        self, obj: Mapping[str, Any], shape: str, where: Where, state: State, /
    ) -> list[Event | ToolResult]: ...


FAMILIES: tuple[ShapeFamily, ...] = (ledger, codex, claude)
"""Every shape family, in detection order."""

SHAPES = tuple(name for family in FAMILIES for name in family.NAMES)


def detect_shape(obj: Mapping[str, Any]) -> str | None:
    """Name the shape of one parsed line, or None when it is not a line of any known shape.

    A line of a known file format that holds no event (a Claude Code
    ``system`` line, a Codex ``token_count``) still has its shape: it belongs
    to that file, it just parses to nothing.
    """
    for family in FAMILIES:
        shape = family.detect(obj)
        if shape is not None:
            return shape
    return None


def parse_line(obj: Mapping[str, Any], where: Where, state: State) -> list[Event | ToolResult]:
    """The events and tool results of one parsed line ([] for a line of no known shape).

    ``state`` is what the parser remembers from the file's earlier lines; it
    may be updated.
    """
    for family in FAMILIES:
        shape = family.detect(obj)
        if shape is not None:
            return family.parse(obj, shape, where, state)
    return []
