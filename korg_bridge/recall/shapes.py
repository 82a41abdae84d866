"""Recognize one ledger line's shape and turn it into normalized events.

Four on-disk shapes reach korg-recall, and this is the only module that knows
them; everything downstream sees :class:`~korg_bridge.recall.event.Event`:

* ``legacy`` — the old flat record ``{seq, source_agent, tool_name, args,
  result, success, triggered_by, timestamp?}``;
* ``journal`` — the flat korg-ledger@v1 record (``seq_id``, ``schema_version``,
  ``prev_hash``, ``entry_hash`` at top level);
* ``envelope`` — the journal envelope: the same fields under ``event``,
  ``triggered_by`` under ``metadata``. ``seq`` is the real ``seq_id`` (the
  reference implementation read it as 0 for every line);
* ``claude-code`` — Claude Code transcripts (``~/.claude/projects/**.jsonl``)
  and ``claude --output-format stream-json`` output, which share one line
  format.

A Claude Code ``tool_result`` comes back on a later line than its
``tool_use`` — possibly in a later incremental read — so it cannot be joined
here. It becomes a :class:`ResultPatch` that the index applies to the event
with the same ``tool_use_id``.

Decisions:

* ledger shapes: ``agent`` is ``source_agent``; ``session`` is the record's own
  ``session_id``/``sessionId`` when it carries one, else the file's stem
  (``~/.korg/sessions/<session>.jsonl``). The envelope's ``campaign_id`` is not
  used: a campaign spans sessions, and writers leave it as the nil UUID.
* Claude Code: ``agent`` is ``claude-code#<first 8 chars of the session id>``;
  ``seq`` is the 1-based line number, shared by all events of one line, with
  ``extra["part"]`` (0-based) keeping them apart. Prompts and assistant text
  carry ``success=None``: nothing ran that could fail.
* a ``tool_result``'s ``result`` is ``{"output": <text>}`` (the envelope's
  convention), list content joined with newlines, non-text blocks shown as
  ``[<type>]``.
* timestamps: see :func:`normalize_timestamp`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import PurePath
from typing import Any, TypeGuard

from korg_bridge.recall.event import Event

__all__ = ["SHAPES", "ResultPatch", "detect_shape", "normalize", "normalize_timestamp"]

SHAPES = ("legacy", "journal", "envelope", "claude-code")

_EPOCH_MS_THRESHOLD = 100_000_000_000
"""Numbers above this are epoch milliseconds: as seconds they would be past the year 5000."""

_LONG_FRACTION = re.compile(r"(\.\d{6})\d+")
"""Nanosecond timestamps (Rust, Go) have more digits than datetime can hold."""

_UTC_FORM = re.compile(r"([1-9]\d{3}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(?:Z|[+-]00:00)?")
"""An ISO date-time already in UTC (or naive, hence UTC): canonical once the fraction is fixed."""

_MAP = (dict, Mapping)
"""``isinstance`` against a Mapping ABC costs ~200 ns; parsed JSON is a dict, matched first."""


@dataclass(frozen=True, slots=True)
class ResultPatch:
    """The outcome of a Claude Code tool call, to be joined to its event by ``tool_use_id``."""

    source: str
    tool_use_id: str
    result: Any
    success: bool | None
    timestamp: str | None


def normalize_timestamp(value: Any) -> str | None:
    """Return ``value`` as UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``, or as found if unparseable.

    Sorting and ``--since`` filters compare timestamps as text, which only works
    when every source writes them the same way. ISO-8601 strings are
    converted (naive ones are taken as UTC, the ecosystem's convention);
    numbers are epoch seconds, or milliseconds when very large. A string that
    does not parse is kept verbatim rather than lost; anything else is None.

    Called once per indexed line, so the forms writers actually use (UTC with
    ``Z``, ``+00:00`` or no offset) are rewritten as text; only other offsets
    go through ``astimezone``.
    """
    if isinstance(value, str):
        match = _UTC_FORM.fullmatch(value)
        if match is not None:
            return _utc_text(value, match)
        return _parse_text(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) > _EPOCH_MS_THRESHOLD else value
        try:
            return _format(datetime.fromtimestamp(seconds, UTC))
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _utc_text(value: str, match: re.Match[str]) -> str:
    """A UTC (or naive) ISO string, canonicalized by text operations once it is known to parse."""
    whole, fraction = match.groups()
    if value[-1] == "Z" and (fraction is None or (len(fraction) == 6 and fraction != "000000")):
        return value  # already canonical: parsing it could only give it back, or keep it as found
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return value
    if fraction is None or not fraction.strip("0"):
        return whole + "Z"
    return f"{whole}.{fraction.ljust(6, '0')}Z"


def _parse_text(value: str) -> str:
    text = _LONG_FRACTION.sub(r"\1", value.strip()) if "." in value else value.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _format(moment.astimezone(UTC))


def _format(moment: datetime) -> str:
    fraction = f".{moment.microsecond:06d}" if moment.microsecond else ""
    if moment.year < 1000:  # strftime does not pad such years; keep its rendering
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
    return (
        f"{moment.year}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{fraction}Z"
    )


def _is_int(value: object) -> TypeGuard[int]:
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def detect_shape(obj: Mapping[str, Any]) -> str | None:
    """Name the shape of one parsed line, or None when it is not an event line.

    A Claude Code line of a kind that holds no events (``system``,
    ``attachment``, ``result``…) is still ``claude-code``: it belongs to a
    transcript, it just normalizes to nothing.
    """
    get = obj.get
    if _is_int(get("seq_id")):
        return "envelope" if isinstance(get("event"), _MAP) else "journal"
    if _is_int(get("seq")) and ("tool_name" in obj or "source_agent" in obj):
        return "legacy"
    if isinstance(get("type"), str) and ("message" in obj or "sessionId" in obj or "session_id" in obj):
        return "claude-code"
    return None


def normalize(obj: Mapping[str, Any], *, source: str, offset: int, line_no: int) -> list[Event | ResultPatch]:
    """Turn one parsed line into zero or more events and result patches.

    ``source`` is the file's absolute path, ``offset`` the byte offset of the
    line's start, ``line_no`` its 1-based position (the ``seq`` of Claude Code
    events). Never raises on odd content: fields of the wrong type are dropped.
    """
    shape = detect_shape(obj)
    if shape == "claude-code":
        return _claude_code(obj, source=source, offset=offset, line_no=line_no)
    if shape is None:
        return []
    return [_ledger_event(obj, shape, source=source, offset=offset)]


# --- ledger shapes ---------------------------------------------------------------------------------


def _ledger_event(obj: Mapping[str, Any], shape: str, *, source: str, offset: int) -> Event:
    if shape == "envelope":
        body: Mapping[str, Any] = obj["event"]
        metadata = obj.get("metadata")
        meta: Mapping[str, Any] = metadata if isinstance(metadata, _MAP) else {}
        seq, triggered_by = obj["seq_id"], meta.get("triggered_by")
    else:
        body = meta = obj
        seq = obj["seq_id"] if shape == "journal" else obj["seq"]
        triggered_by = obj.get("triggered_by")

    extra: dict[str, Any] = {}
    for name in ("event_type", "duration_ms"):
        if body.get(name) is not None:
            extra[name] = body[name]
    if shape == "envelope" and isinstance(meta.get("event_id"), str):
        extra["event_id"] = meta["event_id"]

    agent = body.get("source_agent")
    tool = body.get("tool_name")
    success = body.get("success")
    return Event(
        source=source,
        offset=offset,
        seq=int(seq),
        shape=shape,
        session=(_record_session(obj) if meta is obj else _record_session(obj, meta)) or _stem(source),
        agent=agent if isinstance(agent, str) else None,
        tool=tool if isinstance(tool, str) else None,
        args=body.get("args"),
        result=body.get("result"),
        success=success if isinstance(success, bool) else None,
        timestamp=normalize_timestamp(body.get("timestamp", obj.get("timestamp"))),
        triggered_by=int(triggered_by) if _is_int(triggered_by) else None,
        extra=extra,
    )


@lru_cache(maxsize=256)
def _stem(source: str) -> str:
    """The file's stem, the session of ledger lines that name none; every line of a file asks."""
    return PurePath(source).stem


def _record_session(*records: Mapping[str, Any]) -> str | None:
    for record in records:
        value = record.get("session_id")
        if isinstance(value, str) and value:
            return value
        value = record.get("sessionId")
        if isinstance(value, str) and value:
            return value
    return None


# --- Claude Code -----------------------------------------------------------------------------------


def _claude_code(
    obj: Mapping[str, Any], *, source: str, offset: int, line_no: int
) -> list[Event | ResultPatch]:
    kind = obj.get("type")
    message = obj.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, _MAP):
        return []
    session = _record_session(obj)
    timestamp = normalize_timestamp(obj.get("timestamp"))
    base: dict[str, Any] = {}
    parent = obj.get("parent_tool_use_id")
    if obj.get("isSidechain") is True or isinstance(parent, str):
        base["sidechain"] = True
        if isinstance(parent, str):
            base["parent_tool_use_id"] = parent
    if obj.get("isMeta") is True:
        base["meta"] = True  # injected by Claude Code (caveats, command output), not typed by the user

    content = message.get("content")
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else []
    if isinstance(content, list):
        blocks = content

    out: list[Event | ResultPatch] = []

    def emit(tool: str, args: Any, result: Any = None, **more: Any) -> None:
        out.append(
            Event(
                source=source,
                offset=offset,
                seq=line_no,
                shape="claude-code",
                session=session,
                agent=f"claude-code#{session[:8]}" if session else "claude-code",
                tool=tool,
                args=args,
                result=result,
                timestamp=timestamp,
                extra={**base, **more, "part": len(out)},
            )
        )

    model = message.get("model")
    for block in blocks:
        if not isinstance(block, _MAP):
            continue
        btype = block.get("type")
        text = block.get("text")
        if btype == "text" and isinstance(text, str) and text.strip():
            if kind == "user":
                emit("user_prompt", {"prompt": text})
            else:
                emit("llm_inference", {"model": model} if isinstance(model, str) else {}, {"text": text})
        elif btype == "tool_use" and kind == "assistant" and isinstance(block.get("name"), str):
            tool_use_id = block.get("id")
            more = {"tool_use_id": tool_use_id} if isinstance(tool_use_id, str) else {}
            emit(block["name"], block.get("input"), **more)
        elif btype == "tool_result" and isinstance(block.get("tool_use_id"), str):
            out.append(
                ResultPatch(
                    source=source,
                    tool_use_id=block["tool_use_id"],
                    result={"output": _result_text(block.get("content"))},
                    success=block.get("is_error") is not True,
                    timestamp=timestamp,
                )
            )
    return out


def _result_text(content: Any) -> str:
    """Flatten a ``tool_result``'s content (a string or a list of blocks) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, _MAP) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, _MAP):
            parts.append(f"[{block.get('type', 'block')}]")
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)
