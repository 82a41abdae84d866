"""Whether the file at the index path is ours, and moving ours aside without overwriting anything.

The index path comes from ``KORG_RECALL_INDEX``, which a user can mis-set to
any file: a ledger, a notes file, another program's database. The index is a
disposable cache, so a broken index of ours is moved aside and rebuilt; but
nothing else may ever be renamed, replaced or written. So before SQLite
opens the file for writing, :func:`inspect` decides, without changing or
creating anything (a read of the header, then an ``immutable`` read-only
connection, which takes no lock and makes no ``-wal``/``-shm`` files):

* absent, empty, or a SQLite database with no tables: a new index;
* a SQLite database whose ``application_id`` is :data:`APPLICATION_ID`
  (stamped by the ``m006_application_id`` migration), or, for indexes written
  before that, whose ``_migrations`` table starts with our first migration:
  ours;
* anything else (not SQLite, another program's database, a directory or a
  device): a :class:`~korg_bridge.errors.ConfigError`, the file untouched.

:func:`move_aside` renames only a file proven ours, to a name that cannot
already exist (``index.sqlite.broken-<UTC time>[-n]``, reserved with
``O_EXCL``), so no earlier backup is ever overwritten.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from korg_bridge._fs.durable import reserve
from korg_bridge.config import ENV_RECALL_INDEX
from korg_bridge.errors import ConfigError
from korg_bridge.recall.history.migrations import APPLICATION_ID, MIGRATIONS

__all__ = ["APPLICATION_ID", "Ownership", "inspect", "move_aside"]


_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100
_APPLICATION_ID_OFFSET = 68
_SIDECARS = ("-wal", "-shm", "-journal")
"""SQLite's own files beside a database: they belong to it and move with it."""


@dataclass(frozen=True, slots=True)
class Ownership:
    """What :func:`inspect` found: ``state`` is ``absent``, ``new`` or ``ours``."""

    state: str
    identity: tuple[int, int] | None
    """``(st_dev, st_ino)`` of the file inspected, to recognise it again when moving it."""


def _refuse(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"the recall index path {path} holds a file that is not a korg-recall index ({why}); it was "
        f"left untouched. Set {ENV_RECALL_INDEX} to another path."
    )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _header(path: Path) -> bytes:
    """The first 100 bytes, read through SQLite's own file layer (the path was just seen to be a
    regular file; a file too short or not SQLite gives what SQLite could read of it, or nothing).

    Not ``os.open``/``os.close``: closing any descriptor of a file drops every POSIX lock this
    process holds on it, so an index connection kept open in this process (korg-recall serve holds
    one per tenant) would lose its shared lock, and another process's last connection would then
    delete the WAL under it. SQLite closes its own descriptors only when that is safe.

    Raises:
        ConfigError: the file cannot be read.
    """
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise ConfigError(
            f"cannot read the recall index {path}: {exc}. Set {ENV_RECALL_INDEX} to a readable path."
        ) from exc
    try:
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            return b""  # not SQLite: no magic
        return _raw_header(path)  # damaged: its bytes say whose it is (an index of ours is rebuilt)
    finally:
        conn.close()
    header = bytearray(_SQLITE_MAGIC.ljust(_HEADER_BYTES, b"\0"))
    header[_APPLICATION_ID_OFFSET : _APPLICATION_ID_OFFSET + 4] = app_id.to_bytes(4, "big", signed=True)
    return bytes(header)


def _raw_header(path: Path) -> bytes:
    """The first 100 bytes read directly: only for a file SQLite cannot read, which no connection
    of this process can be using.

    Raises:
        ConfigError: the file cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            return os.read(fd, _HEADER_BYTES)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the recall index {path}: {exc.strerror or exc}. Set {ENV_RECALL_INDEX} to a readable path."
        ) from exc


def _first_migration(conn: sqlite3.Connection) -> str | None:
    """The first step recorded in a ``_migrations`` table, or None when the table is not like ours."""
    try:
        row = conn.execute("SELECT name FROM _migrations ORDER BY rowid LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # another framework's table of the same name
        return None
    return row[0] if row is not None and isinstance(row[0], str) else None


def _legacy_or_new(path: Path) -> str:
    """``ours``, ``new`` (no tables) or the reason the database is not ours, from an immutable look.

    Raises:
        ConfigError: the database cannot be read well enough to tell.
    """
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise _refuse(path, f"SQLite cannot open it: {exc}") from exc
    try:
        if conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
            return "ours"
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return "new"
        if "_migrations" in tables and _first_migration(conn) == MIGRATIONS[0][0]:
            return "ours"
        return f"a SQLite database of another program, with tables {', '.join(sorted(tables)[:5])}"
    except sqlite3.Error as exc:
        raise _refuse(path, f"a SQLite database that cannot be read to tell whose it is: {exc}") from exc
    finally:
        conn.close()


def inspect(path: Path) -> Ownership:
    """Decide whether ``path`` may be used as the index, changing and creating nothing.

    Raises:
        ConfigError: the file is not ours (not SQLite, another program's
            database, a directory or device), or cannot be read; it is left untouched.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Ownership("absent", None)
    except OSError as exc:
        raise ConfigError(
            f"cannot read the recall index {path}: {exc.strerror or exc}. Set {ENV_RECALL_INDEX} to a readable path."
        ) from exc
    identity = (st.st_dev, st.st_ino)
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, _kind(st.st_mode))
    if st.st_size == 0:
        # SQLite's own new database, before its first write (another process may be creating it).
        return Ownership("new", identity)
    head = _header(path)
    if not head.startswith(_SQLITE_MAGIC):
        raise _refuse(path, "it is not a SQLite database")
    if len(head) == _HEADER_BYTES:
        app_id = int.from_bytes(head[_APPLICATION_ID_OFFSET : _APPLICATION_ID_OFFSET + 4], "big", signed=True)
        if app_id == APPLICATION_ID:
            return Ownership("ours", identity)
        if app_id != 0:
            raise _refuse(path, f"a SQLite database of another program, application id {app_id:#x}")
    verdict = _legacy_or_new(path)
    if verdict in ("ours", "new"):
        return Ownership(verdict, identity)
    raise _refuse(path, verdict)


def move_aside(path: Path, identity: tuple[int, int] | None) -> Path:
    """Rename the index at ``path`` (and its ``-wal``/``-shm``) to a new ``.broken-<time>`` name.

    ``identity`` is the ``(st_dev, st_ino)`` recorded when the file was proven
    ours; a file that is no longer that one is not touched.

    Raises:
        ConfigError: the file is not the one proven ours, or cannot be moved.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is not None and (identity is None or (st.st_dev, st.st_ino) != identity):
        raise _refuse(path, "it changed since it was checked")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        target = reserve(f"{path}.broken-{stamp}", sidecars=_SIDECARS)
    except OSError as exc:
        raise ConfigError(
            f"cannot move the broken recall index {path} aside: {exc.strerror or exc}. Set {ENV_RECALL_INDEX} "
            "to another path."
        ) from exc
    for suffix in ("", *_SIDECARS):
        source, destination = f"{path}{suffix}", f"{target}{suffix}"
        try:
            os.replace(source, destination)  # onto our own empty placeholder, never a user's file
        except FileNotFoundError:
            os.unlink(destination)
        except OSError as exc:
            raise ConfigError(
                f"cannot move the broken recall index {source} aside: {exc.strerror or exc}. "
                f"Set {ENV_RECALL_INDEX} to another path."
            ) from exc
    return Path(target)
