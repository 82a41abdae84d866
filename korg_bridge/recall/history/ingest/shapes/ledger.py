"""The three korg ledger shapes: one line is one complete event.

* ``legacy`` — the old flat record ``{seq, source_agent, tool_name, args,
  result, success, triggered_by, timestamp?}``;
* ``journal`` — the flat korg-ledger@v1 record (``seq_id``, ``schema_version``,
  ``prev_hash``, ``entry_hash`` at top level);
* ``envelope`` — the journal envelope: the same fields under ``event``,
  ``triggered_by`` under ``metadata``. ``seq`` is the real ``seq_id`` (the
  reference implementation read it as 0 for every line).

Decisions: ``agent`` is ``source_agent``; ``session`` is the record's own
``session_id``/``sessionId`` when it carries one, else the file's stem
(``~/.korg/sessions/<session>.jsonl``). The envelope's ``campaign_id`` is not
used: a campaign spans sessions, and writers leave it as the nil UUID.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from korg_bridge.recall.history.ingest.event import Event, ToolResult
from korg_bridge.recall.history.ingest.shapes.common import (
    MAP,
    State,
    Where,
    is_int,
    normalize_timestamp,
    record_session,
    stem,
)

__all__ = ["NAMES", "detect", "parse"]

NAMES: tuple[str, ...] = ("legacy", "journal", "envelope")


def detect(obj: Mapping[str, Any]) -> str | None:
    """``envelope``/``journal`` for a line with an integer ``seq_id``, ``legacy`` for a ``seq``
    with a tool or agent, else None."""
    get = obj.get
    if is_int(get("seq_id")):
        return "envelope" if isinstance(get("event"), MAP) else "journal"
    if is_int(get("seq")) and ("tool_name" in obj or "source_agent" in obj):
        return "legacy"
    return None


def parse(obj: Mapping[str, Any], shape: str, where: Where, state: State) -> list[Event | ToolResult]:
    """The line's one event; fields of the wrong type are dropped, never raised on."""
    if shape == "envelope":
        body: Mapping[str, Any] = obj["event"]
        metadata = obj.get("metadata")
        meta: Mapping[str, Any] = metadata if isinstance(metadata, MAP) else {}
        seq, triggered_by = obj["seq_id"], meta.get("triggered_by")
        session = record_session(obj, meta)
    else:
        body = meta = obj
        seq = obj["seq_id"] if shape == "journal" else obj["seq"]
        triggered_by = obj.get("triggered_by")
        session = record_session(obj)

    extra: dict[str, Any] = {}
    for name in ("event_type", "duration_ms"):
        if body.get(name) is not None:
            extra[name] = body[name]
    if shape == "envelope" and isinstance(meta.get("event_id"), str):
        extra["event_id"] = meta["event_id"]

    agent = body.get("source_agent")
    tool = body.get("tool_name")
    success = body.get("success")
    return [
        Event(
            source=where.source,
            offset=where.offset,
            seq=int(seq),
            shape=shape,
            session=session or stem(where.source),
            agent=agent if isinstance(agent, str) else None,
            tool=tool if isinstance(tool, str) else None,
            args=body.get("args"),
            result=body.get("result"),
            success=success if isinstance(success, bool) else None,
            timestamp=normalize_timestamp(body.get("timestamp", obj.get("timestamp"))),
            triggered_by=int(triggered_by) if is_int(triggered_by) else None,
            extra=extra,
        )
    ]
