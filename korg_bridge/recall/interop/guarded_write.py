"""Replacing a file someone else owns: atomically, and only if it is still what was read.

Claude Code's ``settings.json`` and ``MEMORY.md`` belong to the user and to
Claude Code; korg-recall changes them only when asked (``hooks install``,
write-back), and then like this:

1. :func:`take` reads the file whole -- through a symlink to where it really is
   (a dotfiles manager's link stays a link), or, with ``follow=False`` (files in
   Claude Code's memory folder), refusing a symlink at that name, dangling or
   not -- regular files only, without blocking on a FIFO, capped -- and
   remembers its bytes;
2. the new bytes go to a temp file beside the target (same file system, so the
   rename is atomic), written whole, ``fsync``-ed, with the target's mode
   (:func:`korg_bridge._fs.durable.stage`);
3. under an exclusive lock, the target is read again: if its bytes are not the
   ones read in step 1 (Claude Code or a person changed it meanwhile), nothing
   is replaced and :class:`Changed` says so; otherwise the temp file is
   renamed over it and the folder ``fsync``-ed (:func:`korg_bridge._fs.durable.publish`).

The lock serialises korg-recall processes; another program does not take it, so
a write landing between the check and the rename (microseconds) is the one
race left -- the same one every editor's save has.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from korg_bridge._fs.durable import fsync_folder, publish, stage
from korg_bridge._fs.safe_read import NotRegular, RegularFile
from korg_bridge.errors import Changed, ConfigError

__all__ = ["Changed", "Snapshot", "locked", "read_capped", "remove", "replace", "take"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file as read: where it really is, its bytes (None: it did not exist) and mode."""

    path: Path
    data: bytes | None
    mode: int = 0o644
    follow: bool = True
    """False: a symlink at ``path`` is refused when read again, never written through."""


def read_capped(path: Path, cap: int, *, follow: bool = True) -> bytes | None:
    """The bytes of the regular file ``path`` (None: it does not exist), read without blocking
    (a FIFO, socket or device is refused, not opened for a read that never ends).

    Raises:
        ConfigError: not a regular file (or, with ``follow=False``, a symlink), over ``cap``, or unreadable.
    """
    file = RegularFile(path, follow=follow)
    try:
        file.open()
    except FileNotFoundError:
        return None
    except NotRegular as exc:
        raise ConfigError(f"{path} is not a regular file; korg-recall changes only regular files.") from exc
    except OSError as exc:
        if not follow and exc.errno == errno.ELOOP:
            raise ConfigError(
                f"{path} is a symbolic link; korg-recall writes only regular files inside {path.parent}, never "
                "through a link."
            ) from exc
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}. Check its permissions.") from exc
    with file:
        try:
            data, over = file.read(cap)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}.") from exc
    if over:
        raise ConfigError(f"{path} is over {cap} bytes; korg-recall does not change a file that large.")
    return data


def take(path: Path, cap: int, *, follow: bool = True) -> Snapshot:
    """Read ``path`` for a later guarded :func:`replace`: through symlinks to where the file really
    is, or (``follow=False``) only a regular file at that very name.

    Raises:
        ConfigError: it is not a regular file (or is a symlink, with ``follow=False``), is over
            ``cap`` bytes, or cannot be read.
    """
    target = Path(os.path.realpath(path)) if follow else path
    data = read_capped(target, cap, follow=follow)
    mode = 0o644
    if data is not None:
        with contextlib.suppress(OSError):
            mode = stat.S_IMODE(os.stat(target, follow_symlinks=follow).st_mode)
    return Snapshot(target, data, mode, follow)


@contextlib.contextmanager
def locked(lock: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock`` (created if needed): one korg-recall writer at a time."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _unchanged(snapshot: Snapshot) -> bool:
    """Whether the file still holds what the snapshot read (absent if it was absent)."""
    try:
        return (
            read_capped(snapshot.path, len(snapshot.data or b"") + 1, follow=snapshot.follow) == snapshot.data
        )
    except ConfigError:  # grew past what was read, or became something else
        return False


def _changed(snapshot: Snapshot) -> Changed:
    return Changed(
        f"{snapshot.path} changed while korg-recall was about to write it (someone else saved it); nothing "
        "was written. Run the command again."
    )


def replace(snapshot: Snapshot, data: bytes, *, lock: Path) -> None:
    """Write ``data`` over the file of ``snapshot`` (creating it when it did not exist), atomically,
    only if it still holds the bytes the snapshot read.

    Raises:
        Changed: the file changed since it was read (then nothing was written).
        ConfigError: the folder cannot be written.
    """
    target = snapshot.path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = stage(target, data, mode=snapshot.mode)
    except OSError as exc:
        raise ConfigError(
            f"cannot write beside {target}: {exc.strerror or exc}. Check free space and permissions."
        ) from exc
    try:
        with locked(lock):
            if not _unchanged(snapshot):
                raise _changed(snapshot)
            # A file that did not exist is linked into place: that fails if the name appeared meanwhile.
            publish(tmp, target, replace=snapshot.data is not None)
    except FileExistsError:
        raise _changed(snapshot) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot write {target}: {exc.strerror or exc}. Check free space and permissions."
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # not published: the change was refused


def remove(snapshot: Snapshot, *, lock: Path) -> None:
    """Delete the file of ``snapshot`` -- one korg-recall created -- if it is still what was read.

    Raises:
        Changed: it changed since it was read.
        ConfigError: it cannot be deleted.
    """
    try:
        with locked(lock):
            if not _unchanged(snapshot):
                raise _changed(snapshot)
            os.unlink(snapshot.path)
    except OSError as exc:
        raise ConfigError(f"cannot delete {snapshot.path}: {exc.strerror or exc}.") from exc
    fsync_folder(snapshot.path.parent)
