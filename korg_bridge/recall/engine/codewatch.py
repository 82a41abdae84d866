"""Whether the package's files changed since the engine loaded them: an engine answers only for
the code it runs.

A front sends which installation it runs (:func:`~.protocol.code_identity`: the interpreter, its
prefix, the package's folder) and the engine vouches for the rest: it watches every folder of
its package (inotify) from before its preload, and before each call it reads what happened. Any
change -- a file written, touched, renamed, added or removed, a folder made or gone, an upgrade,
a ``git checkout`` in an editable install -- makes it *stale*: it answers no call from then on
and stops, so the next call runs in its own process (and, with ``KORG_RECALL_ENGINE=auto``,
starts an engine of the new code once this one is gone). Compiled bytecode (``__pycache__``)
does not count: a fresh process writes it for the same sources.

Without inotify (not Linux, or the user's watches used up) the engine walks the package's files
before each call instead (:func:`~.protocol.code_fingerprint`: names, sizes and mtimes; some
3 ms) and compares the walk with the one it made at start.
"""

from __future__ import annotations

import os

from korg_bridge.recall.engine.inotify import IN_ISDIR, IN_Q_OVERFLOW, Inotify
from korg_bridge.recall.engine.protocol import code_fingerprint, package_folders

__all__ = ["CodeWatch"]

_COMPILED = (".pyc", ".pyo")


class CodeWatch:
    """The engine's watch over its own package (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.why: str | None = None
        """What changed, once something did (the engine is stale from then on)."""
        self.fingerprint: str | None = None
        """The walk at start, when there is no inotify watch."""
        self.folders: dict[int, str] = {}
        inotify: Inotify | None = None
        try:
            inotify = Inotify()
            for folder in package_folders(root):
                self.folders[inotify.add(folder)] = folder
        except (OSError, AttributeError):  # not Linux, or no watch left for this user
            if inotify is not None:
                os.close(inotify.fd)
            inotify = None
            self.folders = {}
            self.fingerprint = code_fingerprint(root)
        self.inotify = inotify

    @property
    def fds(self) -> list[int]:
        """Descriptors a forked child must close: the watch is the engine's."""
        return [self.inotify.fd] if self.inotify is not None else []

    @property
    def watching(self) -> bool:
        return self.inotify is not None

    def stale(self) -> str | None:
        """What changed in the package since the engine started, or None: call before each call."""
        if self.why is not None:
            return self.why
        if self.inotify is None:
            if code_fingerprint(self.root) != self.fingerprint:
                self.why = "a file of the package changed"
            return self.why
        for wd, mask, name in self.inotify.events():
            if mask & IN_Q_OVERFLOW:
                self.why = "too many changes in the package to follow"
                break
            if (name == "__pycache__" and mask & IN_ISDIR) or name.endswith(_COMPILED):
                continue  # bytecode a fresh process compiled: the sources are what count
            folder = self.folders.get(wd, self.root)
            self.why = f"{os.path.join(folder, name) if name else folder} changed"
            break
        return self.why
