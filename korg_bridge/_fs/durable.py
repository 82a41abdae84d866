"""Writing files so that a crash loses nothing and no earlier file is ever replaced.

Every writer of korg-bridge and korg-recall goes through this family; each variant is the
same few steps (a file of our own, written whole, ``fsync``-ed, given its name by a rename or a
link, and the folder ``fsync``-ed) in the order its promise needs:

* **create new, never replace** -- :func:`create_new` writes a copy under a name of its own
  (hooks' backups of a settings file); :func:`reserve` is its first step, for a writer that
  streams (the audit ledger's torn line set aside, the memory store's backup) or moves a file
  onto the name (the broken index moved aside, a topic file archived): it creates
  ``NAME``, ``NAME-2``, ``NAME-3`` … exclusively (``O_EXCL``), so nothing that exists is touched;
* **replace ours** -- :func:`replace_ours` (a file only korg-recall writes, such as a pulled
  model's manifest): a temp file beside it, renamed over it;
* **replace someone else's if unchanged** -- :func:`stage` then :func:`publish`: the new bytes
  in a temp file beside the target, then, after the caller's check under its lock
  (:mod:`korg_bridge.recall.interop.guarded_write`: Claude Code's ``settings.json`` and
  ``MEMORY.md``, the hooks' state), renamed over it, or linked to a name that must still be free
  (an export, a file that did not exist);
* the Markdown mirror, which reaches every file through folder descriptors so that no link is
  followed, writes with :func:`write_synced` and renames itself.

:func:`write_all` writes every byte (``os.write`` may write fewer); :func:`fsync_folder` makes a
new or renamed entry of a folder durable.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "MAX_ATTEMPTS",
    "create_new",
    "fsync_folder",
    "publish",
    "replace_ours",
    "reserve",
    "stage",
    "write_all",
    "write_synced",
]

MAX_ATTEMPTS = 1000
"""Names tried before giving up: far more copies than anyone makes of one file in one second."""

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def reserve(base: str | os.PathLike[str], *, sidecars: Sequence[str] = (), mode: int = 0o600) -> Path:
    """Create ``base`` — or ``base-2``, ``base-3`` … — as a new empty file and return its path.

    With ``sidecars`` (e.g. ``("-wal", "-shm")``) the name is reserved only when
    every ``name + sidecar`` is free too; they are created as well. The files
    are owner-only by default: copies of user data may be sensitive.

    Raises:
        OSError: the folder cannot be written, or :data:`MAX_ATTEMPTS` names are taken.
    """
    root = os.fspath(base)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        name = root if attempt == 1 else f"{root}-{attempt}"
        made: list[str] = []
        try:
            for suffix in ("", *sidecars):
                os.close(os.open(f"{name}{suffix}", _FLAGS, mode))
                made.append(f"{name}{suffix}")
        except FileExistsError:
            for placeholder in made:  # ours, created just now and empty
                os.unlink(placeholder)
            continue
        return Path(name)
    raise FileExistsError(f"{root} and {MAX_ATTEMPTS - 1} numbered variants of it all exist")


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``.

    Raises:
        OSError: the write failed (no space, a closed descriptor).
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make new directory entries in ``folder`` durable (best effort: some filesystems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - the folder was just written to
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on folders
        pass
    finally:
        os.close(fd)


def write_synced(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` and ``fsync`` it: on disk before it gets a name.

    Raises:
        OSError: the write or the sync failed.
    """
    write_all(fd, data)
    os.fsync(fd)


def _fill(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` into the empty file ``path`` we just reserved (``mode``: then its mode), synced;
    on failure the file is removed (it is ours).

    Raises:
        OSError: it cannot be written.
    """
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            write_synced(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def create_new(base: str | os.PathLike[str], data: bytes, *, mode: int = 0o600) -> Path:
    """Write ``data`` under a new name -- ``base``, else ``base-2`` … (see :func:`reserve``) --
    synced with its folder; its path. Never replaces a file; nothing is left on failure.

    Raises:
        OSError: the folder cannot be written, or the file cannot.
    """
    path = reserve(base, mode=mode)
    _fill(path, data)
    fsync_folder(path.parent)
    return path


def stage(target: Path, data: bytes, *, mode: int) -> Path:
    """A new temp file beside ``target`` (same file system, so renaming it is atomic) holding
    ``data`` with ``mode``, synced; for :func:`publish`. Owner-only until then.

    Raises:
        OSError: the folder or the file cannot be written (then nothing is left).
    """
    tmp = reserve(target.parent / f".{target.name}.korg-recall.tmp", mode=0o600)
    _fill(tmp, data, mode)
    return tmp


def publish(tmp: Path, target: Path, *, replace: bool) -> None:
    """Give the staged ``tmp`` the name ``target`` and sync the folder; ``tmp`` is gone after.

    ``replace``: rename over whatever is at ``target`` (the caller checked it is what it read).
    Otherwise ``target`` must still be free: a hard link fails if the name appeared meanwhile (no
    check-then-rename race); on a file system without hard links, a rename after one more look.

    Raises:
        FileExistsError: not ``replace``, and ``target`` exists (nothing was written).
        OSError: the file system refuses.
    """
    try:
        if replace:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise
            except OSError:  # file systems without hard links (FAT, some FUSE)
                if os.path.lexists(target):
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target)) from None
                os.rename(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # the temp file (or its second name after a link)
    fsync_folder(target.parent)


def replace_ours(target: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` over ``target``, a file only we write, atomically: a reader sees the old
    file or the new one, never half of one.

    Raises:
        OSError: the folder or the file cannot be written (then ``target`` is unchanged).
    """
    publish(stage(target, data, mode=mode), target, replace=True)
