"""The memory store's SQLite file: where it lives, opening it safely, transactions.

Unlike the recall index (a cache that is moved aside and rebuilt when broken),
this file is user data that nothing can rebuild. So:

* it lives under ``$XDG_DATA_HOME`` (not the cache folder), in a folder of its own
  made private to the user;
* a path that is a directory, a FIFO or a device, a file that is not SQLite, a
  database of another program, a schema of a newer version, or corruption is a
  :class:`~korg_bridge.errors.ConfigError` naming the file and its newest
  backup -- and the file is left exactly as it was (checks happen before any
  pragma that could write);
* before migrating an existing store, a copy is taken with SQLite's backup API;
* every write is one ``BEGIN IMMEDIATE`` transaction; WAL; ``synchronous = FULL``
  (an acknowledged write survives power loss); ``secure_delete = ON`` (a purged
  body is overwritten, not just unlinked from the b-tree).

:class:`SqliteStore` and :class:`SqliteTx` implement the store interface of
:mod:`.backend` (the team store's are in :mod:`.pg.store`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from korg_bridge._fs.durable import reserve
from korg_bridge.config import ENV_RECALL_STORE
from korg_bridge.errors import ConfigError, KorgError
from korg_bridge.recall import opened
from korg_bridge.recall.history.migrations import SchemaMismatch, applied, ensure_wal, migrate
from korg_bridge.recall.memory.backend.sqlite.schema import MIGRATIONS, TABLES

__all__ = [
    "BUSY_TIMEOUT_S",
    "SqliteStore",
    "SqliteTx",
    "Store",
    "newest_backup",
]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
CHECKPOINT_RETRY_S = 0.005
"""Between tries of a checkpoint another one held back."""
"""How long a write waits for another process's: far above one memory write, below patience."""
INTEGRITY_LINES = 20
"""Problems ``integrity_check`` reports at most (it can list thousands on a wrecked file)."""
STAGE_CACHE_KIB = 64 * 1024
"""SQLite's page cache for an import's transaction (the default is 2 MiB): 50,000 memories touch
tens of MiB of index pages, and re-reading them doubled the time it held the write lock."""
QUICK_CHECK_MAX_BYTES = 8 * 1024 * 1024
"""``PRAGMA quick_check`` on open below this size (a few ms): corruption is reported before
anything is written. Above it, the first statement touching a bad page reports it instead."""
MMAP_BYTES = 1 << 28
"""How much of the store SQLite maps (it clamps this to its compile-time limit)."""

_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


def newest_backup(path: Path) -> Path | None:
    """The newest ``<store>.bak-<UTC>`` beside ``path``, or None."""
    try:
        names = [n for n in os.listdir(path.parent) if n.startswith(path.name + ".bak-")]
    except OSError:
        return None
    names = [n for n in names if not n.endswith(".partial")]
    return path.parent / max(names) if names else None


def _holds_memories(conn: sqlite3.Connection, tables: set[str]) -> bool:
    """Whether there is anything to back up: a store whose first run was cut short holds no memory."""
    return "memory" in tables and conn.execute("SELECT 1 FROM memory LIMIT 1").fetchone() is not None


def _is_corrupt(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _CORRUPT_CODES


class SqliteTx:
    """One transaction on a SQLite store (:class:`~.backend.Tx`)."""

    has_mirror = True

    def __init__(self, conn: sqlite3.Connection, path: Path | None = None, *, snapshot: bool = False) -> None:
        from korg_bridge.recall.memory.backend.sqlite.fulltext import SQLITE_TEXT
        from korg_bridge.recall.memory.backend.sqlite.vectors import SQLITE_VECTORS

        self.conn = conn
        self.path = path
        """The store's file: a resident engine keeps this store's vectors by it (:mod:`.resident`)."""
        self.fts_members: dict[str, frozenset[int]] | None = {} if snapshot else None
        """In a read-only transaction (one snapshot), the rows each FTS5 expression matched, read
        once: a search asks for the same word's rows to score, to group and to order its hits."""
        self.listed: dict[tuple[str, tuple[object, ...], str, int], Any] | None = {} if snapshot else None
        """In a read-only transaction, the rows a search by meaning lists (:mod:`.vectors`), read
        once: a recall's coverage of its scopes comes from the same listing as its search."""
        self.scored: dict[tuple[str, int, bytes], tuple[Any, Any]] | None = {} if snapshot else None
        """In a read-only transaction, the cosines a search by meaning computed -- of every row it
        listed, not only the closest it returned -- by model, dimension and query: the rows it then
        ranks by keywords take theirs from here instead of reading their vectors again."""
        self.text = SQLITE_TEXT
        self.vectors = SQLITE_VECTORS

    def execute(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, tuple(params))

    def executemany(self, sql: str, seq: Iterable[Sequence[object]]) -> None:
        self.conn.executemany(sql, seq)

    def log_op(self, op_id: str, entry: Mapping[str, Any]) -> None:
        # Queued with the operation, appended to memory-ops.jsonl after commit (oplog.flush).
        self.conn.execute(
            "INSERT INTO oplog_pending (op_id, entry) VALUES (?, ?)",
            (op_id, json.dumps(entry, ensure_ascii=False, sort_keys=True)),
        )

    def mark_dirty(self, memory_id: str) -> None:
        self.conn.execute("INSERT INTO mirror_dirty (id) VALUES (?) ON CONFLICT DO NOTHING", (memory_id,))

    def mark_dirty_many(self, memory_ids: Sequence[str]) -> None:
        self.conn.executemany(
            "INSERT INTO mirror_dirty (id) VALUES (?) ON CONFLICT DO NOTHING", [(mid,) for mid in memory_ids]
        )

    def take_turn(self) -> None:
        """Nothing to wait for: ``BEGIN IMMEDIATE`` took the file's write lock already."""

    def secret(self, name: str) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (f"{name}_secret",)).fetchone()
        return "" if row is None else str(row[0])

    def tag_condition(self) -> str:
        return "EXISTS (SELECT 1 FROM json_each(memory.tags) WHERE json_each.value = ?)"

    def source_field(self, name: str) -> str:
        # NULL for a value an older korg-recall stored that is not strict JSON (an imported NaN):
        # json_extract would fail the whole statement, and with it every listing of the store.
        return f"CASE WHEN json_valid(source) THEN json_extract(source, '$.{name}') END"


class SqliteStore:
    """The memory store at ``path``, open; created (and migrated) if it does not exist.

    Raises (from the constructor):
        ConfigError: see the module docstring.
    """

    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.folder = self.path.parent
        self.label = str(self.path)
        self.conn = self._open()

    # --- opening -----------------------------------------------------------------------------

    def unusable(self, why: str) -> ConfigError:
        """The error for a store that cannot be used as it is: names the file, the backup, the fix."""
        backup = newest_backup(self.path)
        where = f"the newest backup is {backup}" if backup else "no backup of it exists"
        return ConfigError(
            f"the memory store {self.path} {why}; it was left untouched ({where}). Repair or restore it "
            f"by hand, or set {ENV_RECALL_STORE} to another file."
        )

    def _open(self) -> sqlite3.Connection:
        ahead = opened.take(self.path)  # a resident engine's spare opened this very file already
        if ahead is not None:
            return ahead[0]
        self._check_path()
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot open the memory store {self.path}: {exc}. Check its permissions."
            ) from exc
        try:
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_path(self) -> None:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._make_folder()
            return
        except OSError as exc:
            raise ConfigError(
                f"cannot read the memory store {self.path}: {exc.strerror or exc}. Check its permissions."
            ) from exc
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(
                f"the memory store {self.path} is a directory. Set {ENV_RECALL_STORE} to the path of a file."
            )
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"the memory store {self.path} is not a regular file (a FIFO, socket or device). "
                f"Set {ENV_RECALL_STORE} to the path of a file."
            )
        if info.st_size == 0:
            return
        # The header is read through SQLite, never with open()/close(): closing any descriptor of
        # the file drops every POSIX lock this process holds on it, so a connection kept open in
        # this process (korg-recall serve) would lose its shared lock, and another process's last
        # connection would then checkpoint and delete the WAL under it ("malformed"). SQLite's
        # own descriptors of a file already open in the process are closed only when that is safe.
        try:
            probe = sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot read the memory store {self.path}: {exc}. Check its permissions."
            ) from exc
        try:
            probe.execute("PRAGMA schema_version").fetchone()
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise self.unusable("is not a SQLite database") from None
            # Anything else (busy, corrupt, no -shm on a read-only folder) is for opening to judge.
        finally:
            probe.close()

    def _make_folder(self) -> None:
        try:
            # Private: memories are about a person and their work.
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the memory store folder {self.folder}: {exc.strerror or exc}. "
                f"Set {ENV_RECALL_STORE} to a writable path."
            ) from exc

    def _prepare(self, conn: sqlite3.Connection) -> None:
        # Look before touching: nothing below may write to a file that turns out not to be ours.
        try:
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if names and "_migrations" not in names:
                raise self.unusable("belongs to another program (it has tables but no _migrations)")
            seen = applied(conn)
            known = [name for name, _ in MIGRATIONS]
            unknown = [name for name in seen if name not in known]
            if unknown:
                raise self.unusable(
                    f"was written by a newer korg-recall (unknown migrations {', '.join(unknown)}); "
                    "upgrade korg-recall"
                )
            if names and self.path.stat().st_size <= QUICK_CHECK_MAX_BYTES:
                verdict = conn.execute("PRAGMA quick_check").fetchone()
                if verdict is None or verdict[0] != "ok":
                    raise self.unusable(f"is corrupt ({verdict[0] if verdict else 'no answer'})")
            ensure_wal(conn, BUSY_TIMEOUT_S)
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA temp_store = MEMORY")
            # Reads through a map of the file, not a read() per page into a cache every new
            # connection starts empty: a brief's four queries over a few thousand rows, 14 -> 10 ms.
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
            # A store with no memory yet is one whose creation was interrupted (killed between two
            # of its first migrations): nothing to protect, and a backup would only litter the folder.
            if seen and len(seen) < len(known) and _holds_memories(conn, names):
                self._backup(conn, "before-migration")
            migrate(conn, MIGRATIONS)
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except SchemaMismatch as exc:  # pragma: no cover - checked above; a race with a newer writer
            raise self.unusable(f"was written by a newer korg-recall ({exc}); upgrade korg-recall") from exc
        except sqlite3.DatabaseError as exc:
            raise self.translate(exc) from exc
        missing = TABLES - names
        if missing:
            raise self.unusable(f"lacks tables {', '.join(sorted(missing))}")

    def _backup(self, conn: sqlite3.Connection, why: str) -> Path:
        """Copy the store to ``<store>.bak-<UTC>`` (reserved first, written as ``.partial``, then
        renamed over the reservation), never replacing an earlier backup."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        wanted = self.path.with_name(f"{self.path.name}.bak-{stamp}")
        target: Path | None = None
        try:
            target = reserve(wanted)
            partial = target.with_name(target.name + ".partial")
            dest = sqlite3.connect(partial)
            try:
                conn.backup(dest)
            finally:
                dest.close()
            os.replace(partial, target)
        except (OSError, sqlite3.Error) as exc:
            if target is not None:  # ours, and empty or partial: nothing of the user's is in them
                for leftover in (target, target.with_name(target.name + ".partial")):
                    with contextlib.suppress(OSError):
                        os.unlink(leftover)
            raise ConfigError(
                f"cannot back up the memory store {self.path} to {target or wanted} ({why}): {exc}. "
                "Check free space and permissions; the store was not changed."
            ) from exc
        logger.info("memory store %s: backup %s taken (%s)", self.path, target, why)
        return target

    def translate(self, exc: sqlite3.Error) -> KorgError:
        """The user-facing error for a SQLite failure on this store."""
        if _is_corrupt(exc):
            return self.unusable(f"is corrupt ({exc})")
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return KorgError(
                f"the memory store {self.path} stayed locked by another process for {BUSY_TIMEOUT_S:g} s. "
                "Try again in a moment."
            )
        if isinstance(exc, sqlite3.OperationalError) and ("disk" in str(exc) or "readonly" in str(exc)):
            return ConfigError(
                f"cannot write the memory store {self.path}: {exc}. Check free space and permissions."
            )
        return KorgError(f"the memory store {self.path} failed: {exc}.")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- transactions --------------------------------------------------------------------------

    @contextlib.contextmanager
    def write(self, *, stage: bool = False, durable: bool = True) -> Iterator[SqliteTx]:
        """One ``BEGIN IMMEDIATE`` transaction: all of it commits, or none of it.

        With ``stage`` (an import's thousands of rows) the page cache is raised to
        :data:`STAGE_CACHE_KIB` for the transaction, so its index pages are not read again and again
        while it holds the lock; otherwise it changes nothing: a SQLite file has one writer at a time,
        so a transaction that writes holds the lock from its first write (see
        :meth:`.backend.Store.write`).

        Not ``durable`` (a recall's use counts): its commit does not sync the log (``synchronous =
        NORMAL`` for it alone; in WAL mode a crash may lose it, never tear it, and the next
        durable commit syncs it with its own).

        Raises:
            KorgError: the store stays locked past the busy timeout, or SQLite fails
                (ConfigError when it is corrupt or cannot be written).
        """
        conn = self.conn
        cache: int | None = None
        try:
            if stage:
                cache = int(conn.execute("PRAGMA cache_size").fetchone()[0])
                conn.execute(f"PRAGMA cache_size = -{STAGE_CACHE_KIB}")
            if not durable:
                conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._restore(cache, durable)
            raise self.translate(exc) from exc
        try:
            try:
                yield SqliteTx(conn, self.path)
            except BaseException as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self.translate(exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise self.translate(exc) from exc
        finally:
            self._restore(cache, durable)

    def _restore(self, cache: int | None, durable: bool) -> None:
        if cache is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute(f"PRAGMA cache_size = {cache}")
        if not durable:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("PRAGMA synchronous = FULL")

    @contextlib.contextmanager
    def reading(self) -> Iterator[SqliteTx]:
        """Run reads on the connection, translating SQLite errors (a consistent snapshot).

        Raises:
            KorgError: as for :meth:`write`.
        """
        conn = self.conn
        try:
            conn.execute("BEGIN")
            yield SqliteTx(conn, self.path, snapshot=True)
        except sqlite3.Error as exc:
            raise self.translate(exc) from exc
        finally:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("COMMIT")

    def after_purge(self) -> dict[str, Any]:
        """Erase what ``secure_delete`` leaves: it zeroes a deleted cell, but when a page is
        rebalanced the bytes of cells that moved can stay in its unused space (a soak found a
        purged mirror path there). ``VACUUM`` rewrites every page from the live rows (its temp
        copy in memory: ``temp_store``), and the WAL is then checkpointed into the file and
        emptied. A few ms for a store of a few MB; rowids are kept (every table that is
        referred to by rowid has an ``INTEGER PRIMARY KEY``)."""
        vacuumed = True
        try:
            self.conn.execute("VACUUM")
        except sqlite3.Error as exc:
            logger.info("memory store %s: VACUUM after purge not run: %s", self.path, exc)
            vacuumed = False
        return {"vacuumed": vacuumed, "wal_checkpointed": self.checkpoint()}

    def flush_log(self, env: Mapping[str, str]) -> str | None:
        from korg_bridge.recall.memory.backend.sqlite.oplogfile import flush

        return flush(self, env)

    def describe(self) -> dict[str, Any]:
        """What ``stats`` says about the file: size, schema, ``integrity_check``, the log, backups.

        Raises:
            KorgError: SQLite fails (ConfigError when the file is corrupt).
        """
        from korg_bridge.recall.paths import OPLOG_NAME

        try:
            integrity = [
                row[0] for row in self.conn.execute("PRAGMA integrity_check").fetchmany(INTEGRITY_LINES)
            ]
            queued = int(self.conn.execute("SELECT count(*) FROM oplog_pending").fetchone()[0])
        except sqlite3.Error as exc:
            raise self.translate(exc) from exc
        size = sum(
            os.path.getsize(f"{self.path}{s}") for s in ("", "-wal") if os.path.exists(f"{self.path}{s}")
        )
        backup = newest_backup(self.path)
        return {
            "size_bytes": size,
            "schema": [name for name, _ in MIGRATIONS],
            "integrity_check": "ok" if integrity == ["ok"] else integrity,
            "oplog_queued": queued,
            "oplog": str(self.folder / OPLOG_NAME),
            "newest_backup": str(backup) if backup else None,
        }

    def checkpoint(self) -> bool:
        """``wal_checkpoint(TRUNCATE)``: copy the WAL into the file and empty it; True if it did.

        A checkpoint another connection is running (a resident engine's keeper checkpoints after
        each call) makes SQLite answer busy at once rather than wait: tried again for up to
        :data:`BUSY_TIMEOUT_S`. A reader in another process can hold it back longer; the next
        checkpoint then finishes the job.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                busy, _log, _done = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error:
                return False
            if not busy or time.monotonic() >= deadline:
                return not busy
            time.sleep(CHECKPOINT_RETRY_S)


Store = SqliteStore
"""The SQLite store under its first name (callers that open a file by path use it)."""
