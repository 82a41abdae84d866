"""What a watcher of the mirror folders knows: which folder is unchanged since a scan found it in
line with the store, so the next scan of it can be skipped -- or which of its files something
happened to since, so the next scan looks at those files only.

A fresh ``korg-recall`` process has no watcher and lists every folder it reads, on every call
(:func:`~.files.detect`): with thousands of files that listing is the largest part of a
``memories`` call. A resident engine watches the folders (inotify, see
:mod:`korg_bridge.recall.engine.watch`) and installs a :class:`Watcher` in each call's child; a
folder skipped is one in which nothing at all happened since a scan found every file as the
store recorded it, a file skipped one that no event named since. Whatever the watcher cannot
vouch for is listed, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

__all__ = ["Watcher", "changed", "in_line", "install"]


class Watcher(Protocol):
    """The view of one call: the folders' state as the watcher saw it when the call began."""

    def changed(self, folder: str) -> frozenset[str] | None:
        """The names of the files of ``folder`` that something happened to since a scan found it
        in line (empty: nothing happened), or None when the folder must be listed."""
        ...

    def in_line(self, folder: str) -> None:
        """A scan begun in this call found ``folder`` in line with the store."""
        ...


_watcher: Watcher | None = None


def install(watcher: Watcher | None) -> None:
    """Make ``watcher`` what this process asks (None: list every folder)."""
    global _watcher
    _watcher = watcher


def changed(folder: Path) -> frozenset[str] | None:
    """What :meth:`Watcher.changed` says; None (list the folder) without a watcher."""
    return None if _watcher is None else _watcher.changed(str(folder))


def in_line(folder: Path) -> None:
    if _watcher is not None:
        _watcher.in_line(str(folder))
