"""What a toolkit binary declares about one callable: the :class:`Command` record and the
options :meth:`korg_bridge.toolkit.Toolkit.command` takes.

Kept apart from the parser and the dispatcher so the one shape a declaration has is read in
one place; the ``--introspect`` entry is written from it (:meth:`Command.to_document`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

__all__ = ["DEFAULT_ON_INTERRUPT", "USER_INTERRUPT", "Command", "CommandOptions", "Handler"]

Handler = Callable[[dict[str, Any]], "int | None"]

USER_INTERRUPT = 6
"""``error.user_interrupt`` in the exit-code table."""
DEFAULT_ON_INTERRUPT = "nothing is left half-done: run it again to finish."
"""A callable's :attr:`Command.on_interrupt` unless it says more."""


class CommandOptions(TypedDict, total=False):
    """The optional keywords of :meth:`~korg_bridge.toolkit.Toolkit.command`.

    The first group shapes the declaration; the second are the contract's capability fields
    (``docs/introspect-v1.md``), written into ``capabilities`` as given. Any other keyword is
    a capability too (the contract lets new optional fields appear), so it is passed through
    at run time; this type names the ones the contract defines today.
    """

    name: str | None
    extra: Mapping[str, Any] | None
    positional: str | None
    surfaces: Sequence[str]
    cli_properties: Mapping[str, Any] | None
    on_interrupt: str
    long_running: bool
    requires_project: bool
    stateful: bool
    reads_stdin: bool
    supports_output_path: bool
    idempotent: bool


@dataclass(slots=True)
class Command:
    """One declared callable and the function that runs it."""

    command_id: str
    name: str
    description: str
    input_schema: dict[str, Any]
    capabilities: dict[str, Any]
    handler: Handler
    extra: dict[str, Any] = field(default_factory=dict)
    positional: str | None = None
    """A property also given as bare words on the command line (never by the bridge)."""
    surfaces: tuple[str, ...] = ("cli", "mcp")
    """Where the callable is offered. Without ``mcp`` the entry also says ``cli_only: true``, the
    marker the bridge honours (``surfaces`` alone is informational: see docs/introspect-v1.md)."""
    cli_properties: dict[str, Any] = field(default_factory=dict)
    """Flags only the command line takes (JSON Schema properties kept out of ``input_schema``, so
    no tool call can pass them): acts reserved for a person at a terminal."""
    on_interrupt: str = DEFAULT_ON_INTERRUPT
    """What a person who pressed Ctrl-C needs to know next: what was kept, and what the next run does."""

    def cli_schema(self) -> dict[str, Any]:
        """``input_schema`` plus :attr:`cli_properties`: what the command line parses and checks."""
        if not self.cli_properties:
            return self.input_schema
        props = {**(self.input_schema.get("properties") or {}), **self.cli_properties}
        return {**self.input_schema, "properties": props}

    def to_document(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "command_id": self.command_id,
            "name": self.name,
            "description": self.description,
            "surfaces": list(self.surfaces),
            **({} if "mcp" in self.surfaces else {"cli_only": True}),
            "input_schema": self.input_schema,
            "capabilities": self.capabilities,
        }
        entry.update(self.extra)
        return entry
