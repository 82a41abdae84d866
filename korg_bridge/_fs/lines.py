"""Lines of a JSONL file from a byte offset, with bounded memory and no blocking.

Every reader of user-named JSONL files goes through here: korg-recall's index
refresh (ledgers that other processes are appending to while we read them)
and ``korg-recall verify`` (a path a model may pick through the bridge).
Reading is done in bytes from a saved offset, and lines are split on
``b"\\n"`` before anything is decoded, so invalid UTF-8 can never move a
line boundary.

Hostile files cannot hang or exhaust a reader:

* the file is opened by :class:`korg_bridge._fs.safe_read.RegularFile`: looked at
  before it is opened and refused unless it is a regular file (opening a device
  can itself do something; opening a FIFO blocks until a writer appears), opened
  with ``O_NONBLOCK``, and looked at again (``fstat``) so a FIFO swapped in
  between neither blocks nor is read;
* a line longer than the reader's cap is never held whole: its bytes are
  counted and dropped as they stream past, and it comes back as an
  oversized :class:`Line` (``data`` None) for the caller to report.

A last line without its newline is normally left for the next read (its
writer is still writing it); a verifier asks for it too (``partial=True``).
:meth:`LineFile.head_hash` fingerprints the start of the file, so a refresh
can tell a file rewritten in place (logrotate ``copytruncate``, a same-size
rewrite) from one that only grew.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType

from korg_bridge._fs.safe_read import NotRegular, RegularFile
from korg_bridge.errors import ConfigError

__all__ = ["CHUNK_SIZE", "HEAD_BYTES", "MAX_LINE_BYTES", "Line", "LineFile", "head_hash"]

CHUNK_SIZE = 1024 * 1024
"""Bytes read per step: bounds memory for huge files while keeping syscalls few."""
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line read (16 MiB). Real transcripts have ~1 MB lines (base64 images); a longer
one would cost several times its size once parsed, in this process or the parsing worker."""
HEAD_BYTES = 4096
"""Bytes of a file's start fingerprinted to recognise it (fewer while the file is shorter)."""


@dataclass(frozen=True, slots=True)
class Line:
    """One complete line: where it starts, its 1-based number, and its bytes without the newline."""

    offset: int
    number: int
    data: bytes | None
    """None when the line is longer than the reader's ``max_line``: it was dropped unread."""
    size: int
    """Its length in bytes, without the newline."""
    terminated: bool = True
    """False for a last line without its newline (yielded only with ``partial=True``)."""

    @property
    def end(self) -> int:
        """The offset just after its newline: where the next line starts."""
        return self.offset + self.size + 1


class LineFile:
    """An open JSONL file (use it as a context manager).

    ``what`` names the file in messages (``ledger``, ``anchors file``) and
    ``fix`` is the advice they end with.

    Raises (on entering):
        ConfigError: the file does not exist, cannot be opened, or is not a regular file.
    """

    def __init__(
        self, path: str | os.PathLike[str], what: str = "ledger", fix: str = "Pass a ledger file or a folder."
    ) -> None:
        self.path = os.fspath(path)
        self.what = what
        self.fix = fix
        self._file: RegularFile | None = None

    def _refused(self, kind: str) -> ConfigError:
        return ConfigError(
            f"cannot read {self.what} {self.path}: it is {kind}, not a regular file. {self.fix}"
        )

    def _failed(self, exc: OSError) -> ConfigError:
        if isinstance(exc, FileNotFoundError):
            return ConfigError(f"{self.what} not found: {self.path}. {self.fix}")
        return ConfigError(f"cannot read {self.what} {self.path}: {exc.strerror or exc}. {self.fix}")

    def __enter__(self) -> LineFile:
        file = RegularFile(self.path)
        try:
            file.open()
        except NotRegular as exc:
            raise self._refused(exc.kind) from exc
        except OSError as exc:
            raise self._failed(exc) from exc
        self._file = file
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _pread(self, size: int, offset: int) -> bytes:
        if self._file is None:
            raise ValueError(f"{self.path} is not open")
        try:
            return self._file.pread(size, offset)
        except OSError as exc:
            raise self._failed(exc) from exc

    def lines(
        self,
        offset: int = 0,
        line_no: int = 0,
        *,
        max_bytes: int | None = None,
        max_line: int = MAX_LINE_BYTES,
        partial: bool = False,
    ) -> Iterator[Line]:
        """Complete lines from byte ``offset``; ``line_no`` lines precede it.

        A last line without its newline is left for the next call (its writer
        is still writing it), unless ``partial``: then it comes last, with
        ``terminated`` False. ``max_bytes`` bounds one call: lines stop once
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
                if partial and (tail or skipped is not None):
                    size = skipped if skipped is not None else len(tail)
                    yield Line(position, count + 1, None if skipped is not None else bytes(tail), size, False)
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
