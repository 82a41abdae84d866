"""SQLite connections opened ahead of a call: a resident engine's spare opens the index and the
store it serves while it waits, so the call that arrives finds them open.

Opening is a dozen statements before the first query -- the ownership look, the schema and
migration checks, the pragmas -- some 2 ms of every engine call that reads both files. A spare
(:mod:`korg_bridge.recall.engine.server`) runs that ahead with the very code a call runs
(:class:`~korg_bridge.recall.history.index.Index`, :class:`~korg_bridge.recall.memory.backend.
sqlite.store.SqliteStore`) and leaves the connections here; the call's own open of the same path
takes one instead of opening anew, once.

A connection stands for the file it was opened on: it is taken only while the path still names
that file (``st_dev``/``st_ino``; the open connection keeps the inode from being reused), and a
file replaced, moved or removed since is opened anew by the call, as without an engine. A spare
offers nothing when opening said anything (a log line, a warning) or failed: the call then
opens, says and fails as a fresh process does. A fresh process has nothing here.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

__all__ = ["clear", "offer", "take"]

_OPENED: dict[str, tuple[tuple[int, int], sqlite3.Connection]] = {}
"""Absolute path -> (the identity of the file it was opened on, the connection)."""


def offer(path: Path | str, conn: sqlite3.Connection) -> None:
    """Keep ``conn``, just opened on ``path``, for the first open of that path in this process.

    Raises:
        OSError: the path cannot be looked at (the caller then closes ``conn`` itself).
    """
    info = os.stat(path)
    key = os.path.abspath(path)
    earlier = _OPENED.pop(key, None)
    if earlier is not None:
        earlier[1].close()
    _OPENED[key] = ((info.st_dev, info.st_ino), conn)


def take(path: Path | str) -> tuple[sqlite3.Connection, tuple[int, int]] | None:
    """The connection offered for ``path`` and the file's ``(st_dev, st_ino)``, if the path still
    names the file it was opened on (it is handed out once); else None -- and then the caller
    opens as it always did."""
    if not _OPENED:
        return None
    found = _OPENED.pop(os.path.abspath(path), None)
    if found is None:
        return None
    identity, conn = found
    try:
        info = os.stat(path)
    except OSError:
        info = None
    if info is None or (info.st_dev, info.st_ino) != identity:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
        return None
    return conn, identity


def clear() -> None:
    """Close and drop every connection offered."""
    while _OPENED:
        _key, (_identity, conn) = _OPENED.popitem()
        with contextlib.suppress(sqlite3.Error):
            conn.close()
