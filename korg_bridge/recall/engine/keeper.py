"""The engine's keeper: one process that holds the index and the store open between calls.

A SQLite connection that closes while no other holds the file checkpoints the write-ahead log
into it, syncs, and deletes the log; the next one to open makes a new log and a new shared-memory
index. Every call's child did that for both files -- about 4 ms of a keyword recall, spent after
its answer was written but before the caller saw its exit. With a connection of the keeper open
on each file, a child's close is just a close; and after each call the engine asks the keeper to
checkpoint: ``TRUNCATE``, without waiting -- when no call reads or writes, the log is copied into
the file and emptied (so no byte of a purged memory lingers in a log that no longer gets deleted,
and reads go through the memory map, not the log); when one does, nothing happens until the next
call ends. When the engine stops the keeper closes its connections -- the last ones: the log is
checkpointed and removed, as a call's close always did.

The keeper opens only a file proven korg-recall's beforehand, through a read-only, immutable
look that cannot change it (the index's application id; the store's first migration), and only
a file in WAL mode. A file replaced at its path (an index moved aside and rebuilt; a store put
back from a copy) is let go of without a close: SQLite deletes a log by *name* on the last
close, and that name now belongs to the new file. A held file changed other than through its log
(written straight into, or damaged) is proven ours again before it is held any longer; one that no
longer is -- a wrecked schema -- is let go of: closed when its log is empty (the log and its index
removed, as a fresh process leaves such a file), abandoned otherwise. Nothing else is written,
nothing is read.

It runs in a process of its own, forked from the engine before the engine listens: SQLite's
per-file lock bookkeeping must never be inherited by a forked call (the engine opens files only
between forks, and closes them again).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from korg_bridge.recall.opened import written

__all__ = ["ABANDON_MAX", "Keeper", "keep"]

ABANDON_MAX = 8
"""Files let go of without a close (each replaced at its path) before the keeper holds nothing more."""
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"
"""On a connection with no busy timeout: done at once, or not at all this time."""


@dataclass(slots=True)
class _Held:
    conn: sqlite3.Connection
    identity: tuple[int, int]
    proven: tuple[int, int]
    """The file's (mtime_ns, size) when it was last proven ours: a WAL-mode writer changes the file
    only in a checkpoint, so any other change -- a write straight into it, a disk's damage -- is
    looked at again before the keeper goes on holding it."""


class Keeper:
    """What the keeper process does with ``paths``: each a ``(path, kind)`` with kind ``index`` or
    ``store``. :meth:`tend` after each call, :meth:`release` at the end."""

    def __init__(self, paths: list[tuple[str, str]]) -> None:
        self.paths = paths
        self.held: dict[str, _Held] = {}
        self.abandoned: list[sqlite3.Connection] = []

    def tend(self) -> None:
        """Hold each file that is ours (again, if it was replaced), and checkpoint its log."""
        for path, kind in self.paths:
            self._tend(path, kind)

    def _tend(self, path: str, kind: str) -> None:
        try:
            info: os.stat_result | None = os.stat(path)
        except OSError:
            info = None
        held = self.held.get(path)
        if held is not None and (info is None or (info.st_dev, info.st_ino) != held.identity):
            self._abandon(path)
            held = None
        if held is not None and info is not None and written(info) != held.proven:
            if not _ours(path, kind):  # damaged or rewritten: a fresh process would hold nothing
                self._let_go(path)
                return
            held.proven = written(info)
        if held is None:
            if info is None or not stat.S_ISREG(info.st_mode) or len(self.abandoned) >= ABANDON_MAX:
                return
            held = self._open(path, kind, info)
            if held is None:
                return
            self.held[path] = held
        try:
            held.conn.execute(CHECKPOINT).fetchall()
        except sqlite3.Error:
            self._abandon(path)  # not for the keeper to judge: the next call reports what is wrong
            return
        with contextlib.suppress(OSError):  # the checkpoint itself wrote the file
            held.proven = written(os.stat(path))

    def _open(self, path: str, kind: str, info: os.stat_result) -> _Held | None:
        """A connection to ``path`` if it is korg-recall's ``kind`` of file in WAL mode, else None."""
        if info.st_size == 0 or not _ours(path, kind):
            return None
        try:
            conn = sqlite3.connect(
                f"file:{quote(path)}?mode=rw",
                uri=True,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error:
            return None
        try:
            wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        except sqlite3.Error:  # busy (a migration holds it), or unreadable: another time
            _left(conn)
            return None
        try:
            again = os.stat(path)
        except OSError:
            self.abandoned.append(conn)  # gone meanwhile: whose its path is now is unknown
            return None
        if (again.st_dev, again.st_ino) != (info.st_dev, info.st_ino):
            self.abandoned.append(conn)  # replaced while it was opened: not proven ours, never closed
            return None
        if not wal:
            _left(conn)
            return None
        # A checkpoint syncs as the file's own connections would: the store's writes are durable
        # when acknowledged (FULL), the index is a cache (NORMAL).
        conn.execute(f"PRAGMA synchronous = {'FULL' if kind == 'store' else 'NORMAL'}")
        return _Held(conn, (info.st_dev, info.st_ino), written(info))

    def _abandon(self, path: str) -> None:
        held = self.held.pop(path)
        self.abandoned.append(held.conn)  # never closed: its last close would delete a log by name

    def _let_go(self, path: str) -> None:
        """Stop holding a file that is no longer provably ours. Closed when its log is empty -- the
        close writes nothing into the file and removes the log and its index, which a fresh
        process would not have left beside a damaged file; abandoned otherwise, since a last close
        would copy the log into a file that may be anyone's now."""
        try:
            empty = os.stat(f"{path}-wal").st_size == 0
        except FileNotFoundError:
            empty = True
        except OSError:
            empty = False
        if not empty:
            self._abandon(path)
            return
        held = self.held.pop(path)
        _left(held.conn)

    def release(self) -> None:
        """Close every connection whose file is still the one opened (the log checkpointed and
        removed if it is the last); leave the others open for the process's exit to drop."""
        for path in list(self.held):
            held = self.held[path]
            try:
                info = os.stat(path)
            except OSError:
                self._abandon(path)
                continue
            if (info.st_dev, info.st_ino) != held.identity:
                self._abandon(path)
                continue
            del self.held[path]
            try:  # noqa: SIM105 -- a close that fails leaves what the next opener recovers
                held.conn.close()
            except sqlite3.Error:
                pass


def keep(poked: int, paths: list[tuple[str, str]]) -> None:
    """The keeper process's life: tend the files at start and after each poke on ``poked``; when
    the engine's end of the pipe closes (it stopped, or died), release them."""
    keeper = Keeper(paths)
    keeper.tend()
    while True:
        try:
            data = os.read(poked, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not data:
            break
        keeper.tend()
    keeper.release()


def _left(conn: sqlite3.Connection) -> None:
    """Close a connection that read nothing but the journal mode (or failed to)."""
    try:  # noqa: SIM105
        conn.close()
    except sqlite3.Error:
        pass


def _ours(path: str, kind: str) -> bool:
    """Whether ``path`` is korg-recall's ``kind`` of file, from a look that cannot change it."""
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro&immutable=1"
    try:
        look = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return False
    try:
        if kind == "index":
            from korg_bridge.recall.history.migrations import APPLICATION_ID

            return bool(look.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID)
        from korg_bridge.recall.memory.backend.sqlite.schema import MIGRATIONS

        row = look.execute("SELECT name FROM _migrations ORDER BY rowid LIMIT 1").fetchone()
        return row is not None and row[0] == MIGRATIONS[0][0]
    except sqlite3.Error:
        return False
    finally:
        look.close()
