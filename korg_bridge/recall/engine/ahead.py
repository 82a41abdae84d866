"""A spare's last step before it waits: open the index and the store the engine serves, with the
code a call opens them with, and leave the connections for the call (:mod:`korg_bridge.recall.opened`).

Only the plain open is done ahead: a file that is missing (the call may create it, or refuse
to), not in WAL mode or not at the latest migration is not opened at all (an immutable look
first, which the call repeats before it takes the connection -- with SQLite's ``quick_check`` for
a file small enough for its open to check every page), so a spare never writes; and an open that
fails, logs a line at any level or warns makes the spare offer nothing (what it opened is let go of, never closed: see
:mod:`korg_bridge.recall.opened`). The call then meets it itself as a fresh process does, on its
own stderr. The engine parent opened both files before it forked any spare, so in practice there
is nothing left to do but connect and check.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import stat
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

__all__ = ["open_ahead"]


class _Heard(logging.Handler):
    """Counts every record that reaches it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@contextlib.contextmanager
def _listening() -> Iterator[_Heard]:
    """Every log record of any level goes to the returned handler alone, for the block's length."""
    heard = _Heard()
    root, ours = logging.getLogger(), logging.getLogger("korg_bridge")
    saved = (
        logging.root.manager.disable,
        root.handlers[:],
        root.level,
        ours.handlers[:],
        ours.level,
        ours.propagate,
    )
    logging.disable(logging.NOTSET)
    root.handlers, ours.handlers = [heard], []
    root.setLevel(logging.DEBUG)
    ours.setLevel(logging.DEBUG)
    ours.propagate = True
    try:
        yield heard
    finally:
        logging.disable(saved[0])
        root.handlers = saved[1]
        root.setLevel(saved[2])
        ours.handlers = saved[3]
        ours.setLevel(saved[4])
        ours.propagate = saved[5]


def _current(path: str, migrations: Sequence[tuple[str, object]], checked_below: int = 0) -> bool:
    """Whether the file at ``path`` is a regular SQLite file in WAL mode with every migration of
    ``migrations`` applied and no other -- looked at read-only, so that opening it changes
    nothing: a migration (with its backup and its log line) is the call's to make and say.
    Reading the migrations parses the file's schema, as an open does; a file of at most
    ``checked_below`` bytes must pass ``PRAGMA quick_check`` too, as its open checks every page.

    The look is ``immutable``: a read-only connection makes the log and its index when no other
    holds the file and, not being allowed to checkpoint, leaves them behind when it closes --
    beside a file the call may then find damaged and refuse, where a fresh process leaves nothing.
    It reads the file alone, not its log: a migration still in the log (the keeper checkpoints
    after each call) only means the file is not opened ahead this time."""
    from korg_bridge.recall.history.migrations import applied

    try:
        info = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return False
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro&immutable=1"
    try:
        if not _wal_header(path):  # an immutable look reports no WAL: the file's header says
            return False
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            names = applied(conn)
            if info.st_size <= checked_below and conn.execute("PRAGMA quick_check").fetchone() != ("ok",):
                return False
    except (sqlite3.Error, OSError):
        return False
    return names == [name for name, _ in migrations]


def _wal_header(path: str) -> bool:
    """Whether the SQLite file at ``path`` is in WAL mode, by its header (read and write versions 2)."""
    with open(path, "rb") as handle:
        head = handle.read(20)
    return head[:16] == b"SQLite format 3\x00" and head[18:20] == b"\x02\x02"


def open_ahead(index: str, store: str) -> None:
    """Open ``index`` and ``store`` (a SQLite file; a team store's URL is left alone) as a call
    would, and offer the connections to this process's next open of each; nothing on any doubt."""
    from korg_bridge.recall import opened
    from korg_bridge.recall.history import index as history_index
    from korg_bridge.recall.history.migrations import MIGRATIONS as INDEX_MIGRATIONS
    from korg_bridge.recall.memory.backend.sqlite import store as sqlite_store
    from korg_bridge.recall.memory.backend.sqlite.schema import MIGRATIONS as STORE_MIGRATIONS

    openers: list[tuple[str, Callable[[str], sqlite3.Connection]]] = []
    rechecks: dict[str, Callable[[], bool]] = {
        index: lambda: _current(index, INDEX_MIGRATIONS, history_index.QUICK_CHECK_MAX_BYTES),
        store: lambda: _current(store, STORE_MIGRATIONS, sqlite_store.QUICK_CHECK_MAX_BYTES),
    }
    if _current(index, INDEX_MIGRATIONS):  # the open itself checks a small file's pages now
        openers.append((index, lambda path: history_index.Index(Path(path))._conn))  # the call's own open
    if "://" not in store and _current(store, STORE_MIGRATIONS):
        openers.append((store, lambda path: sqlite_store.SqliteStore(Path(path)).conn))
    made: list[tuple[str, sqlite3.Connection, tuple[int, int]]] = []
    quiet = False
    with _listening() as heard, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for path, connect in openers:
                named = os.stat(path)  # the file the open is about to name (see opened.offer)
                made.append((path, connect(path), (named.st_dev, named.st_ino)))
            quiet = True
        except Exception:  # the call opens, and fails, itself
            quiet = False
    if quiet and not heard.count and not caught:
        try:
            for path, conn, before in made:
                opened.offer(path, conn, rechecks[path], before)
            return
        except OSError:  # gone since: offer none of them
            opened.clear()
    for _path, conn, _before in made:  # never closed: a file may be gone from its path (see opened)
        opened.let_go(conn)
