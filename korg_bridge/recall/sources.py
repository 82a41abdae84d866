"""Which ledger files korg-recall reads, and how it reads them incrementally.

Ledgers are append-only files that other processes are writing while we
read them, so reading is done in bytes from a saved offset, and a line is
only consumed once its newline has arrived. The index stores, per file, the
``end_offset``/``end_line`` of the last read and a :class:`FileState`; the rule
it applies on the next pass:

* inode or device changed → the file was replaced: re-read from 0;
* size smaller than the stored offset → the file was truncated: re-read from 0;
* otherwise, if size or mtime changed → read from the stored offset.

Sources resolve in this order: explicit ``--ledger`` paths, else
``KORG_RECALL_LEDGER`` (``os.pathsep``-separated like ``PATH``; commas are
not separators, since they are legal in file names), else the defaults
(``~/.korg/sessions``, ``~/.korg/claude-events.jsonl``, and
``$CLAUDE_CONFIG_DIR/projects`` defaulting to ``~/.claude/projects``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from korg_bridge.errors import ConfigError
from korg_bridge.recall.event import Event
from korg_bridge.recall.shapes import ResultPatch, normalize

__all__ = [
    "FileState",
    "ReadResult",
    "default_sources",
    "list_file_paths",
    "list_files",
    "missing_sources",
    "read_from",
    "resolve_sources",
    "stat_file",
]

logger = logging.getLogger(__name__)

ENV_LEDGER = "KORG_RECALL_LEDGER"

CHUNK_SIZE = 1024 * 1024
"""Bytes read per step: bounds memory for huge files while keeping syscalls few."""


# --- which files -----------------------------------------------------------------------------------


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def _expand(raw: str, env: Mapping[str, str]) -> Path:
    """Expand ``~`` against ``env["HOME"]`` (not the process's) and make the path absolute."""
    # ``~user`` forms have no env equivalent: the process's own expansion handles them.
    path = _home(env) / raw[2:] if raw == "~" or raw.startswith("~/") else Path(os.path.expanduser(raw))
    return Path(os.path.abspath(path))


def default_sources(env: Mapping[str, str]) -> list[Path]:
    """Return the default places where agents leave ledgers (they need not exist)."""
    home = _home(env)
    claude = env.get("CLAUDE_CONFIG_DIR")
    claude_dir = _expand(claude, env) if claude else home / ".claude"
    return [
        Path(os.path.abspath(home / ".korg" / "sessions")),
        Path(os.path.abspath(home / ".korg" / "claude-events.jsonl")),
        Path(os.path.abspath(claude_dir / "projects")),
    ]


def resolve_sources(ledgers: Sequence[str] | None, env: Mapping[str, str]) -> list[Path]:
    """Return the files and folders to read: explicit ``ledgers``, else the env variable, else defaults.

    An empty ``ledgers`` list counts as not given. Empty entries in
    ``KORG_RECALL_LEDGER`` (``a::b``) are ignored; duplicates are dropped.
    """
    raw: list[str]
    if ledgers:
        raw = list(ledgers)
    elif env.get(ENV_LEDGER, "").strip():
        raw = env[ENV_LEDGER].split(os.pathsep)
    else:
        return default_sources(env)
    paths = [_expand(item.strip(), env) for item in raw if item.strip()]
    return list(dict.fromkeys(paths))


def _walk_jsonl(root: str) -> Iterator[str]:
    """Yield ``*.jsonl`` files under ``root`` in sorted order, following symlinks but never looping.

    Order: a folder's files (sorted by name), then each subfolder (sorted) in turn, depth
    first. ``os.scandir`` entries answer ``is_dir``/``is_file`` from the directory listing
    itself, so a history of thousands of files costs no ``stat`` per file here: every
    query lists the ledgers anew, so this is on the latency path.
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
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=_name)
        except OSError as exc:
            logger.warning("cannot list %s: %s", exc.filename, exc.strerror or exc)
            continue
        subfolders: list[str] = []
        for entry in entries:
            if _is_dir(entry):
                subfolders.append(entry.path)
            elif entry.name.endswith(".jsonl") and _is_file(entry):
                yield entry.path
        stack.extend(reversed(subfolders))


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


def list_files(sources: Sequence[Path]) -> list[Path]:
    """Expand sources into ledger files: files as given, folders scanned recursively for ``*.jsonl``.

    A file named explicitly is taken whatever its suffix. Missing paths are
    skipped silently — the defaults usually do not all exist; use
    :func:`missing_sources` to report them. Each file appears once.
    """
    files: dict[str, None] = {}
    for source in sources:
        if source.is_dir():
            files.update(dict.fromkeys(_walk_jsonl(os.fspath(source))))
        elif source.exists():
            files[os.fspath(source)] = None
    return [Path(path) for path in files]


def list_file_paths(sources: Sequence[Path]) -> list[str]:
    """:func:`list_files` as absolute path strings, for the per-query freshness check.

    Building a :class:`~pathlib.Path` costs ~10 µs on Python 3.11, about what
    the ``stat`` it is made for costs: on a history of thousands of files,
    every query would pay that twice over. Same files, same order; a file
    reached under two spellings (relative and absolute) appears once.
    """
    files: dict[str, None] = {}
    for source in sources:
        root = os.path.abspath(source)
        if os.path.isdir(root):
            files.update(dict.fromkeys(_walk_jsonl(root)))
        elif os.path.exists(root):
            files[root] = None
    return list(files)


def missing_sources(sources: Sequence[Path]) -> list[Path]:
    """Return the sources that do not exist (for stats and ``--verbose`` diagnostics)."""
    return [source for source in sources if not source.exists()]


# --- incremental reading ---------------------------------------------------------------------------


@dataclass
class FileState:
    """What the index remembers of a file to decide between resuming and re-reading."""

    size: int
    mtime_ns: int
    inode: int
    dev: int


def stat_file(path: str | os.PathLike[str]) -> FileState | None:
    """Return the file's current :class:`FileState`, or None if it is gone or unreadable."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileState(size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino, dev=st.st_dev)


@dataclass
class ReadResult:
    """Everything one :func:`read_from` call consumed, and where the next call resumes."""

    events: list[Event] = field(default_factory=list)
    patches: list[ResultPatch] = field(default_factory=list)
    end_offset: int = 0
    """Byte offset just after the last complete line consumed."""
    end_line: int = 0
    """Complete lines consumed so far in the file, blank ones included (the next line is ``end_line + 1``)."""
    skipped: int = 0
    """Malformed or non-object lines in this read."""
    ignored: int = 0
    """Valid JSON objects that hold no event (Claude Code ``system`` lines, unknown records)."""


_decode_json = json.JSONDecoder().raw_decode
"""``json.loads`` minus its per-call wrapping (type checks, two whitespace regexes): a third
of the parse cost of a typical ledger line, paid once per line."""


def _consume(line: bytes, *, source: str, offset: int, line_no: int, into: ReadResult) -> None:
    # Decode only after splitting on b"\n", so invalid UTF-8 can never move a line boundary.
    text = line.decode("utf-8", errors="replace").lstrip("\ufeff").strip()
    if not text:
        return
    try:
        obj, end = _decode_json(text)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        into.skipped += 1
        return
    if end != len(text) or not isinstance(obj, dict):  # trailing data, or not an object
        into.skipped += 1
        return
    items = normalize(obj, source=source, offset=offset, line_no=line_no)
    if not items:
        into.ignored += 1
    for item in items:
        if isinstance(item, ResultPatch):
            into.patches.append(item)
        else:
            into.events.append(item)


def read_from(path: Path, offset: int, line_no: int, *, max_bytes: int | None = None) -> ReadResult:
    """Read complete lines of ``path`` from byte ``offset``; ``line_no`` lines precede it.

    A last line without its newline is left for the next call (its writer is
    still writing it). Malformed lines are counted in ``skipped`` and never stop
    the file. The file is streamed in :data:`CHUNK_SIZE` chunks; ``max_bytes``
    bounds one call (at least one complete line is always consumed when one
    is available, so a caller looping until ``end_offset`` stops moving always
    progresses).

    Raises:
        ConfigError: the file cannot be opened or read.
    """
    source = os.path.abspath(path)
    result = ReadResult(end_offset=offset, end_line=line_no)
    stop = offset + max_bytes if max_bytes is not None and max_bytes > 0 else None
    position = offset  # file offset just after the last complete line
    count = line_no
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            # Bytes after the last newline seen: a line still being written, or a long one
            # spanning chunks. Grown in place, so a huge line costs linear time, not quadratic.
            tail = bytearray()
            while stop is None or position < stop:
                chunk = handle.read(CHUNK_SIZE)
                if not chunk:
                    break
                last = chunk.rfind(b"\n")
                if last < 0:
                    tail += chunk
                    continue
                if tail:
                    tail += chunk[:last]
                    block = bytes(tail)
                else:
                    block = chunk[:last]
                tail = bytearray(chunk[last + 1 :])
                for line in block.split(b"\n"):
                    count += 1
                    _consume(line, source=source, offset=position, line_no=count, into=result)
                    position += len(line) + 1
                    if stop is not None and position >= stop:
                        break
    except OSError as exc:
        raise ConfigError(
            f"cannot read ledger {path}: {exc.strerror or exc}. Check that it exists and is readable."
        ) from exc
    result.end_offset = position
    result.end_line = count
    return result
