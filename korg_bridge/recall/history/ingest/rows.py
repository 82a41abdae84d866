"""Events and tool results as the index stores them: plain values SQLite is sure to accept.

This is the last step of reading a line, and the one that makes it *total*:
whatever a line holds, its rows either bind or the line is refused here with
a reason (:class:`LineError`), never later in the middle of a write
transaction where one bad value would fail a whole batch — and, before this
existed, every refresh after it. Concretely:

* integers SQLite cannot hold (``seq`` beyond 64 bits) refuse the line;
* a lone UTF-16 surrogate (``"\\ud83d"``, what JavaScript writes when it cuts
  a string inside an emoji) is replaced by U+FFFD, as an invalid UTF-8 byte
  already is when the line is decoded: the rest of the event is worth keeping;
* a stored field over :data:`MAX_STORED_JSON` keeps its shape with its long
  strings cut, each with a marker saying how much was dropped.

Rows are plain data (strings, numbers, small dicts), so they cross the pipe
from the parsing worker cheaply and pickle without recursion.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from korg_bridge.errors import LineError
from korg_bridge.recall.history.ingest.event import Event, ToolResult
from korg_bridge.recall.history.ingest.text import result_texts, searchable
from korg_bridge.recall.history.query.timeparse import iso_to_epoch

__all__ = [
    "MAX_STORED_JSON",
    "ROW_COLUMNS",
    "LineError",
    "ResultRow",
    "Row",
    "bindable",
    "dump_json",
    "event_row",
    "extra_with",
    "load_json",
    "result_row",
]

MAX_STORED_JSON = 256 * 1024
"""A field (arguments, result) larger than this is stored cut: the index is a cache, not an archive."""

ROW_COLUMNS = (
    '"offset", seq, shape, session, agent, tool, args, result, success,'
    " timestamp, ts, triggered_by, extra, tool_use_id, text, body, project"
)
"""The ``events`` columns of :meth:`Row.values`, in its order."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")
_MIN_CUT = 64
"""Below this many characters per string, cutting strings no longer makes a field fit."""

_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str, check_circular=False
).encode
"""One encoder for every row: ``json.dumps`` with options builds a new one per call. No cycle
check (10 % of an encode): every value stored comes from parsed JSON, which has none."""


def bindable(text: str) -> str:
    """``text`` with any lone surrogate replaced by U+FFFD (SQLite takes only valid UTF-8)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _bindable_values(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """``values`` with every string :func:`bindable` (one cheap pass when all are ASCII, as most are)."""
    for value in values:
        if value.__class__ is str and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return tuple(bindable(item) if isinstance(item, str) else item for item in values)
    return values


def _check_int(name: str, value: int | None) -> None:
    if value is not None and not _INT64_MIN <= value <= _INT64_MAX:
        raise LineError(f"{name} is beyond a 64-bit integer ({len(str(abs(value)))} digits)")


def _cut_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}… [{len(value) - limit:,} more characters not stored]"
    if isinstance(value, dict):
        return {key: _cut_strings(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_strings(item, limit) for item in value]
    return value


def dump_json(value: Any, limit: int = MAX_STORED_JSON) -> str | None:
    """A stored field as JSON text (None stays NULL), cut to ``limit`` characters (the memory
    store's import cuts a foreign memory's metadata with it too); not yet :func:`bindable` (rows
    make all their strings so at once).

    An over-long field keeps its structure (a file path next to a huge
    content stays readable) and its strings are cut, each ending in a
    marker such as ``… [812,345 more characters not stored]``. A field made
    of countless small values is stored as the cut text of its JSON.
    """
    if value is None:
        return None
    if not value and isinstance(value, dict):
        return "{}"
    text = _encode(value)
    if len(text) > limit:
        text = _fit(value, text, limit)
    return text


def _fit(value: Any, text: str, limit: int) -> str:
    cut_at = limit // 2
    while cut_at >= _MIN_CUT:
        cut = _encode(_cut_strings(value, cut_at))
        if len(cut) <= limit:
            return cut
        cut_at //= 4
    return _encode(_cut_strings(text, limit // 2))


def load_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


Row = tuple[Any, ...]
"""One event, ready to insert: the values of :data:`ROW_COLUMNS`, in order. A tuple, because a
cold build makes one per event and pickles it across a pipe; the positions below name the fields
that pairing (:mod:`~korg_bridge.recall.history.ingest.pairing`) completes when the call's result arrives."""

RESULT, SUCCESS, EXTRA, TOOL_USE_ID, TEXT, BODY = 7, 8, 12, 13, 14, 15


@dataclass(frozen=True, slots=True)
class ResultRow:
    """A tool result, ready to join its call: stored JSON, texts for search, outcome."""

    tool_use_id: str
    result: str | None
    success: int | None
    timestamp: str | None
    preview: str
    """What the call's head shows of it (:func:`~korg_bridge.recall.history.ingest.text.result_texts`)."""
    full: str
    """What the call's body holds of it."""


def success_int(value: bool | None) -> int | None:
    return None if value is None else int(value)


def event_row(event: Event, project: str | None, *, escaped: bool = True) -> Row:
    """``event`` as a :data:`Row`; ``project`` is its ``cwd``'s project (:mod:`~korg_bridge.recall.project`).

    ``escaped`` False says the event's line held no ``\\ud…`` escape: decoded (invalid bytes
    replaced) it cannot hold a lone surrogate, so its strings need no check.

    Raises:
        LineError: the event holds an integer SQLite cannot store.
    """
    extra = event.extra
    if event.cwd and event.cwd != project:  # most sessions run at their project's root: said once
        extra = {**extra, "cwd": event.cwd}
    tool_use_id = extra.get("tool_use_id")
    text, body = searchable(event)  # a call's result may come on a later line: pairing adds it
    _check_int("seq", event.seq)
    _check_int("triggered_by", event.triggered_by)
    success = event.success
    values = (
        event.offset,
        event.seq,
        event.shape,
        event.session,
        event.agent,
        event.tool,
        dump_json(event.args),
        dump_json(event.result),
        None if success is None else int(success),
        event.timestamp,
        iso_to_epoch(event.timestamp),
        event.triggered_by,
        _encode(extra) if extra else None,
        tool_use_id if isinstance(tool_use_id, str) else None,
        text,
        body or None,
        project,
    )
    return _bindable_values(values) if escaped else values


def result_row(result: ToolResult, *, escaped: bool = True) -> ResultRow:
    """``result`` as a :class:`ResultRow` (its strings fit for SQLite, as pairing compares them;
    ``escaped`` as for :func:`event_row`)."""
    preview, full = result_texts(result.result)
    values = (
        result.tool_use_id,
        dump_json(result.result),
        success_int(result.success),
        result.timestamp,
        preview,
        full,
    )
    return ResultRow(*(_bindable_values(values) if escaped else values))


def extra_with(extra: str | None, key: str, value: str) -> str:
    """A stored ``extra`` JSON object with one more key (``extra`` is this module's own dump)."""
    item = f"{_encode(key)}:{_encode(value)}"
    return f"{extra[:-1]},{item}}}" if extra else f"{{{item}}}"
