"""The one way korg-bridge reads a file someone else named: regular files only, never blocking, capped.

A path korg-recall or the bridge reads may have been picked by a model, left by a person, or
swapped by another program, and each kind of file it can name is a trap for a naive ``open``:

* opening a FIFO for reading blocks until a writer appears (forever, usually); a socket cannot
  be opened at all; opening a device can itself do something (rewind a tape), and reading
  ``/dev/zero`` never ends;
* a regular file can be larger than memory, or grow while it is read;
* a symbolic link can lead out of a folder that is ours to write.

So every reader goes through :class:`RegularFile`: it looks at the path first (``stat``, or
``lstat`` when links are not followed) and refuses anything but a regular file before opening
it; it opens with ``O_NONBLOCK | O_NOCTTY | O_CLOEXEC`` (and ``O_NOFOLLOW`` when links are not
followed); it looks again through the descriptor (``fstat``), so a FIFO swapped in between is
neither waited on nor read; and it reads at most what the caller's cap allows. What is refused is
a :class:`NotRegular` (an ``OSError``, so a caller that handles read failures refuses it too),
naming what was found (``a FIFO (named pipe)``); the caller words its own message and exit code.

:func:`read_regular` reads a whole file up to a cap (``over`` says it held more);
:func:`read_head` its first bytes; :class:`RegularFile` gives the descriptor to a reader that
goes by offsets (JSONL lines, a log's tail).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from types import TracebackType

from korg_bridge.errors import NotRegular

__all__ = ["READ_FLAGS", "Contents", "NotRegular", "RegularFile", "not_regular", "read_head", "read_regular"]

READ_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
)
"""Never wait for a writer, never take a terminal, never leak the descriptor into a child."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_STEP = 1024 * 1024
"""Bytes asked of one ``read``: a large cap never becomes one large allocation."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file (``"a FIFO (named pipe)"``), else None."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _links_refused(path: str) -> OSError:
    """What ``open(..., O_NOFOLLOW)`` raises on a link, for a link seen before opening."""
    return OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)


class RegularFile:
    """A regular file opened for reading without blocking (use it as a context manager).

    ``follow=False`` refuses a symbolic link at the path (``OSError`` with ``errno.ELOOP``, as
    ``O_NOFOLLOW`` does), dangling or not; ``dir_fd`` makes ``path`` relative to an open folder.

    Raises (on entering):
        FileNotFoundError: nothing is at the path.
        NotRegular: something other than a regular file is (looked at before opening and after).
        OSError: it cannot be opened (``ELOOP``: a link, with ``follow=False``).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, follow: bool = True, dir_fd: int | None = None
    ) -> None:
        self.path = os.fspath(path)
        self.follow = follow
        self.dir_fd = dir_fd
        self.fd = -1
        self.info: os.stat_result | None = None

    def __enter__(self) -> RegularFile:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> RegularFile:
        """Look, open, look again (what entering the context does).

        Raises:
            FileNotFoundError, NotRegular, OSError: see the class.
        """
        before = os.stat(self.path, dir_fd=self.dir_fd, follow_symlinks=self.follow)
        if not self.follow and stat.S_ISLNK(before.st_mode):
            raise _links_refused(self.path)
        kind = not_regular(before.st_mode)
        if kind is not None:
            raise NotRegular(self.path, kind, before)
        try:
            fd = os.open(self.path, READ_FLAGS | (0 if self.follow else _NOFOLLOW), dir_fd=self.dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a socket swapped in since the look
                raise NotRegular(self.path, "a socket", before) from exc
            raise
        try:
            info = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        kind = not_regular(info.st_mode)
        if kind is not None:  # replaced between the two looks
            os.close(fd)
            raise NotRegular(self.path, kind, info)
        self.fd, self.info = fd, info
        return self

    def close(self) -> None:
        """Close the descriptor (again: nothing)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    @property
    def stat(self) -> os.stat_result:
        """The file's ``fstat`` as opened."""
        if self.info is None:
            raise ValueError(f"{self.path} is not open")
        return self.info

    def read(self, cap: int) -> tuple[bytes, bool]:
        """At most ``cap`` bytes from the current position, and whether more followed them.

        Raises:
            OSError: the read failed.
        """
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            chunk = os.read(self.fd, min(_STEP, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
        return data[:cap], size > cap

    def pread(self, size: int, offset: int) -> bytes:
        """``size`` bytes at ``offset`` (fewer at the end of the file).

        Raises:
            OSError: the read failed.
        """
        return os.pread(self.fd, size, offset)


@dataclass(frozen=True, slots=True)
class Contents:
    """A regular file as read: its bytes, its ``fstat``, and whether it held more than the cap."""

    data: bytes
    """The whole file; empty when ``over``."""
    info: os.stat_result
    over: bool = False
    """It held more than the cap (then ``data`` is empty: a part of a file is not the file)."""


def read_regular(
    path: str | os.PathLike[str], cap: int, *, follow: bool = True, dir_fd: int | None = None
) -> Contents:
    """The whole regular file at ``path`` when it holds at most ``cap`` bytes.

    A file whose size is already over ``cap`` is not read at all; one that grows past it while
    being read stops being read at ``cap + 1`` bytes. Either way ``over`` is set.

    Raises:
        FileNotFoundError: nothing is at the path.
        NotRegular: it is not a regular file.
        OSError: it cannot be opened or read (``ELOOP``: a link, with ``follow=False``).
    """
    with RegularFile(path, follow=follow, dir_fd=dir_fd) as file:
        info = file.stat
        if info.st_size > cap:
            return Contents(b"", info, True)
        data, over = file.read(cap)
    return Contents(b"" if over else data, info, over)


def read_head(path: str | os.PathLike[str], size: int, *, follow: bool = True) -> bytes:
    """The first ``size`` bytes of the regular file at ``path`` (fewer when it is shorter).

    Raises:
        FileNotFoundError: nothing is at the path.
        NotRegular: it is not a regular file.
        OSError: it cannot be opened or read.
    """
    with RegularFile(path, follow=follow) as file:
        return file.read(size)[0]
