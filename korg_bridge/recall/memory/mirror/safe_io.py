"""Files inside the Markdown mirror folder: read without blocking, written atomically, never
through a link.

The mirror folder is korg-recall's to write, and anything can turn up in it: a person's
editor, an agent with a shell, a FIFO, a symbolic link to ``~/.ssh``. So every path below
the folder is reached one component at a time from a descriptor of the folder
(``openat`` with ``O_NOFOLLOW``): a link anywhere below it is refused, never followed out
(the folder itself may be a link a person made, e.g. into a git checkout). A file is
read by :func:`korg_bridge._fs.safe_read.read_regular`, so a FIFO, socket or device is
refused at once instead of hanging the call. A write goes to a fresh temporary
file in ``.korg-tmp`` (made with ``O_EXCL``), is fsynced and renamed over its target, so a
reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, overload

from korg_bridge._fs.durable import write_synced
from korg_bridge._fs.safe_read import NotRegular, read_regular

__all__ = [
    "MAX_FILE_BYTES",
    "STALE_TMP_S",
    "TMP_NAME",
    "FileState",
    "Read",
    "clean_tmp",
    "drop_tmp",
    "is_listed",
    "listing",
    "read_at",
    "read_file",
    "remove_at",
    "sha256_of",
    "write_atomic",
]

TMP_NAME = ".korg-tmp"
STALE_TMP_S = 600.0
"""A temp file older than this was left by a killed process (a write takes milliseconds)."""
MAX_FILE_BYTES = 64 * 1024
"""Bigger files are not read (a memory is at most 8 KB); they are reported as unparseable."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC


@dataclass(frozen=True, slots=True)
class FileState:
    """What korg-recall remembers of a mirror file: ``stat`` to notice a change cheaply, the
    SHA-256 of its bytes to decide whether it really changed."""

    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Read:
    """What is at a mirror path: a regular file's bytes and state, nothing (``data`` and
    ``refused`` None: gone), or why it is not read (``refused``: "a FIFO (named pipe)" …)."""

    data: bytes | None
    state: FileState | None
    refused: str | None = None

    @property
    def gone(self) -> bool:
        return self.data is None and self.refused is None


GONE = Read(None, None)


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _refusal(exc: OSError) -> str | None:
    """What an ``O_NOFOLLOW``/``O_DIRECTORY`` open that failed met, when it met something."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link (the mirror never follows links out of its folder)"
    if exc.errno == errno.ENOTDIR:
        return "not a folder"
    return None


def _open_dir(root: Path, rel_dir: str, *, create: bool) -> int:
    """A descriptor of ``root/rel_dir``, each component below ``root`` opened without following
    a link (made when ``create``).

    Raises:
        FileNotFoundError: a component is missing (and ``create`` is false).
        OSError: a component is a link or not a folder (``ELOOP``/``ENOTDIR``), or cannot be made.
    """
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        for part in (p for p in rel_dir.split("/") if p):
            if part in (".", ".."):
                raise OSError(errno.EINVAL, f"not a mirror path: {rel_dir!r}")
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def _folder(root: Path, rel_dir: str, *, create: bool) -> Iterator[int]:
    fd = _open_dir(root, rel_dir, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def _split(rel: str) -> tuple[str, str]:
    folder, _, name = rel.rpartition("/")
    return folder, name


def read_at(root: Path, rel: str) -> Read:
    """The file at ``root/rel``: its bytes (at most :data:`MAX_FILE_BYTES` are read; a bigger
    file comes back with empty data and its real size), or gone, or refused without blocking."""
    folder, name = _split(rel)
    try:
        with _folder(root, folder, create=False) as dir_fd:
            try:
                got = read_regular(name, MAX_FILE_BYTES, follow=False, dir_fd=dir_fd)
            except NotRegular as exc:
                return Read(None, FileState(exc.info.st_size, exc.info.st_mtime_ns, ""), exc.kind)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    return Read(None, _lstat_state(dir_fd, name), _refusal(exc))
                raise
    except FileNotFoundError:
        return GONE
    except OSError as exc:
        refused = _refusal(exc)
        if refused is not None:
            return Read(None, None, f"below {folder or '.'}: {refused}")
        return Read(None, None, f"unreadable ({exc.strerror or exc})")
    info = got.info
    if got.over:  # not read: reported as unparseable, with its real size
        return Read(b"", FileState(info.st_size, info.st_mtime_ns, ""))
    return Read(got.data, FileState(info.st_size, info.st_mtime_ns, sha256_of(got.data)))


def _lstat_state(dir_fd: int, name: str) -> FileState | None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    return FileState(info.st_size, info.st_mtime_ns, "")


def read_file(path: Path) -> tuple[bytes, FileState] | None:
    """The bytes and state of the regular file ``path``, or None if it is gone, not a regular
    file (never blocking on a FIFO, never following a link) or unreadable."""
    found = read_at(path.parent, path.name)
    if found.data is None or found.state is None:
        return None
    return found.data, found.state


def listing(
    root: Path, rel_dir: str, names: Iterable[str] | None = None
) -> tuple[dict[str, tuple[int, int]], str | None]:
    """``name -> (size, mtime_ns)`` of the ``*.md`` entries of ``root/rel_dir`` (their own
    ``lstat``: a link is listed as itself) -- or of those of ``names`` that are there (what the
    listing would give for them alone) -- and why the folder cannot be listed (None: it can, or it
    does not exist)."""
    try:
        fd = _open_dir(root, rel_dir, create=False)
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"{root / rel_dir} is {_refusal(exc) or f'unreadable ({exc.strerror or exc})'}; not read"
    found: dict[str, tuple[int, int]] = {}
    try:
        if names is None:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if is_listed(entry.name):
                        found[entry.name] = _state(partial(entry.stat, follow_symlinks=False), listed=True)
        else:
            for name in names:
                if is_listed(name):
                    state = _state(partial(os.stat, name, dir_fd=fd, follow_symlinks=False), listed=False)
                    if state is not None:
                        found[name] = state
    except OSError as exc:
        return {}, f"{root / rel_dir} cannot be listed ({exc.strerror or exc}); not read"
    finally:
        os.close(fd)
    return found, None


@overload
def _state(stat_call: Callable[[], os.stat_result], *, listed: Literal[True]) -> tuple[int, int]: ...
@overload
def _state(stat_call: Callable[[], os.stat_result], *, listed: Literal[False]) -> tuple[int, int] | None: ...
def _state(stat_call: Callable[[], os.stat_result], *, listed: bool) -> tuple[int, int] | None:
    """(size, mtime_ns) by ``stat_call``: (-1, -1) when that fails for an entry the folder listed
    (gone or unreadable since: never equal to a record); None for a name asked for that is not there."""
    try:
        info = stat_call()
    except FileNotFoundError:
        return (-1, -1) if listed else None
    except OSError:
        return (-1, -1)
    return (info.st_size, info.st_mtime_ns)


def is_listed(name: str) -> bool:
    """Whether :func:`listing` lists an entry of this name: a visible ``*.md``."""
    return name.endswith(".md") and not name.startswith(".")


def write_atomic(root: Path, rel: str, text: str) -> FileState:
    """Write ``root/rel`` atomically: a new temp file in ``root/.korg-tmp``, fsync, rename over
    the target (the caller fsyncs the folder once it has written all its files). No component
    below ``root`` is followed if it is a link.

    Raises:
        OSError: a folder cannot be made or is a link, or the file cannot be written.
    """
    data = text.encode("utf-8")
    folder, name = _split(rel)
    with _folder(root, folder, create=True) as dir_fd, _folder(root, TMP_NAME, create=True) as tmp_fd:
        tmp = f"{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, _TMP_FLAGS, 0o600, dir_fd=tmp_fd)
        try:
            try:
                write_synced(fd, data)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=tmp_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=tmp_fd)
            raise
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    return FileState(info.st_size, info.st_mtime_ns, sha256_of(data))


def remove_at(root: Path, rel: str) -> None:
    """Delete ``root/rel`` (a link itself, never its target); nothing if it is gone.

    Raises:
        OSError: it cannot be deleted.
    """
    folder, name = _split(rel)
    try:
        with _folder(root, folder, create=False) as dir_fd:
            os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return


def clean_tmp(root: Path, now: float | None = None) -> None:
    """Remove temp files that killed processes left in ``.korg-tmp`` (the folder is korg-recall's)."""
    _sweep(root, lambda name, mtime: mtime < (time.time() if now is None else now) - STALE_TMP_S)


def drop_tmp(root: Path, memory_id: str) -> None:
    """Remove every temp file of ``memory_id``'s mirror files, whatever its age (a purge: a
    killed write may have left the text there). Called under the store's write lock, so no
    write of korg-recall's is under way."""
    marker = f"--{memory_id}.md."
    _sweep(root, lambda name, _mtime: marker in name)


def _sweep(root: Path, doomed: Callable[[str, float], bool]) -> None:
    try:
        fd = _open_dir(root, TMP_NAME, create=False)
    except OSError:
        return
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if (
                        entry.name.endswith(".tmp")
                        and stat.S_ISREG(info.st_mode)
                        and doomed(entry.name, info.st_mtime)
                    ):
                        os.unlink(entry.name, dir_fd=fd)
    except OSError:
        return
    finally:
        os.close(fd)
