"""A korg-ledger@v1 file as bytes on disk: recognised without trusting it, repaired without losing it.

Two callers need to tell a ledger from any other file before they change it:
the bridge's ``--audit`` (a path a user typed, which may well be a config or a
minified JSON file) and :class:`~korg_bridge.ledger.chain.LedgerWriter`, which cuts a
torn last line before chaining onto the file. Cutting the tail of a file that
is not a ledger destroys it, so the rules live here, once:

* a file is a ledger when it is empty (or blank), or when its first and its
  last complete non-blank lines are chained entries (JSON objects with an
  integer ``seq_id`` and a string ``entry_hash``); lines are found by scanning
  for newlines in blocks, so no line length hides the file's shape;
* a file without any complete line is a ledger only when that one line is a
  chained entry missing its newline, or the start of one as
  :class:`~korg_bridge.ledger.chain.LedgerWriter` renders it (a first write that was
  interrupted);
* a line longer than :data:`MAX_LINE_BYTES` or nested too deeply for
  ``json.loads`` is not a ledger line: it is refused, never an internal error.

A torn tail that must go is first copied to a side file next to the ledger
(:func:`set_aside`), created exclusively and fsynced, and only then cut.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from korg_bridge._fs.durable import fsync_folder, reserve, write_all
from korg_bridge._fs.safe_read import RegularFile
from korg_bridge.errors import ConfigError

__all__ = [
    "MAX_LINE_BYTES",
    "chained_entry",
    "check_ledger_file",
    "last_line",
    "last_newline_before",
    "line_fault",
    "looks_torn",
    "read_span",
    "set_aside",
]

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest ledger line read into memory (16 MiB); audit entries stay far below it."""

_BLOCK = 64 * 1024
"""Bytes read per step while scanning for a newline."""


_TORN_PREFIX = re.compile(rb'\s*\{"schema_version": "[^"\\\n]{0,32}", "seq_id": [0-9]')
"""How :class:`~korg_bridge.ledger.chain.LedgerWriter` starts every line: a torn write of it
still carries this, and no other kind of file does."""

_WHITESPACE = b" \t\r\n\f\v"


def line_fault(raw: bytes) -> str | None:
    """Why ``raw`` is not a chained korg-ledger@v1 entry, or None when it is one.

    Never raises: a line nested too deeply for ``json.loads`` (a RecursionError)
    is a fault like any other.
    """
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8"
    except RecursionError:
        return "nested too deeply to read"
    except ValueError:
        return "not JSON"
    if not isinstance(obj, dict):
        return "not a JSON object"
    seq = obj.get("seq_id")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(obj.get("entry_hash"), str):
        return "not a chained entry (no integer seq_id and entry_hash)"
    return None


def chained_entry(raw: bytes) -> dict[str, Any] | None:
    """``raw`` parsed when it is a chained entry, else None; never raises."""
    if line_fault(raw) is not None:
        return None
    obj: dict[str, Any] = json.loads(raw.decode("utf-8"))
    return obj


def looks_torn(raw: bytes) -> bool:
    """Whether ``raw`` begins like a line LedgerWriter writes (so a fragment of one is torn, not foreign)."""
    return _TORN_PREFIX.match(raw) is not None


def last_newline_before(fd: int, end: int) -> int:
    """Position of the last ``\\n`` in ``[0, end)``, or -1; reads backwards, block by block."""
    pos = end
    while pos > 0:
        start = max(0, pos - _BLOCK)
        block = os.pread(fd, pos - start, start)
        hit = block.rfind(b"\n")
        if hit >= 0:
            return start + hit
        pos = start
    return -1


def _first_non_blank(fd: int, start: int, end: int) -> int:
    """Position of the first non-whitespace byte in ``[start, end)``, or -1."""
    pos = start
    while pos < end:
        block = os.pread(fd, min(_BLOCK, end - pos), pos)
        if not block:
            break
        stripped = block.lstrip(_WHITESPACE)
        if stripped:
            return pos + len(block) - len(stripped)
        pos += len(block)
    return -1


def _next_newline(fd: int, start: int, end: int) -> int:
    """Position of the first ``\\n`` in ``[start, end)``, or -1."""
    pos = start
    while pos < end:
        block = os.pread(fd, min(_BLOCK, end - pos), pos)
        if not block:
            break
        hit = block.find(b"\n")
        if hit >= 0:
            return pos + hit
        pos += len(block)
    return -1


def read_span(fd: int, start: int, end: int) -> bytes | None:
    """Bytes ``[start, end)``, or None when that is more than :data:`MAX_LINE_BYTES`."""
    if end - start > MAX_LINE_BYTES:
        return None
    return os.pread(fd, end - start, start)


def last_line(fd: int, end: int) -> tuple[int, bytes | None] | None:
    """The last non-blank line ending with a ``\\n`` before ``end``, as ``(start, bytes)``.

    ``end`` is just after a ``\\n`` (or 0). The bytes are None when the line is
    longer than :data:`MAX_LINE_BYTES`; the result is None when every line is blank.
    """
    while end > 0:
        start = last_newline_before(fd, end - 1) + 1
        if _first_non_blank(fd, start, end) >= 0:
            return start, read_span(fd, start, end)
        end = start
    return None


def _shape_fault(fd: int, size: int) -> str | None:
    """Why the open file ``fd`` is not a ledger that may be appended to, or None."""
    first = _first_non_blank(fd, 0, size)
    if first < 0:
        return None  # empty, or nothing but blank lines
    newline = _next_newline(fd, first, size)
    if newline < 0:
        raw = read_span(fd, first, size)
        if raw is None:
            return f"a line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB"
        if looks_torn(raw) or line_fault(raw) is None:
            return None
        return f"its only line is {line_fault(raw)}"
    head = read_span(fd, first, newline)
    if head is None:
        return f"its first line is longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB"
    fault = line_fault(head)
    if fault is not None:
        return f"its first line is {fault}"
    tail_start = last_newline_before(fd, size) + 1
    found = last_line(fd, tail_start)
    if found is None or found[0] <= first:
        return None  # the first line is the last complete one
    raw = found[1]
    if raw is None:
        return f"its last line is longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB"
    fault = line_fault(raw)
    return None if fault is None else f"its last line is {fault}"


def check_ledger_file(path: Path, *, what: str = "ledger") -> None:
    """Refuse ``path`` unless it is empty or shaped like a korg-ledger@v1 chain; reads only.

    A missing file passes (it will be created). Nothing is created, locked or
    changed, so ``--list-tools`` can run the same check a server would.

    Raises:
        ConfigError: the file is not a ledger, or cannot be read.
    """
    try:
        with RegularFile(path) as file:  # a FIFO is refused, never waited on
            fault = _shape_fault(file.fd, file.stat.st_size)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(
            f"cannot read {what} {path}: {exc.strerror or exc}. Check its permissions."
        ) from exc
    if fault is not None:
        raise ConfigError(
            f"{what} {path} is not a korg-ledger@v1 file ({fault}); refusing to write to it. "
            "Pass a new file, or an existing korg-ledger@v1 ledger."
        )


def _side_name(path: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return path.with_name(f"{path.name}.torn-{stamp}")


def set_aside(fd: int, path: Path, start: int, end: int) -> Path:
    """Copy bytes ``[start, end)`` of the open ledger ``fd`` to a new side file and return its path.

    The side file is ``<ledger>.torn-<UTC timestamp>`` (``-2``, ``-3``… when
    that name exists), created with ``O_EXCL`` so nothing is ever overwritten,
    and fsynced with its folder before returning: only then may the caller cut.
    A side file left half written by a failure is removed (it is ours).

    Raises:
        ConfigError: the side file cannot be created or written; the ledger is
            untouched.
    """
    side: Path | None = None
    try:
        side = reserve(_side_name(path))
        out = os.open(side, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if side is not None:  # reserved (ours, empty) but not opened
            side.unlink(missing_ok=True)
        raise ConfigError(
            f"cannot set the torn last line of ledger {path} aside in {path.parent}: "
            f"{getattr(exc, 'strerror', None) or exc}. Free space or fix permissions; the ledger was left as it was."
        ) from exc
    try:
        pos = start
        while pos < end:
            block = os.pread(fd, min(_BLOCK, end - pos), pos)
            if not block:
                break
            write_all(out, block)
            pos += len(block)
        os.fsync(out)
    except OSError as exc:
        os.close(out)
        side.unlink(missing_ok=True)
        raise ConfigError(
            f"cannot set the torn last line of ledger {path} aside in {side}: {exc.strerror or exc}. "
            "Free space or fix permissions; the ledger was left as it was."
        ) from exc
    os.close(out)
    fsync_folder(path.parent)
    return side
