"""SQLite connections opened ahead of a call: a resident engine's spare opens the index and the
store it serves while it waits, so the call that arrives finds them open.

Opening is a dozen statements before the first query -- the ownership look, the schema and
migration checks, the pragmas -- some 2 ms of every engine call that reads both files. A spare
(:mod:`korg_bridge.recall.engine.server`) runs that ahead with the very code a call runs
(:class:`~korg_bridge.recall.history.index.Index`, :class:`~korg_bridge.recall.memory.backend.
sqlite.store.SqliteStore`) and leaves the connections here; the call's own open of the same path
takes one instead of opening anew, once.

A connection stands for the file it was opened on, as it was: it is taken only while the path
still names that file (``st_dev``/``st_ino``; the open connection keeps the inode from being
reused) and the file's schema is unchanged (``PRAGMA schema_version``: another korg-recall may
have migrated it since, and a newer schema must meet the call's own checks); otherwise the call
opens anew, as without an engine. A
connection to a file no longer at its path is never closed, only let go of (kept until the
process ends, which a spare and a call do without closing anything): SQLite's last close deletes
the write-ahead log *by its name*, and the name now belongs to the new file's log, with commits
not yet in the new file -- the keeper's rule too (:mod:`korg_bridge.recall.engine.keeper`). A
spare offers nothing when opening said anything (a log line, a warning) or failed: the call then
opens, says and fails as a fresh process does. A fresh process has nothing here.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

__all__ = ["clear", "let_go", "offer", "take"]

_OPENED: dict[str, tuple[tuple[int, int], int, sqlite3.Connection]] = {}
"""Absolute path -> (the identity of the file it was opened on, its schema's version then, the
connection)."""
_LET_GO: list[sqlite3.Connection] = []
"""Connections never to be closed (see the module docstring): held until the process ends."""


def offer(path: Path | str, conn: sqlite3.Connection) -> None:
    """Keep ``conn``, just opened on ``path``, for the first open of that path in this process.

    Raises:
        OSError: the path cannot be looked at (the caller then closes ``conn`` itself).
    """
    info = os.stat(path)
    schema = _schema_version(conn)
    key = os.path.abspath(path)
    earlier = _OPENED.pop(key, None)
    if earlier is not None:
        _LET_GO.append(earlier[2])
    if schema is None:
        _LET_GO.append(conn)
        return
    _OPENED[key] = ((info.st_dev, info.st_ino), schema, conn)


def take(path: Path | str) -> tuple[sqlite3.Connection, tuple[int, int]] | None:
    """The connection offered for ``path`` and the file's ``(st_dev, st_ino)``, if the path still
    names the file it was opened on (it is handed out once); else None -- and then the caller
    opens as it always did."""
    if not _OPENED:
        return None
    found = _OPENED.pop(os.path.abspath(path), None)
    if found is None:
        return None
    identity, schema, conn = found
    try:
        info = os.stat(path)
    except OSError:
        info = None
    if info is None or (info.st_dev, info.st_ino) != identity or _schema_version(conn) != schema:
        # Another file, or its schema changed since (another korg-recall migrated it): the call's
        # own open looks at it again -- a newer schema is refused there, as it always was.
        _LET_GO.append(conn)
        return None
    return conn, identity


def clear() -> None:
    """Let go of every connection offered (never closed: their files may be gone from their paths)."""
    _LET_GO.extend(conn for _identity, _schema, conn in _OPENED.values())
    _OPENED.clear()


def _schema_version(conn: sqlite3.Connection) -> int | None:
    """SQLite's count of the file's schema changes (None: it cannot be read)."""
    try:
        return int(conn.execute("PRAGMA schema_version").fetchone()[0])
    except sqlite3.Error:
        return None


def let_go(conn: sqlite3.Connection) -> None:
    """Keep ``conn`` open until the process ends instead of closing it (see the module docstring)."""
    _LET_GO.append(conn)
