"""Which ledger files korg-recall reads.

Sources resolve in this order: explicit ``--ledger`` paths, else
``KORG_RECALL_LEDGER`` (``os.pathsep``-separated like ``PATH``; commas are
not separators, since they are legal in file names), else the defaults
(``~/.korg/sessions``, ``~/.korg/claude-events.jsonl``,
``$CLAUDE_CONFIG_DIR/projects`` defaulting to ``~/.claude/projects``,
``$CODEX_HOME/sessions`` defaulting to ``~/.codex/sessions``, and the memory
store's operation log ``memory-ops.jsonl`` when it exists).

Only regular files are ever read. ``ledger`` is an argument a model picks
through the bridge, on a tool allowed by default: a device (``/dev/zero``)
would grow memory without bound, a FIFO would block forever. So a source
named explicitly that is neither a folder nor a regular file is a usage
error naming it, and a folder scan passes over such entries (symlinks are
followed, but never in a loop). Each file is checked again when it is
opened (:mod:`korg_bridge._fs.lines`), in case it was swapped meanwhile.

A caller walled into its tenant (:mod:`korg_bridge.recall.history.walls`) gets
its sources from the operator instead, and its listings are confined
(:class:`Walls`): every path is listed with its symlinks resolved, and a link
that leads where the caller may not read is passed over, never followed.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from korg_bridge.errors import UsageError
from korg_bridge.recall import paths

__all__ = [
    "FileState",
    "Listing",
    "Walls",
    "default_sources",
    "list_file_paths",
    "list_files",
    "missing_sources",
    "resolve_sources",
    "stat_file",
]

logger = logging.getLogger(__name__)


class Walls(Protocol):
    """What a caller walled into its tenant may read
    (:class:`~korg_bridge.recall.history.walls.TenantHistory`)."""

    @property
    def sources(self) -> tuple[str, ...]:
        """Where its history is: files and folders, every symlink resolved."""
        ...

    def allows(self, real: str) -> bool:
        """Whether the file or folder at ``real`` (absolute, every symlink resolved) may be read."""
        ...


# --- which files -----------------------------------------------------------------------------------


def default_sources(env: Mapping[str, str]) -> list[Path]:
    """Return the default places where agents leave ledgers (they need not exist)."""
    home = paths.home(env)
    claude_dir = paths.claude_home(env)
    codex_dir = paths.codex_home(env)
    found = [
        Path(os.path.abspath(home / ".korg" / "sessions")),
        Path(os.path.abspath(home / ".korg" / "claude-events.jsonl")),
        Path(os.path.abspath(claude_dir / "projects")),
        Path(os.path.abspath(codex_dir / "sessions")),
    ]
    oplog = _memory_oplog(env)
    if oplog is not None:
        found.append(oplog)
    return found


def _memory_oplog(env: Mapping[str, str]) -> Path | None:
    """The memory store's operation log when it exists: recall then finds who changed which memory."""
    from korg_bridge.errors import ConfigError
    from korg_bridge.recall.paths import OPLOG_NAME, default_store_path

    try:
        path = default_store_path(env).parent / OPLOG_NAME
    except ConfigError:  # a store URL: reported by the memory commands, not by every recall
        return None
    return path if path.is_file() else None


def resolve_sources(ledgers: Sequence[str] | None, env: Mapping[str, str]) -> list[Path]:
    """Return the files and folders to read: explicit ``ledgers``, else the env variable, else defaults.

    An empty ``ledgers`` list counts as not given. Empty entries in
    ``KORG_RECALL_LEDGER`` (``a::b``) are ignored; duplicates are dropped.
    """
    raw: list[str]
    if ledgers:
        raw = list(ledgers)
    else:
        listed = paths.ledger_paths(env)
        if listed is None:
            return default_sources(env)
        raw = listed
    found = [paths.expand(item.strip(), env) for item in raw if item.strip()]
    return list(dict.fromkeys(found))


@dataclass
class Listing:
    """The ledger files under some sources, and the ``*.jsonl`` entries passed over on the way."""

    files: list[str] = field(default_factory=list)
    passed_over: list[str] = field(default_factory=list)
    """Entries named ``*.jsonl`` that are no regular file (FIFOs, devices, sockets, broken or
    looping symlinks) or whose name the index cannot store (not UTF-8)."""


def _storable(path: str) -> bool:
    """Whether ``path`` can be stored as text: a name that is not UTF-8 decodes to lone surrogates."""
    if path.isascii():
        return True
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walk_jsonl(root: str, listing: Listing, walls: Walls | None = None) -> Iterator[str]:
    """Yield ``*.jsonl`` files under ``root`` in sorted order, following symlinks but never looping.

    Order: a folder's files (sorted by name), then each subfolder (sorted) in turn, depth
    first. ``os.scandir`` entries answer ``is_dir``/``is_file`` from the directory listing
    itself, so a history of thousands of files costs no ``stat`` per file here: every
    query lists the ledgers anew, so this is on the latency path. ``is_file`` follows a
    symlink and is False for anything but a regular file, so FIFOs, devices and sockets
    are passed over (and noted in ``listing``).

    With ``walls`` (``root`` then has its symlinks resolved), a symlink is followed only
    where the walls allow, and as its target, so every path yielded is resolved too; a link
    the walls refuse is passed over, any other entry they refuse left out unnamed. Only
    links cost a ``realpath``.
    """
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue  # a symlink back into a folder we already walked
        seen.add((st.st_dev, st.st_ino))
        try:
            with os.scandir(folder) as entries_of:
                entries = sorted(entries_of, key=_name)
        except OSError as exc:
            logger.warning("cannot list %s: %s", exc.filename, exc.strerror or exc)
            continue
        subfolders: list[str] = []
        for entry in entries:
            path = entry.path
            if walls is not None:
                link = _is_link(entry)
                path = os.path.realpath(path) if link else path
                if not walls.allows(path):
                    if link:  # a link leading out: worth telling; a file never read: not even named
                        listing.passed_over.append(entry.path)
                    continue
            if _is_dir(entry):
                subfolders.append(path)
            elif entry.name.endswith(".jsonl"):
                if _is_file(entry) and _storable(path):
                    yield path
                else:
                    listing.passed_over.append(entry.path)
        stack.extend(reversed(subfolders))


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def list_sources(sources: Sequence[Path], walls: Walls | None = None) -> Listing:
    """Expand sources into ledger files: files as given, folders scanned recursively for ``*.jsonl``.

    A file named explicitly is taken whatever its suffix. Missing paths are
    skipped silently — the defaults usually do not all exist; use
    :func:`missing_sources` to report them. Each file appears once, as an
    absolute path string (a :class:`~pathlib.Path` costs ~10 µs on Python
    3.11, about what the ``stat`` it is made for costs: on a history of
    thousands of files, every query would pay that twice over).

    With ``walls``, sources and files are listed with their symlinks resolved, and what the
    walls refuse is left out (see :func:`_walk_jsonl`).

    Raises:
        UsageError: a source exists but is neither a folder nor a regular file.
    """
    listing = Listing()
    files: dict[str, None] = {}
    for source in sources:
        root = os.path.abspath(source)
        if walls is not None:
            root = os.path.realpath(root)
            if not walls.allows(root):
                continue
        try:
            mode = os.stat(root).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            files.update(dict.fromkeys(_walk_jsonl(root, listing, walls)))
        elif stat.S_ISREG(mode) and _storable(root):
            files[root] = None
        else:
            raise UsageError(
                f"ledger {source} is not a regular file (a FIFO, device, socket, or a name that is not"
                " UTF-8); korg-recall reads only ledger files. Pass a .jsonl file or a folder of them."
            )
    listing.files = list(files)
    return listing


def list_file_paths(sources: Sequence[Path], walls: Walls | None = None) -> list[str]:
    """The files of :func:`list_sources`.

    Raises:
        UsageError: a source exists but is neither a folder nor a regular file.
    """
    return list_sources(sources, walls).files


def list_files(sources: Sequence[Path]) -> list[Path]:
    """The files of :func:`list_sources`, as paths.

    Raises:
        UsageError: a source exists but is neither a folder nor a regular file.
    """
    return [Path(path) for path in list_sources(sources).files]


def missing_sources(sources: Sequence[Path]) -> list[Path]:
    """Return the sources that do not exist (for stats and ``--verbose`` diagnostics)."""
    return [source for source in sources if not source.exists()]


class FileState(NamedTuple):
    """A file's identity and size as ``stat`` gives them now."""

    size: int
    mtime_ns: int
    inode: int
    dev: int


def stat_file(path: str | os.PathLike[str]) -> FileState | None:
    """Return the file's current :class:`FileState`, or None if it is gone, unreadable or not regular."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return FileState(st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)
