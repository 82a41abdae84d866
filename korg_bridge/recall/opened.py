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
opens anew, as without an engine. And the file must still pass the look the spare made before
opening it (``recheck``, about 0.6 ms a file in a forked call): an open parses the file's schema,
which a connection opened earlier holds from then -- a file damaged since (a write straight into
it, a disk's) must meet the call's own open and its error, as it would without an engine. The
look is skipped only when nothing was written since the last one: the file's size and time
unchanged, and that look made :data:`COARSE_S` after the file's last write (the kernel's clock
for file times is coarse). A waiting spare looks again (:func:`refresh`) after the keeper's
checkpoint has written the files, so a call rarely looks itself. A
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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["clear", "let_go", "offer", "refresh", "take", "written"]

COARSE_S = 0.05
"""How far a file's modification time may lag the write that set it: the kernel stamps files from
a clock that ticks every few milliseconds, so a write within a tick of an earlier one may leave
the time as it was. A proof taken closer than this to the file's time proves nothing."""


@dataclass(slots=True)
class _Offered:
    identity: tuple[int, int]
    """The file's ``(st_dev, st_ino)`` when it was opened."""
    schema: int
    """Its ``PRAGMA schema_version`` then."""
    recheck: Callable[[], bool]
    """Whether the file at the path still passes the look made before it was opened."""
    conn: sqlite3.Connection
    proof: tuple[int, int]
    """The file's ``(st_mtime_ns, st_size)`` when it last passed the look."""
    settled: bool
    """Whether that look came long enough after the file's last write (:data:`COARSE_S`) for an
    unchanged ``proof`` to mean nothing was written since."""


_OPENED: dict[str, _Offered] = {}
"""Absolute path -> what was opened ahead for it."""
_LET_GO: list[sqlite3.Connection] = []
"""Connections never to be closed (see the module docstring): held until the process ends."""


def offer(
    path: Path | str, conn: sqlite3.Connection, recheck: Callable[[], bool], before: tuple[int, int]
) -> None:
    """Keep ``conn``, just opened on ``path`` after ``recheck`` passed, for the first open of that
    path in this process. ``before`` is the file's ``(st_dev, st_ino)`` looked at just before the
    open: a connection cannot say which file it has open, and a file swapped at the path between
    the open and this look would otherwise be recorded as the one the connection reads -- a call
    then took a connection to the old file as the new one's, and answered from it.

    Raises:
        OSError: the path cannot be looked at (the caller then lets ``conn`` go itself).
    """
    info = os.stat(path)
    schema = _schema_version(conn)
    key = os.path.abspath(path)
    earlier = _OPENED.pop(key, None)
    if earlier is not None:
        _LET_GO.append(earlier.conn)
    if schema is None or (info.st_dev, info.st_ino) != before:
        _LET_GO.append(conn)  # possibly a file no longer at the path: never closed
        return
    _OPENED[key] = _Offered((info.st_dev, info.st_ino), schema, recheck, conn, written(info), _settled(info))


def take(path: Path | str) -> tuple[sqlite3.Connection, tuple[int, int]] | None:
    """The connection offered for ``path`` and the file's ``(st_dev, st_ino)``, if the path still
    names the file it was opened on and the file still passes the look (it is handed out once);
    else None -- and then the caller opens as it always did."""
    if not _OPENED:
        return None
    key = os.path.abspath(path)
    found = _OPENED.get(key)
    if found is None:
        return None
    if not _still(key, found, path):
        return None
    del _OPENED[key]
    return found.conn, found.identity


def refresh() -> None:
    """Look again at every file offered that was written since its look (a spare does, while it
    waits): the call that comes then takes its connection without looking."""
    for key, found in list(_OPENED.items()):
        _still(key, found, key)


def _still(key: str, found: _Offered, path: Path | str) -> bool:
    """Whether ``found`` still stands for the file at ``path``; if not, it is no longer offered."""
    try:
        info: os.stat_result | None = os.stat(path)
    except OSError:
        info = None
    if info is None or (info.st_dev, info.st_ino) != found.identity:
        del _OPENED[key]
        _LET_GO.append(found.conn)  # another file at the path now, or none: never closed
        return False
    fresh = found.settled and written(info) == found.proof
    if _schema_version(found.conn) != found.schema or (not fresh and not found.recheck()):
        # Its schema changed since (another korg-recall migrated it), or it no longer passes the
        # look (damaged): the call's own open looks at it again -- a newer schema is refused
        # there, a damaged file reported, as they always were. The file is the one it was opened
        # on, so it is closed: a connection kept to the process's end would keep the log and its
        # index beside the file after every other close, as no fresh process leaves them.
        del _OPENED[key]
        try:  # noqa: SIM105 -- a close that fails leaves what the next opener recovers
            found.conn.close()
        except sqlite3.Error:
            pass
        return False
    if not fresh:
        found.proof, found.settled = written(info), _settled(info)
    return True


def written(info: os.stat_result) -> tuple[int, int]:
    """A file's ``(st_mtime_ns, st_size)``: what changes when anything but its log is written."""
    return info.st_mtime_ns, info.st_size


def _settled(info: os.stat_result) -> bool:
    return time.time() - info.st_mtime_ns / 1e9 >= COARSE_S


def clear() -> None:
    """Let go of every connection offered (never closed: their files may be gone from their paths)."""
    _LET_GO.extend(offered.conn for offered in _OPENED.values())
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
