"""Ingest of one slice of a ledger, in one direction: lines → shape → event → text → row.

This is where a ledger line becomes an indexed event::

    LineFile.lines()        complete lines from a byte offset     (lines.py)
    _decode()               JSON object, depth-bounded            (here)
    shapes.parse_line()     events and tool results of the line   (recall/shapes/)
    rows.event_row()        searchable text, stored JSON, project (recall/rows.py, text.py, project.py)
    SlicePairing            a call meets a result in the slice    (recall/pairing.py)
    Batch                   what the writer stores                (recall/refresh.py)

Every line either yields its rows or is skipped with a reason — JSON that
does not parse, nesting deeper than :data:`MAX_DEPTH`, a line over the
length cap, a value the index cannot hold, anything a parser trips on — and
reading goes on: one bad line never stops a file, let alone a refresh.

No database here: a refresh reads and parses first and takes the write lock
only to store the result, so this half runs in the indexing process or in a
parsing worker (:mod:`korg_bridge.recall.history.ingest.worker`) while the indexing process
writes the previous slice. A :class:`Batch` is therefore plain data that
pickles cheaply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from korg_bridge._fs.lines import HEAD_BYTES, MAX_LINE_BYTES, Line, LineFile
from korg_bridge.errors import ConfigError
from korg_bridge.recall.history.ingest.event import Event
from korg_bridge.recall.history.ingest.pairing import SlicePairing
from korg_bridge.recall.history.ingest.rows import LineError, ResultRow, Row, bindable, event_row, result_row
from korg_bridge.recall.history.ingest.shapes import State, Where, parse_line
from korg_bridge.recall.history.ingest.sources import FileState
from korg_bridge.recall.project import ProjectCache

__all__ = [
    "BATCH_BYTES",
    "MAX_DEPTH",
    "MAX_SKIP_RECORDS",
    "WORKER_MIN_BYTES",
    "Batch",
    "FileState",
    "Stored",
    "Work",
    "read_batches",
    "read_file",
]

BATCH_BYTES = 2 * 1024 * 1024
"""Ledger bytes per write transaction: bounds memory and how long other writers wait."""
WORKER_MIN_BYTES = BATCH_BYTES
"""Bytes to read from which parsing moves to a :mod:`~korg_bridge.recall.history.ingest.worker` process: with
one slice nothing overlaps, and the worker's start (an interpreter and a few imports, ~60 ms)
would be pure cost. A query's refresh of a few appended lines never pays it."""
MAX_DEPTH = 100
"""Deepest nesting of a line's JSON that is indexed. Real lines nest a dozen levels; a line nested
hundreds deep exists only to exhaust recursion in whatever reads it next (``show``, redaction)."""
MAX_SKIP_RECORDS = 100
REPAIRED = "kept, repaired: "
"""How a line that was indexed only after a repair is noted beside the skipped ones (``stats``
lists it under ``repaired``), so what changed in it is as findable as what was dropped."""
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<![0-9a-fA-F]{4})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
"""A ``\\ud83d`` escape not followed by its low half, or a low half on its own (JSON text)."""
"""Skipped lines remembered per file with their reason (all are counted)."""

_decode_json = json.JSONDecoder().raw_decode
"""``json.loads`` minus its per-call wrapping (type checks, two whitespace regexes): a third
of the parse cost of a typical ledger line, paid once per line."""


class Stored(NamedTuple):
    """What the index remembers of a file, as :data:`STORED_COLUMNS` selects it."""

    id: int
    inode: int | None
    dev: int | None
    offset: int
    line_no: int
    head_len: int
    head_sha: str | None
    parse_state: str | None
    gone_at: float | None


STORED_COLUMNS = 'id, inode, dev, "offset", line_no, head_len, head_sha, parse_state, gone_at'


@dataclass(frozen=True, slots=True)
class Work:
    """One file to read: where from, and whether what the index holds of it must go first."""

    path: str
    state: FileState
    stored: Stored | None
    """The index's state of the file this plan was made from (None: a new file)."""
    start: int
    line_no: int
    reset: bool
    """The file was replaced or rewritten: its stored events go, reading starts at 0."""

    @property
    def to_read(self) -> int:
        return max(0, self.state.size - self.start)


@dataclass
class Batch:
    """One slice of one file, parsed and turned into rows, ready to write."""

    work: Work
    start: int
    reset: bool
    end_offset: int
    """Byte offset just after the slice's last complete line: where the next slice starts."""
    end_line: int
    parse_state: State = field(default_factory=dict)
    """The shape parser's memory after the slice, stored so the next read resumes with it."""
    head: tuple[int, str] | None = None
    """A new fingerprint of the file's start (length, SHA-256), when it has grown or changed."""
    skipped: int = 0
    skips: list[tuple[int, str]] = field(default_factory=list)
    """The first :data:`MAX_SKIP_RECORDS` skipped lines of the slice: (line number, reason)."""
    ignored: int = 0
    """Valid lines that hold no event (bookkeeping of the agents' formats)."""
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    results: list[ResultRow] = field(default_factory=list)
    """Results whose call is not in this slice: the writer joins them to stored calls."""
    final: bool = True
    """The file's last slice: only then is its size stored, so an interrupted file is resumed."""
    error: str | None = None
    """Why the file could not be read (a one-line message); such a batch has no rows."""

    @property
    def path(self) -> str:
        return self.work.path


def _depth_over(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests deeper than ``limit`` containers (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _decode(data: bytes) -> dict[str, Any] | None:
    """The JSON object on one line; None for a blank line.

    Raises:
        LineError: not a JSON object, or nested deeper than :data:`MAX_DEPTH`.
    """
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff").strip()
    if not text:
        return None
    try:
        obj, end = _decode_json(text)
    except RecursionError as exc:
        raise LineError(f"JSON nested deeper than {MAX_DEPTH} levels") from exc
    except ValueError as exc:
        raise LineError(f"not valid JSON ({str(exc)[:120]})") from exc
    if end != len(text):
        raise LineError("not valid JSON (data after the value)")
    if not isinstance(obj, dict):
        raise LineError(f"not a JSON object (a {type(obj).__name__})")
    # Only a line with that many brackets can nest that deep: most lines never pay for the walk.
    if data.count(b"{") + data.count(b"[") > MAX_DEPTH and _depth_over(obj, MAX_DEPTH):
        raise LineError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return obj


class _Slice:
    """The conversion of one slice's lines into a :class:`Batch`."""

    def __init__(self, batch: Batch, projects: ProjectCache, max_line: int) -> None:
        self.batch = batch
        self.projects = projects
        self.max_line = max_line
        self.rows: list[Row] = []
        self.pairing = SlicePairing(self.rows)

    def skip(self, line: Line, reason: str) -> None:
        self.batch.skipped += 1
        self.note(line, reason)

    def note(self, line: Line, reason: str) -> None:
        """Record why a line is worth a look in ``stats`` (skipped, or kept after a repair)."""
        if len(self.batch.skips) < MAX_SKIP_RECORDS:
            self.batch.skips.append((line.number, bindable(reason)))

    def add(self, line: Line) -> None:
        """Turn one line into rows, or skip it with the reason."""
        if line.data is None:
            self.skip(line, f"line of {line.size:,} bytes is over the {self.max_line:,}-byte limit")
            return
        converted: list[Row | ResultRow] = []
        data = line.data
        try:
            obj = _decode(data)
            if obj is None:
                return
            where = Where(self.batch.work.path, line.offset, line.number)
            # A lone surrogate can only come from a \\ud… escape: other lines need no check for one.
            escaped = b"\\u" in data and (b"\\ud" in data or b"\\uD" in data)
            if escaped and _LONE_SURROGATE.search(data):
                self.note(
                    line, f"{REPAIRED}a lone UTF-16 surrogate (a string cut inside an emoji) became U+FFFD"
                )
            for item in parse_line(obj, where, self.batch.parse_state):
                if isinstance(item, Event):
                    converted.append(event_row(item, self.projects(item.cwd), escaped=escaped))
                else:
                    converted.append(result_row(item, escaped=escaped))
        except LineError as exc:
            self.skip(line, str(exc))
            return
        except RecursionError:
            self.skip(line, f"JSON nested deeper than {MAX_DEPTH} levels")
            return
        except Exception as exc:  # a bulkhead: whatever one line does, the others are read
            self.skip(line, f"unreadable line ({type(exc).__name__}: {str(exc)[:120]})")
            return
        if not converted:
            self.batch.ignored += 1
        for row in converted:
            if isinstance(row, ResultRow):
                self.pairing.result(row)
            else:
                self.rows.append(row)
                self.pairing.call(len(self.rows) - 1)

    def finish(self) -> Batch:
        self.batch.rows = self.rows
        self.batch.results = self.pairing.leftover
        return self.batch


def read_batches(
    work: Sequence[Work], batch_bytes: int = BATCH_BYTES, max_line: int = MAX_LINE_BYTES
) -> Generator[Batch, None, None]:
    """Read and prepare every file of ``work`` in slices of about ``batch_bytes``.

    A file that cannot be read yields one batch carrying the error (and no
    rows), so the caller decides what to say about it.
    """
    projects = ProjectCache()
    for item in work:
        yield from read_file(item, batch_bytes, max_line, projects=projects)


def read_file(
    work: Work,
    batch_bytes: int = BATCH_BYTES,
    max_line: int = MAX_LINE_BYTES,
    *,
    after: Batch | None = None,
    projects: ProjectCache | None = None,
) -> Generator[Batch, None, None]:
    """The slices of one file to its end: from ``work``'s start, or just ``after`` a batch of it."""
    projects = projects or ProjectCache()
    stored = work.stored
    if after is not None:
        start, line_no, state = after.end_offset, after.end_line, dict(after.parse_state)
        head_len = after.head[0] if after.head else (0 if work.reset or stored is None else stored.head_len)
    elif work.reset or stored is None:
        start, line_no, state, head_len = work.start, work.line_no, {}, 0
    else:
        start, line_no, head_len = work.start, work.line_no, stored.head_len
        state = json.loads(stored.parse_state) if stored.parse_state else {}
    reset = work.reset and after is None
    while True:
        batch = Batch(work, start, reset, start, line_no, parse_state=state)
        try:
            with LineFile(work.path) as file:
                convert = _Slice(batch, projects, max_line)
                for line in file.lines(start, line_no, max_bytes=batch_bytes, max_line=max_line):
                    convert.add(line)
                    batch.end_offset, batch.end_line = line.end, line.number
                if head_len < HEAD_BYTES and batch.end_offset > head_len:
                    length = min(HEAD_BYTES, batch.end_offset)
                    digest = file.head_hash(length)
                    batch.head = (length, digest) if digest else None
        except ConfigError as exc:
            yield Batch(work, start, reset, start, line_no, error=str(exc))
            return
        batch.final = batch.end_offset == start or batch.end_offset >= work.state.size
        yield convert.finish()
        if batch.final:
            return
        start, line_no, reset, state = batch.end_offset, batch.end_line, False, dict(batch.parse_state)
        head_len = batch.head[0] if batch.head else head_len
