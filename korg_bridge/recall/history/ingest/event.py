"""The normalized records every ledger shape is read into: an event, and a tool's late result.

Shape parsers (:mod:`korg_bridge.recall.history.ingest.shapes`) produce them, the pipeline
turns them into rows (:mod:`korg_bridge.recall.history.ingest.rows`), search and ``show``
return what was stored: keeping a single record type is what lets five
on-disk shapes be searched as one history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["KINDS", "Event", "ToolResult"]

KINDS: dict[str, str] = {
    "user_prompt": "what a person typed",
    "subagent_prompt": "a task prompt a parent agent wrote for a sub-agent",
    "llm_inference": "the model's reply text",
    "compact_summary": "a summary written when a conversation was compacted",
    "command": "a slash command (/clear, /model …) as the client records it",
    "command_output": "what a local slash command printed (<local-command-stdout>, caveats)",
    "shell": "a bash-mode command typed after ! and its output",
    "ide_context": "the IDE's note on the open file or selection",
    "interrupt": "the marker a client writes when the user interrupts a turn",
    "task_notification": "a background task's completion notice",
    "system_note": "text the client injected: system reminders, meta notes, AGENTS.md and environment context",
    "session_title": "a session's title (Claude Code summary lines)",
}
"""The event kinds that are not tool calls (``tool`` holds the tool's name otherwise), each with
what it is: only ``user_prompt`` is what a person typed."""


@dataclass(frozen=True, slots=True)
class Event:
    """One thing an agent did, whatever file shape it came from.

    ``source`` + ``offset`` identify the line on disk; ``seq`` is the ledger's
    own sequence number (``seq`` / ``seq_id``), or the 1-based position in the
    file for shapes that carry none (Claude Code transcripts, Codex rollouts).
    """

    source: str
    """Absolute path of the file the event was read from."""
    offset: int
    """Byte offset of the start of its line in ``source``."""
    seq: int
    shape: str
    """One of ``legacy``, ``journal``, ``envelope``, ``claude-code``, ``codex``."""
    session: str | None = None
    agent: str | None = None
    tool: str | None = None
    """The tool's name for a tool call, else one of :data:`KINDS`."""
    args: Any = None
    result: Any = None
    success: bool | None = None
    timestamp: str | None = None
    """ISO-8601 text as found in the file (normalized to UTC ``...Z`` when parseable)."""
    triggered_by: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Shape-specific details worth showing (``sidechain``, ``meta``, ``agent_id``,
    ``git_branch``, ``tool_use_id``, ``event_type`` …)."""
    cwd: str | None = None
    """The working directory the session ran in, when the shape records it: its project."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of a tool call that a later line brings, joined to its call by ``tool_use_id``.

    Claude Code's ``tool_result`` blocks and Codex's ``function_call_output``
    lines both arrive after their call, possibly in a later incremental read:
    :mod:`korg_bridge.recall.history.ingest.pairing` joins them.
    """

    tool_use_id: str
    result: Any
    success: bool | None
    timestamp: str | None
