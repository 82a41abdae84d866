"""A SQLite store's operation-log entries by memory id, for a memory's page.

The log (``memory-ops.jsonl`` beside the store) only grows, so the entries are read once and
kept by memory id; each call reads what was appended since (a log that shrank or was replaced
is read again from its start). Entries name ids and hashes, never text
(:mod:`korg_bridge.recall.memory.oplog`), so keeping them costs little.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

__all__ = ["entries_of"]

READ_MAX = 64 * 1024 * 1024
"""Bytes of log read at one call at most: a huge log is caught up over several page views."""
PER_MEMORY_MAX = 1000
"""Entries kept per memory (the newest)."""


class _Seen:
    def __init__(self) -> None:
        self.key: tuple[int, int] | None = None
        self.offset = 0
        self.by_id: dict[str, list[tuple[int, str]]] = defaultdict(list)


_lock = threading.Lock()
_seen: dict[str, _Seen] = {}


def entries_of(env: Mapping[str, str], memory_id: str, limit: int) -> list[tuple[int, str]]:
    """``(seq_id, entry line)`` of the newest ``limit`` entries naming ``memory_id``, oldest first.

    A missing or irregular log file gives none (the store's health page reports the log).
    """
    from korg_bridge.recall.paths import oplog_path

    path = oplog_path(env)
    if path is None:
        return []
    with _lock:
        seen = _seen.setdefault(str(path), _Seen())
        _catch_up(path, seen)
        return list(seen.by_id.get(memory_id, ())[-limit:])


def _catch_up(path: Path, seen: _Seen) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return
        key = (info.st_dev, info.st_ino)
        if key != seen.key or info.st_size < seen.offset:  # replaced or cut: read it again
            seen.key, seen.offset, seen.by_id = key, 0, defaultdict(list)
        handle.seek(seen.offset)
        data = handle.read(min(READ_MAX, info.st_size - seen.offset))
    end = data.rfind(b"\n") + 1  # a line still being written is read next time
    for raw in data[:end].splitlines():
        _index(raw, seen)
    seen.offset += end


def _index(raw: bytes, seen: _Seen) -> None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return
    args = entry.get("args") if isinstance(entry, dict) else None
    memory_id = args.get("id") if isinstance(args, dict) else None
    if not isinstance(memory_id, str):
        return
    seq = entry.get("seq_id", entry.get("seq", 0))
    found = seen.by_id[memory_id]
    found.append((seq if isinstance(seq, int) else 0, raw.decode("utf-8", "replace")))
    if len(found) > PER_MEMORY_MAX:
        del found[: len(found) - PER_MEMORY_MAX]
