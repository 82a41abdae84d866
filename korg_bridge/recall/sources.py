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


def _walk_jsonl(root: Path) -> Iterator[Path]:
    """Yield ``*.jsonl`` files under ``root`` in sorted order, following symlinks but never looping."""
    seen: set[tuple[int, int]] = set()

    def on_error(exc: OSError) -> None:
        logger.warning("cannot list %s: %s", exc.filename, exc.strerror or exc)

    for dirpath, dirnames, filenames in os.walk(root, onerror=on_error, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirnames[:] = []  # a symlink back into a folder we already walked
            continue
        seen.add((st.st_dev, st.st_ino))
        dirnames.sort()
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            if name.endswith(".jsonl") and candidate.is_file():
                yield candidate


def list_files(sources: Sequence[Path]) -> list[Path]:
    """Expand sources into ledger files: files as given, folders scanned recursively for ``*.jsonl``.

    A file named explicitly is taken whatever its suffix. Missing paths are
    skipped silently — the defaults usually do not all exist; use
    :func:`missing_sources` to report them. Each file appears once.
    """
    files: dict[Path, None] = {}
    for source in sources:
        if source.is_dir():
            files.update(dict.fromkeys(_walk_jsonl(source)))
        elif source.exists():
            files[source] = None
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


def stat_file(path: Path) -> FileState | None:
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


def _consume(line: bytes, *, source: str, offset: int, line_no: int, into: ReadResult) -> None:
    # Decode only after splitting on b"\n", so invalid UTF-8 can never move a line boundary.
    text = line.decode("utf-8", errors="replace").lstrip("\ufeff").strip()
    if not text:
        return
    try:
        obj = json.loads(text)
    except ValueError:
        into.skipped += 1
        return
    if not isinstance(obj, dict):
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
    budget = max_bytes if max_bytes is not None and max_bytes > 0 else None
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            buffer = bytearray()
            buffer_start = offset  # file offset of buffer[0]
            scanned = 0  # buffer[:scanned] holds no newline: a long line is never rescanned
            while budget is None or result.end_offset - offset < budget:
                chunk = handle.read(CHUNK_SIZE)
                if not chunk:
                    break
                buffer += chunk
                start = 0
                while budget is None or result.end_offset - offset < budget:
                    newline = buffer.find(b"\n", max(start, scanned))
                    if newline < 0:
                        break
                    result.end_line += 1
                    _consume(
                        bytes(buffer[start:newline]),
                        source=source,
                        offset=buffer_start + start,
                        line_no=result.end_line,
                        into=result,
                    )
                    start = newline + 1
                    result.end_offset = buffer_start + start
                del buffer[:start]
                buffer_start += start
                scanned = len(buffer)
    except OSError as exc:
        raise ConfigError(
            f"cannot read ledger {path}: {exc.strerror or exc}. Check that it exists and is readable."
        ) from exc
    return result
