"""The engine's watch over the memory mirror's folders (Linux inotify), so a call can skip
listing a folder in which nothing happened since a scan found it in line with the store, and look
only at the files named by what did happen.

Every read of the store first looks for hand edits in the mirror (:func:`~korg_bridge.recall.
memory.mirror.files.detect`): a listing and a ``stat`` of every file of the caller's scope
folders. The parent watches those folders; each folder has a *generation*, raised by every
event in it (a write, a ``touch``, a rename, a delete, anything). Before forking a call the
parent reads every pending event, so the child inherits generations that include every change
finished before the call began. A child whose scan of a folder found nothing to take in writes
``clean <generation> <folder>`` to the parent's report pipe; the parent marks the folder clean
at that generation, keeping the names of the files events named since it (events that came
during the scan, such as the call's own write: the scan may have missed them). An event that
named no file since that generation and the report does not count. From then on every event in
the folder is one on a file it names (or it drops the mark): the parent keeps those names, and a
later child looks at those files only -- ``stat`` and a compare with the store's record, as the
listing would for them -- instead of listing the folder. A call's own write (``remember``
writing its Markdown file) costs the next call one ``stat``, not a listing, even when the same
call's scan was the folder's first. An event with no file name (the folder itself moved or
deleted, a sub-folder), more than :data:`NAMED_MAX` names, a queue overflow, or another file at
the store's path (a backup restored: its records of the files are not the old one's) drops the
mark: the next call lists.

Sound by construction where inotify sees a change: writes through the folder (editors, ``git``,
``sync``, another ``korg-recall``), renames, deletes, metadata -- each names the file. Not seen,
and so not guaranteed to be taken in until something else happens in the folder: a write
through a hard link made in another folder, and writes through ``mmap``. Without inotify (not
Linux, or the per-user watch limit reached) nothing is ever skipped.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from korg_bridge.recall.engine.inotify import (
    IN_CREATE,
    IN_DELETE_SELF,
    IN_IGNORED,
    IN_ISDIR,
    IN_MOVE_SELF,
    IN_MOVED_TO,
    IN_Q_OVERFLOW,
    Inotify,
)

__all__ = ["MirrorWatch"]

MAX_FOLDERS = 4096
"""Folders watched at most (the mirror has one per scope: the user's and one per project)."""
DEPTH = 2
"""``memories/`` → ``project/`` → ``<project>/``: the deepest scope folder."""
NAMED_MAX = 64
"""Files changed since a folder's clean scan that a call looks at one by one; more: it lists."""
REPORT_MAX = 3000
"""Bytes a report line may have: under ``PIPE_BUF``, so children's lines never interleave."""
RECENT_MAX = 256
"""Events per folder remembered, so a scan's report can still count when events came during it."""


class MirrorWatch:
    """The parent's side: watches, generations, clean marks; :meth:`child` is a call's view."""

    def __init__(self, root: Path, store: Path | None = None) -> None:
        self.root = os.path.realpath(root)
        self.store = store
        """The store the folders mirror: a clean mark says a folder is in line with *that* file."""
        self.store_identity = _identity(store)
        self.wds: dict[int, str] = {}
        self.folders: dict[str, int] = {}
        self.generation: dict[str, int] = {}
        self.clean: dict[str, int] = {}
        self.named: dict[str, set[str]] = {}
        """Per clean folder, the files events named since its clean scan began."""
        self.recent: dict[str, list[tuple[int, str | None]]] = {}
        """Per folder, its last events: the generation each raised and the file it named (None: none)."""
        self.skipped = 0
        self.failed: str | None = None
        self.report_r, self.report_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            self.inotify: Inotify | None = Inotify()
        except (OSError, AttributeError) as exc:  # not Linux, or no inotify left for this user
            self.inotify = None
            self.failed = str(exc)
        self._watch_tree(self.root, 0)

    @property
    def fds(self) -> list[int]:
        """What the parent's loop waits on besides the socket."""
        return [self.report_r] + ([self.inotify.fd] if self.inotify is not None else [])

    def _bump(self, folder: str, name: str | None = None) -> None:
        generation = self.generation[folder] = self.generation.get(folder, 0) + 1
        recent = self.recent.setdefault(folder, [])
        recent.append((generation, name))
        if len(recent) > RECENT_MAX:
            del recent[: len(recent) - RECENT_MAX]

    def _named_since(self, folder: str, generation: int) -> set[str] | None:
        """The files events named in ``folder`` after ``generation``, or None when one of them
        named none (or they are more than a call looks at, or no longer all remembered)."""
        current = self.generation.get(folder, 0)
        after = [name for number, name in self.recent.get(folder, ()) if number > generation]
        if generation > current or len(after) != current - generation or None in after:
            return None
        names = {name for name in after if name is not None}
        return names if len(names) <= NAMED_MAX else None

    def _watch_tree(self, folder: str, depth: int) -> None:
        if self.inotify is None or folder in self.folders or len(self.folders) >= MAX_FOLDERS:
            return
        try:
            wd = self.inotify.add(folder)
        except OSError:
            return  # gone, a link, or no watch left: its scans are never skipped
        self.wds[wd] = folder
        self.folders[folder] = wd
        self._bump(folder)  # watched from now: only a scan begun after this can mark it clean
        if depth >= DEPTH:
            return
        try:
            with os.scandir(folder) as entries:
                subs = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            return
        for sub in sorted(subs):
            self._watch_tree(sub, depth + 1)

    def _depth(self, folder: str) -> int:
        rel = os.path.relpath(folder, self.root)
        return 0 if rel == "." else rel.count(os.sep) + 1

    def _forget_all(self) -> None:
        self.clean.clear()
        self.named.clear()
        for folder in self.generation:
            self._bump(folder)

    def _unmark(self, folder: str) -> None:
        self.clean.pop(folder, None)
        self.named.pop(folder, None)

    def drain(self) -> None:
        """Take in every pending event and report: call before each fork."""
        identity = _identity(self.store)
        if identity != self.store_identity:  # another file at the store's path: in line with none
            self.store_identity = identity
            self._forget_all()
        if self.inotify is not None:
            if self.root not in self.folders and os.path.isdir(self.root):
                self._watch_tree(self.root, 0)  # the mirror was made after the engine started
            for wd, mask, name in self.inotify.events():
                if mask & IN_Q_OVERFLOW:
                    self._forget_all()
                    continue
                folder = self.wds.get(wd)
                if folder is None:
                    continue
                on_file = name and not mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_ISDIR)
                self._bump(folder, name if on_file else None)
                if mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                    self._unmark(folder)
                    self.wds.pop(wd, None)
                    self.folders.pop(folder, None)
                elif mask & IN_ISDIR or not name:
                    self._unmark(folder)
                    if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO) and name:
                        sub = os.path.join(folder, name)
                        self._watch_tree(sub, self._depth(sub))
                elif folder in self.clean:
                    named = self.named.setdefault(folder, set())
                    named.add(name)
                    if len(named) > NAMED_MAX:
                        self._unmark(folder)
        self._read_reports()

    def _read_reports(self) -> None:
        data = b""
        while True:
            try:
                chunk = os.read(self.report_r, 64 * 1024)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        for line in data.decode("utf-8", "surrogateescape").splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "skipped":
                self.skipped += 1
            elif kind == "clean":
                number, _, folder = rest.partition(" ")
                if (
                    not number.isdigit()
                    or folder not in self.folders
                    or self.clean.get(folder, -1) >= int(number)
                ):
                    continue
                # Events during the scan that each named a file: the folder is clean but for those
                # files, which the next call looks at (a call's own write, as ``remember``'s).
                since = self._named_since(folder, int(number))
                if since is not None:
                    self.clean[folder] = int(number)
                    self.named[folder] = since

    def child(self) -> ChildView:
        """The view a forked call installs (:func:`korg_bridge.recall.memory.mirror.watched.install`)."""
        named = {folder: sorted(names) for folder, names in self.named.items()}
        return ChildView(dict(self.generation), dict(self.clean), set(self.folders), self.report_w, named)

    def status(self) -> dict[str, object]:
        return {
            "watching": self.inotify is not None,
            "folders": len(self.folders),
            "clean": len(self.clean),
            "skipped": self.skipped,
            **({"unavailable": self.failed} if self.failed else {}),
        }


def _identity(path: Path | None) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the file at ``path`` (None: none there)."""
    if path is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


class ChildView:
    """A call's copy of the generations, clean marks and named files as they were when it was forked."""

    def __init__(
        self,
        generation: dict[str, int],
        clean: dict[str, int],
        watched: set[str],
        report: int,
        named: dict[str, list[str]] | None = None,
    ) -> None:
        self.generation = generation
        self.clean = clean
        self.watched = watched
        self.report = report
        self.named = named or {}

    def changed(self, folder: str) -> frozenset[str] | None:
        """The files of ``folder`` that may have changed since a scan found it in line (empty:
        none), or None when the folder must be listed."""
        key = os.path.realpath(folder)
        if key not in self.clean:
            return None
        names = frozenset(self.named.get(key, ()))
        if not names:
            self._send(f"skipped {key}\n")
        return names

    def unchanged(self, folder: str) -> bool:
        return self.changed(folder) == frozenset()

    def in_line(self, folder: str) -> None:
        key = os.path.realpath(folder)
        if key in self.watched:
            self._send(f"clean {self.generation[key]} {key}\n")

    def _send(self, line: str) -> None:
        data = line.encode("utf-8", "surrogateescape")
        if len(data) > REPORT_MAX:
            return
        with contextlib.suppress(OSError):  # the pipe full (a slow parent) or gone: the next call lists
            os.write(self.report, data)
