"""Ledger slices turned into ready-to-insert rows, with no database in sight.

A refresh reads and parses first and takes the write lock only to store the
result, so the reading half is kept here, free of SQLite: it can run in the
indexing process or in a parsing worker (:mod:`korg_bridge.recall.worker`)
while the indexing process writes the previous slice. A :class:`Batch` is
therefore plain data — tuples and strings that pickle cheaply — and an event
is rebuilt from its row on the rare occasions the writer needs it back (a
tool result that arrives in a later slice than its call).
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge.errors import ConfigError
from korg_bridge.recall.event import Event
from korg_bridge.recall.shapes import ResultPatch
from korg_bridge.recall.sources import FileState, ReadResult, read_from
from korg_bridge.recall.text import flatten
from korg_bridge.recall.timeparse import iso_to_epoch

__all__ = [
    "BATCH_BYTES",
    "MAX_STORED_JSON",
    "ROW_COLUMNS",
    "TOOL_USE_COLUMN",
    "WORKER_MIN_BYTES",
    "Batch",
    "SourceRow",
    "Work",
    "dump_json",
    "event_from_row",
    "event_row",
    "load_json",
    "patched",
    "plan",
    "read_batches",
    "read_file",
    "success_int",
]

BATCH_BYTES = 2 * 1024 * 1024
"""Ledger bytes per write transaction: bounds memory and how long other writers wait."""
WORKER_MIN_BYTES = BATCH_BYTES
"""Bytes to read from which parsing moves to a :mod:`~korg_bridge.recall.worker` process: with
one slice nothing overlaps, and the worker's start (an interpreter and a few imports, ~60 ms)
would be pure cost. A query's refresh of a few appended lines never pays it."""
MAX_STORED_JSON = 256 * 1024
"""A tool result larger than this (a huge file read) is stored truncated: the index stays a cache."""

SourceRow = tuple[Any, ...]
"""A file's stored state as the index selects it: id, inode, dev, offset, line_no."""

Work = tuple[str, FileState, SourceRow | None]
"""One file to read: its absolute path, its current stat, and its stored state (None: new file)."""

_encode = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str, check_circular=False
).encode
"""One encoder for every row: ``json.dumps`` with options builds a new one per call. No cycle
check (10 % of an encode): every value stored comes from parsed JSON, which has none."""

ROW_COLUMNS = (
    '"offset", seq, shape, session, agent, tool, args, result, success,'
    " timestamp, ts, triggered_by, extra, tool_use_id, text"
)
"""The ``events`` columns of an :func:`event_row` tuple, in its order (for INSERT and SELECT)."""
TOOL_USE_COLUMN = 13
"""Position of ``tool_use_id`` in an :func:`event_row` tuple."""


def dump_json(value: Any) -> str | None:
    """Serialize a stored field (None stays NULL), truncating absurdly large values."""
    if value is None:
        return None
    if not value and isinstance(value, dict):
        return "{}"
    text = _encode(value)
    if len(text) > MAX_STORED_JSON:
        text = _encode({"truncated": True, "chars": len(text), "preview": text[:MAX_STORED_JSON]})
    return text


def load_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def success_int(value: bool | None) -> int | None:
    return None if value is None else int(value)


def patched(event: Event, patch: ResultPatch) -> Event:
    """``event`` with the result, success and result time a later ``tool_result`` line brought."""
    extra = dict(event.extra)
    if patch.timestamp:
        extra["result_timestamp"] = patch.timestamp
    # A direct constructor call: dataclasses.replace re-inspects the fields
    # on every call, which a cold build of a transcript history pays per tool.
    return Event(
        source=event.source,
        offset=event.offset,
        seq=event.seq,
        shape=event.shape,
        session=event.session,
        agent=event.agent,
        tool=event.tool,
        args=event.args,
        result=patch.result,
        success=patch.success,
        timestamp=event.timestamp,
        triggered_by=event.triggered_by,
        extra=extra,
    )


def event_row(event: Event) -> tuple[Any, ...]:
    """Every column of ``events`` but ``id`` and ``source_id``, in the index's insert order."""
    tool_use_id = event.extra.get("tool_use_id")
    return (
        event.offset,
        event.seq,
        event.shape,
        event.session,
        event.agent,
        event.tool,
        dump_json(event.args),
        dump_json(event.result),
        success_int(event.success),
        event.timestamp,
        iso_to_epoch(event.timestamp),
        event.triggered_by,
        dump_json(event.extra) if event.extra else None,
        tool_use_id if isinstance(tool_use_id, str) else None,
        flatten(event),
    )


def event_from_row(source: str, row: tuple[Any, ...]) -> Event:
    """The event an :func:`event_row` tuple was made from (stored JSON fields parsed back)."""
    offset, seq, shape, session, agent, tool, args, result, success, timestamp = row[:10]
    triggered_by, extra = row[11], row[12]
    return Event(
        source=source,
        offset=offset,
        seq=seq,
        shape=shape,
        session=session,
        agent=agent,
        tool=tool,
        args=load_json(args),
        result=load_json(result),
        success=None if success is None else bool(success),
        timestamp=timestamp,
        triggered_by=triggered_by,
        extra=load_json(extra) or {},
    )


def plan(row: SourceRow | None, state: FileState) -> tuple[int, int, bool, int]:
    """Where to read a file from: ``(offset, line_no, reset, bytes_to_read)``.

    Resume at the stored offset, unless the file was replaced (inode or
    device changed) or truncated (smaller than the offset): then start over.
    """
    if row is None:
        return 0, 0, False, state.size
    if row[1] != state.inode or row[2] != state.dev or state.size < row[3]:
        return 0, 0, True, state.size
    return row[3], row[4], False, state.size - row[3]


@dataclass
class Batch:
    """One slice of one file, parsed and turned into rows, ready to write."""

    path: str
    state: FileState
    row: SourceRow | None
    """The stored state the file's reading was planned from."""
    start: int
    reset: bool
    end_offset: int
    """Byte offset just after the slice's last complete line: where the next slice starts."""
    end_line: int
    skipped: int = 0
    ignored: int = 0
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    patches: list[ResultPatch] = field(default_factory=list)
    """Results whose ``tool_use`` is not in this slice: the writer looks for it in the index."""
    final: bool = True
    """The file's last slice: only then is its stat stored, so an interrupted file is resumed."""
    error: str | None = None
    """Why the file could not be read (a one-line message); such a batch has no rows."""


def _join_patches(result: ReadResult) -> list[Event]:
    """Apply patches whose ``tool_use`` is in the same slice; leave the others in ``result.patches``."""
    if not result.patches:
        return result.events
    events = list(result.events)
    by_id = {
        event.extra["tool_use_id"]: position
        for position, event in enumerate(events)
        if isinstance(event.extra.get("tool_use_id"), str)
    }
    leftover: list[ResultPatch] = []
    for patch in result.patches:
        position = by_id.get(patch.tool_use_id)
        if position is None:
            leftover.append(patch)
        else:
            events[position] = patched(events[position], patch)
    result.patches = leftover
    return events


def read_batches(work: Sequence[Work], batch_bytes: int = BATCH_BYTES) -> Generator[Batch, None, None]:
    """Read and prepare every file of ``work`` in slices of about ``batch_bytes``.

    A file that cannot be read yields one batch carrying the error (and no
    rows), so the caller decides what to say about it.
    """
    for path, state, row in work:
        start, line_no, reset, _size = plan(row, state)
        yield from read_file(path, state, row, start, line_no, reset, batch_bytes)


def read_file(
    path: str,
    state: FileState,
    row: SourceRow | None,
    start: int,
    line_no: int,
    reset: bool,
    batch_bytes: int = BATCH_BYTES,
) -> Generator[Batch, None, None]:
    """The slices of one file from byte ``start`` (``line_no`` lines before it) to its end."""
    while True:
        try:
            result = read_from(Path(path), start, line_no, max_bytes=batch_bytes)
        except ConfigError as exc:
            yield Batch(path, state, row, start, reset, start, line_no, error=str(exc))
            return
        rows = [event_row(event) for event in _join_patches(result)]
        final = result.end_offset == start or result.end_offset >= state.size
        yield Batch(
            path,
            state,
            row,
            start,
            reset,
            result.end_offset,
            result.end_line,
            result.skipped,
            result.ignored,
            rows,
            result.patches,
            final,
        )
        if final:
            return
        start, line_no, reset = result.end_offset, result.end_line, False
