"""The one normalized event record every ledger shape is read into.

Readers (``shapes``) produce it, the index stores it, search and ``show``
return it: keeping a single record type is what lets four on-disk shapes be
searched as one history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """One thing an agent did, whatever file shape it came from.

    ``source`` + ``offset`` identify the line on disk; ``seq`` is the ledger's
    own sequence number (``seq`` / ``seq_id``), or the 1-based position in the
    file for shapes that carry none (Claude Code transcripts).
    """

    source: str
    """Absolute path of the file the event was read from."""
    offset: int
    """Byte offset of the start of its line in ``source``."""
    seq: int
    shape: str
    """One of ``legacy``, ``journal``, ``envelope``, ``claude-code``."""
    session: str | None = None
    agent: str | None = None
    tool: str | None = None
    args: Any = None
    result: Any = None
    success: bool | None = None
    timestamp: str | None = None
    """ISO-8601 text as found in the file (normalized to UTC ``...Z`` when parseable)."""
    triggered_by: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Shape-specific details worth showing (e.g. ``sidechain``, ``tool_use_id``, ``event_type``)."""
