"""Writing files so that a crash loses nothing and no earlier file is ever replaced.

Several places keep a copy of something before they change it — the audit
ledger sets a torn last line aside, the recall index moves a broken database
aside, the memory store backs itself up before a migration — and each copy
must get a name of its own, even when two are made in the same second. They
share the three steps here:

* :func:`reserve` creates a new name exclusively (``O_EXCL``), trying
  ``NAME``, ``NAME-2``, ``NAME-3`` … so nothing that exists is ever touched;
* :func:`write_all` writes every byte (``os.write`` may write fewer);
* :func:`fsync_folder` makes a new or renamed entry of a folder durable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MAX_ATTEMPTS", "fsync_folder", "reserve", "write_all"]

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
