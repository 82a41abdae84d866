"""Complete lines of a ledger file from a byte offset, with bounded memory and no blocking.

Ledgers are append-only files that other processes are writing while we
read them, so reading is done in bytes from a saved offset, and a line is
only consumed once its newline has arrived. Lines are split on ``b"\\n"``
before anything is decoded, so invalid UTF-8 can never move a line boundary.

Hostile files cannot hang or exhaust a refresh:

* the file is opened with ``O_NONBLOCK`` and must be a regular file
  (``fstat`` after opening, so a FIFO swapped in after the directory scan
  neither blocks the open nor is read);
* a line longer than :data:`MAX_LINE_BYTES` is never held whole: its bytes
  are counted and dropped as they stream past, and it is reported as an
  oversized :class:`Line` (``data`` None) for the caller to skip and count.

:meth:`LineFile.head_hash` fingerprints the start of the file, so a refresh
can tell a file rewritten in place (logrotate ``copytruncate``, a same-size
rewrite) from one that only grew.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType

from korg_bridge.errors import ConfigError

__all__ = ["CHUNK_SIZE", "HEAD_BYTES", "MAX_LINE_BYTES", "Line", "LineFile", "head_hash"]

CHUNK_SIZE = 1024 * 1024
"""Bytes read per step: bounds memory for huge files while keeping syscalls few."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line read (16 MiB). Real transcripts have ~1 MB lines (base64 images); a longer
one would cost several times its size once parsed, in this process or the parsing worker."""
HEAD_BYTES = 4096
"""Bytes of a file's start fingerprinted to recognise it (fewer while the file is shorter)."""

_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
)


@dataclass(frozen=True, slots=True)
class Line:
    """One complete line: where it starts, its 1-based number, and its bytes without the newline."""

    offset: int
    number: int
    data: bytes | None
    """None when the line is longer than the reader's ``max_line``: it was dropped unread."""
    size: int
    """Its length in bytes, without the newline."""

    @property
    def end(self) -> int:
        """The offset just after its newline: where the next line starts."""
        return self.offset + self.size + 1


class LineFile:
    """An open ledger file (use it as a context manager).

    Raises (on entering):
        ConfigError: the file cannot be opened, or is not a regular file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._fd = -1

    def __enter__(self) -> LineFile:
        try:
            fd = os.open(self.path, _OPEN_FLAGS)
        except OSError as exc:
            raise ConfigError(
                f"cannot read ledger {self.path}: {exc.strerror or exc}. Check that it exists and is readable."
            ) from exc
        try:
            mode = os.fstat(fd).st_mode
        except OSError as exc:
            os.close(fd)
            raise ConfigError(f"cannot read ledger {self.path}: {exc.strerror or exc}.") from exc
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise ConfigError(
                f"cannot read ledger {self.path}: it is not a regular file. Pass a ledger file or a folder."
            )
        self._fd = fd
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _pread(self, size: int, offset: int) -> bytes:
        try:
            return os.pread(self._fd, size, offset)
        except OSError as exc:
            raise ConfigError(f"cannot read ledger {self.path}: {exc.strerror or exc}.") from exc

    def lines(
        self, offset: int, line_no: int, *, max_bytes: int | None = None, max_line: int = MAX_LINE_BYTES
    ) -> Iterator[Line]:
        """Complete lines from byte ``offset``; ``line_no`` lines precede it.

        A last line without its newline is left for the next call (its writer
        is still writing it). ``max_bytes`` bounds one call: lines stop once
        they reach ``offset + max_bytes`` (at least one complete line is
        always yielded when one is available, so a caller looping until
        nothing moves always progresses). Blank lines are yielded too: they
        count in line numbers.

        Raises:
            ConfigError: the file cannot be read.
        """
        stop = offset + max_bytes if max_bytes is not None and max_bytes > 0 else None
        position, count = offset, line_no
        tail = bytearray()  # bytes after the last newline seen: a line still being written, or a long one
        skipped: int | None = None  # length so far of an oversized line being dropped
        while stop is None or position < stop:
            chunk = self._pread(CHUNK_SIZE, position + len(tail) + (skipped or 0))
            if not chunk:
                return
            last = chunk.rfind(b"\n")
            if last < 0:
                if skipped is not None:
                    skipped += len(chunk)
                elif len(tail) + len(chunk) > max_line:
                    skipped, tail = len(tail) + len(chunk), bytearray()
                else:
                    tail += chunk
                continue
            start = 0
            if skipped is not None:
                first = chunk.find(b"\n")
                count += 1
                yield Line(position, count, None, skipped + first)
                position += skipped + first + 1
                skipped, start = None, first + 1
                if stop is not None and position >= stop:
                    return
                if start > last:
                    tail = bytearray(chunk[start:])
                    continue
            if tail:
                tail += chunk[start:last]
                block = bytes(tail)
            else:
                block = chunk[start:last]
            tail = bytearray(chunk[last + 1 :])
            for data in block.split(b"\n"):
                count += 1
                size = len(data)
                yield Line(position, count, data if size <= max_line else None, size)
                position += size + 1
                if stop is not None and position >= stop:
                    return

    def head_hash(self, length: int) -> str | None:
        """SHA-256 (hex) of the file's first ``length`` bytes; None when it is shorter than that.

        Raises:
            ConfigError: the file cannot be read.
        """
        data = self._pread(length, 0) if length > 0 else b""
        if len(data) < length:
            return None
        return hashlib.sha256(data).hexdigest()


def head_hash(path: str, length: int) -> str | None:
    """:meth:`LineFile.head_hash` of ``path``; None also when it cannot be read (it changed anyway)."""
    try:
        with LineFile(path) as file:
            return file.head_hash(length)
    except ConfigError:
        return None
