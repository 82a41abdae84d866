"""The persistent recall index: one SQLite file, refreshed incrementally before each query.

``korg-recall`` runs as a fresh process per query, so re-reading every ledger
each time would cost seconds on a real history. Instead the events live in a
SQLite cache (WAL, FTS5) that each call brings up to date
(:mod:`~korg_bridge.recall.history.ingest.refresh` decides what to read and writes it). This
module owns the file: opening, migrating, recovering, transactions, and the
``show`` and ``stats`` reads.

Concurrency: any number of readers and one writer at a time. Writes take
``BEGIN IMMEDIATE`` with a busy timeout and never hold the lock while
reading a ledger. Readers never wait: WAL.

One index serves everyone on a machine, so a caller walled into its tenant
(:mod:`~korg_bridge.recall.history.walls`) reads it through walls: temporary
views named ``sources``, ``events``, ``skipped_lines`` and ``pending_patches``
shadow the tables on its connection (SQLite resolves an unqualified name in
``temp`` first) and hold only the rows of the files its sources hold now, and
of the deleted ones that were in them. Every read -- search, ``show``,
``stats``, the brief, embeddings -- goes through them without knowing it, so
no query written later can forget the filter; an event indexed for someone
else is, for this caller, not there. A refresh takes the walls down while it
writes (views cannot be written) and puts them back up.

The file is a disposable cache: an index of ours with a schema from a newer
version, or that reports corruption, is moved aside (``<name>.broken-<time>``,
never overwriting an earlier one) with a warning and rebuilt, so a query
never fails because of it. A file that is not ours (``KORG_RECALL_INDEX``
mis-set to a ledger or another program's database) is never touched: opening
it is a :class:`~korg_bridge.errors.ConfigError` (see
:mod:`~korg_bridge.recall.history.ownership`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from korg_bridge._fs.lines import MAX_LINE_BYTES
from korg_bridge.config import ENV_RECALL_INDEX
from korg_bridge.errors import ConfigError, IndexBroken, KorgError, UsageError
from korg_bridge.recall import opened
from korg_bridge.recall.history.ingest.batches import BATCH_BYTES, WORKER_MIN_BYTES
from korg_bridge.recall.history.ingest.refresh import Refresher, RefreshReport
from korg_bridge.recall.history.ingest.rows import load_json
from korg_bridge.recall.history.ingest.sources import Walls, list_file_paths
from korg_bridge.recall.history.migrations import SchemaMismatch, ensure_wal, migrate
from korg_bridge.recall.history.ownership import inspect, move_aside
from korg_bridge.recall.history.stats import index_stats, prune_gone

__all__ = ["Index", "RefreshReport"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


BUSY_TIMEOUT_S = 10.0
"""How long a writer waits for another: far above one batch's commit, below a user's patience."""
QUICK_CHECK_MAX_BYTES = 8 * 1024 * 1024
"""``PRAGMA quick_check`` runs on open only below this size (about 15 ms): it reads every page,
which on a big index would cost more than the query. There, corruption is caught by the error
the first query touching it raises, and handled the same way."""

_TOO_LARGE = re.compile(r"too (large|big|many)|too long", re.IGNORECASE)
"""SQLite's words for a statement beyond its limits (expression depth, variables, string size)."""
PASSED_OVER_KEPT = 20
"""Entries of scanned folders that are no regular file, named in ``stats`` (the first ones)."""
NOTE_EVERY_S = 1.0
"""The refresh time ``stats`` shows is written at most this often (when nothing else changed): the
write was a millisecond of every recall, for a figure shown in seconds."""
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_TABLES = frozenset(
    {"_migrations", "sources", "events", "events_fts", "pending_patches", "meta", "skipped_lines"}
)

_WALLED = {
    "sources": "id",
    "events": "source_id",
    "skipped_lines": "source_id",
    "pending_patches": "source_id",
}
"""The tables a walled caller sees through a view, and the column naming each row's file."""
_WALLED_META = (
    "CREATE TEMP VIEW meta AS SELECT key, value FROM main.meta WHERE key <> 'passed_over' "
    "UNION ALL SELECT 'passed_over', json_group_array(j.value) FROM main.meta m, json_each(m.value) j "
    "WHERE m.key = 'passed_over' AND EXISTS (SELECT 1 FROM temp.walled_roots r "
    "WHERE j.value = r.path OR substr(j.value, 1, length(r.path) + 1) = r.path || '/')"
)
"""``meta`` as a walled caller sees it: of the entries the last refresh passed over, those in its folders."""

_EVENT_COLUMNS = (
    'e.id, s.path, e."offset", e.seq, e.shape, e.session, e.agent, e.tool, e.args, e.result,'
    " e.success, e.timestamp, e.triggered_by, e.extra, e.text"
)


def _is_corrupt(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _CORRUPT_CODES


_REF = re.compile(r"[eE]?([0-9]{1,19})")
"""ASCII digits only (``str.isdigit`` also accepts ``²``), at most as many as an int64 has."""
MAX_EVENT_ID = 2**63 - 1
"""SQLite's largest INTEGER; a bigger id cannot even be looked up."""


def parse_ref(ref: str) -> int:
    """Return the event id in a ref (``e123``; a bare ``123`` is accepted too).

    Raises:
        UsageError: ``ref`` is not of that form, or its number is beyond SQLite's integers.
    """
    match = _REF.fullmatch(ref.strip())
    shown = ref if len(ref) <= 40 else ref[:37] + "..."
    if match is None or int(match.group(1)) > MAX_EVENT_ID:
        raise UsageError(
            f"invalid ref {shown!r}: expected an id such as e123 (e and at most 19 digits), "
            "as printed by a recall search."
        )
    return int(match.group(1))


class Index:
    """The SQLite recall index at ``path``; opening it creates, migrates or rebuilds it as needed.

    Raises (from the constructor):
        ConfigError: the index folder cannot be created, or the file cannot be opened at all.
    """

    batch_bytes: int = BATCH_BYTES
    """Ledger bytes read and written per transaction."""
    worker_min_bytes: int = WORKER_MIN_BYTES
    """Bytes to read from which a refresh parses in a worker process (see :mod:`~korg_bridge.recall.history.ingest.worker`)."""
    max_line_bytes: int = MAX_LINE_BYTES
    """The longest ledger line indexed; longer ones are skipped unread (see :mod:`~korg_bridge._fs.lines`)."""

    def __init__(self, path: Path, walls: Walls | None = None) -> None:
        self.path = Path(path)
        self._last_sources: list[Path] | None = None
        self._identity: tuple[int, int] | None = None
        """``(st_dev, st_ino)`` of the file once proven ours: only that file is ever moved aside."""
        self.walls = walls
        """What a caller walled into its tenant may read (see the module docstring); None: all."""
        self._walls_up = False
        self._visible_fresh = False
        self._conn = self._open()

    # --- opening and recovery ------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        ahead = opened.take(self.path)  # a resident engine's spare opened this very file already
        if ahead is not None:
            self._identity = ahead[1]
            return ahead[0]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the recall index folder {self.path.parent}: {exc.strerror or exc}."
                f" Set {ENV_RECALL_INDEX} to a writable path."
            ) from exc
        found = inspect(self.path)  # a file that is not ours raises here, untouched
        self._identity = found.identity if found.state == "ours" else None
        try:
            return self._connect()
        except IndexBroken as exc:
            if self._identity is None:  # it looked new; prove it ours now, or leave it alone
                again = inspect(self.path)
                self._identity = again.identity if again.state == "ours" else None
            if self._identity is None:
                raise ConfigError(
                    f"the recall index path {self.path} holds a file that is not a korg-recall index "
                    f"(it {exc}); it was left untouched. Set {ENV_RECALL_INDEX} to another path."
                ) from exc
            logger.warning("recall index %s %s; moving it aside and rebuilding it", self.path, exc)
            self._move_aside()
        try:
            return self._connect()
        except IndexBroken as exc:
            raise ConfigError(
                f"cannot create a recall index at {self.path}: it {exc}. Set {ENV_RECALL_INDEX} to another path."
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot open the recall index {self.path}: {exc}. Set {ENV_RECALL_INDEX} to a writable path."
            ) from exc
        try:
            self._prepare_connection(conn)
        except IndexBroken:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_corrupt(exc):
                raise IndexBroken(f"is corrupt ({exc})") from exc
            raise self._translate(exc) from exc
        # Migrated (or found current) by this connection: the file is ours from here on.
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)
        return conn

    def _prepare_connection(self, conn: sqlite3.Connection) -> None:
        # Look before touching: a foreign database must not even get its journal mode changed.
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if names and "_migrations" not in names:
            raise IndexBroken("belongs to another program (it has tables but no _migrations)")
        ensure_wal(conn, BUSY_TIMEOUT_S)
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a crash loses at most the last batch
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA cache_size = -32000")
        try:
            migrate(conn)
        except SchemaMismatch as exc:
            raise IndexBroken(f"has a schema this version does not know ({exc})") from exc
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc):
                raise
            raise IndexBroken(f"has a schema this version cannot read ({exc})") from exc
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = _TABLES - names
        if missing:
            raise IndexBroken(f"lacks tables {', '.join(sorted(missing))}")
        if self.path.stat().st_size <= QUICK_CHECK_MAX_BYTES:
            verdict = conn.execute("PRAGMA quick_check").fetchone()
            if verdict is None or verdict[0] != "ok":
                raise IndexBroken(f"fails its integrity check ({verdict[0] if verdict else 'no answer'})")

    def _move_aside(self) -> None:
        target = move_aside(self.path, self._identity)
        self._identity = None
        logger.warning("recall index %s moved aside to %s", self.path, target)

    def _recover(self, exc: sqlite3.Error) -> None:
        logger.warning("recall index %s is corrupt (%s); moving it aside and rebuilding it", self.path, exc)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._move_aside()
        self._conn = self._open()
        self._walls_up = self._visible_fresh = False  # a new connection has no temporary tables

    # --- walls ---------------------------------------------------------------------------------

    def _wall_in(self) -> None:
        """Put up the walls of a walled caller (see the module docstring) before a read: the
        rows of the files its sources (and this call's) list now, and of files gone from under
        them. The set is computed again only after a refresh; a write just took the views down."""
        walls = self.walls
        if walls is None or self._walls_up:
            return
        conn = self._conn
        if not self._visible_fresh:
            sources = [Path(source) for source in walls.sources] + list(self._last_sources or ())
            listed = set(list_file_paths(sources, walls))
            roots = list(dict.fromkeys(os.path.realpath(source) for source in sources))
            visible = [
                (source_id,)
                for source_id, path in conn.execute("SELECT id, path FROM main.sources")
                if path in listed or _gone_within(path, roots, walls)
            ]
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS visible_sources (id INTEGER PRIMARY KEY)")
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS walled_roots (path TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM temp.visible_sources")
            conn.execute("DELETE FROM temp.walled_roots")
            conn.executemany("INSERT INTO temp.visible_sources (id) VALUES (?)", visible)
            conn.executemany("INSERT INTO temp.walled_roots (path) VALUES (?)", [(root,) for root in roots])
            self._visible_fresh = True
        for table, key in _WALLED.items():
            conn.execute(
                f"CREATE TEMP VIEW {table} AS SELECT * FROM main.{table} "
                f"WHERE {key} IN (SELECT id FROM temp.visible_sources)"
            )
        conn.execute(_WALLED_META)
        self._walls_up = True

    def _wall_down(self, *, stale: bool = False) -> None:
        """Take the views down for a write (views cannot be written); ``stale``: the files
        changed too (a refresh), so the next read computes what is visible anew."""
        if self.walls is None:
            return
        for table in (*_WALLED, "meta"):
            self._conn.execute(f"DROP VIEW IF EXISTS temp.{table}")
        self._walls_up = False
        self._visible_fresh = self._visible_fresh and not stale

    def _translate(self, exc: sqlite3.Error) -> KorgError:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return KorgError(
                f"the recall index {self.path} stayed locked by another process for {BUSY_TIMEOUT_S:g} s."
                " Try again once it finishes indexing."
            )
        if _TOO_LARGE.search(str(exc)) or isinstance(exc, sqlite3.DataError):
            # The request, not the index: a limit the argument checks did not foresee.
            return UsageError(
                f"the request is too large for the recall index ({exc}). Use fewer or shorter query terms, "
                "filters, ledgers or refs."
            )
        return KorgError(f"the recall index {self.path} failed: {exc}. Delete it to rebuild; it is a cache.")

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the connection; if the index turns out corrupt, rebuild, refresh, retry once.

        Raises:
            KorgError: SQLite failed for another reason (e.g. locked past the busy timeout).
        """
        try:
            self._wall_in()
            return work(self._conn)
        except sqlite3.Error as exc:
            if not _is_corrupt(exc):
                raise self._translate(exc) from exc
            self._recover(exc)
        if self._last_sources is not None:
            self.refresh(self._last_sources)
        try:
            self._wall_in()
            return work(self._conn)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    def close(self) -> None:
        """Close the connection (also done by ``with Index(...)``)."""
        self._conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) for data kept beside the events.

        Public for :mod:`korg_bridge.recall.semantic.vectors`, which stores embeddings in
        the same file so they share its lifetime and its rebuilds. Keep it short:
        other writers wait for it.

        Raises:
            KorgError: the index stays locked past the busy timeout, or SQLite fails.
        """
        try:
            self._wall_down()  # writes go to the tables; what a walled caller reads is read before
            with self._write() as conn:
                yield conn
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    # --- refresh -------------------------------------------------------------------------------

    def refresh(
        self, sources: Sequence[Path], progress: Callable[[int, int], None] | None = None
    ) -> RefreshReport:
        """Bring the index up to date with the ledger files at or under ``sources``.

        New lines of grown files are added; a truncated, replaced or
        rewritten file is re-read from the start; a deleted file's events are
        kept, marked gone (:meth:`prune_gone` drops them); files outside
        ``sources`` are left alone (another call may watch them).
        ``progress(done_bytes, total_bytes)`` is called after each batch.

        Raises:
            UsageError: a source is neither a folder nor a regular file.
            KorgError: the index stays locked past the busy timeout, or SQLite fails.
        """
        self._last_sources = list(sources)
        try:
            return self._refresh(sources, progress)
        except sqlite3.Error as exc:
            if not _is_corrupt(exc):
                raise self._translate(exc) from exc
            self._recover(exc)
        try:
            return self._refresh(sources, progress)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    def _refresh(self, sources: Sequence[Path], progress: Callable[[int, int], None] | None) -> RefreshReport:
        refresher = Refresher(
            self._conn,
            self._write,
            batch_bytes=self.batch_bytes,
            worker_min_bytes=self.worker_min_bytes,
            max_line_bytes=self.max_line_bytes,
            walls=self.walls,
        )
        self._wall_down(stale=True)  # the refresh writes these tables, and changes what is visible
        report = refresher.run(sources, progress)
        self._note_refresh(report)
        return report

    def _note_refresh(self, report: RefreshReport) -> None:
        """Record the refresh time (and the entries it passed over) for ``stats``, unless another
        process holds the write lock, or the same was recorded less than :data:`NOTE_EVERY_S` ago.

        Freshness is informative: it must never make a query wait for a writer.
        """
        conn = self._conn
        now, passed_over = time.time(), json.dumps(report.files_passed_over[:PASSED_OVER_KEPT])
        noted = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('last_refresh', 'passed_over')"))
        with contextlib.suppress(KeyError, TypeError, ValueError):  # none yet, or not a number
            if (
                noted.get("passed_over") == passed_over
                and 0 <= now - float(noted["last_refresh"]) < NOTE_EVERY_S
            ):
                return
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('last_refresh', ?), ('passed_over', ?)",
                (repr(now), passed_over),
            )
        except sqlite3.OperationalError:
            pass
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")

    # --- show and stats ------------------------------------------------------------------------

    def get_events(self, refs: Sequence[str], context: int = 0) -> list[dict[str, Any]]:
        """Return the full events named by ``refs``, each with ``context`` neighbours before and after.

        Neighbours come from the same file and session, in file order. Each
        dict carries ``is_match`` (False for a neighbour); an event shown
        twice (overlapping contexts) appears once.

        Raises:
            UsageError: a ref is malformed or names no indexed event.
        """
        ids = [parse_ref(ref) for ref in refs]
        return self.read(lambda conn: self._get_events(conn, ids, max(0, context)))

    def _get_events(self, conn: sqlite3.Connection, ids: list[int], context: int) -> list[dict[str, Any]]:
        select = f"SELECT {_EVENT_COLUMNS}, e.source_id FROM events e JOIN sources s ON s.id = e.source_id"
        out: dict[int, dict[str, Any]] = {}
        missing: list[str] = []
        for event_id in ids:
            row = conn.execute(f"{select} WHERE e.id = ?", (event_id,)).fetchone()
            if row is None:
                missing.append(f"e{event_id}")
                continue
            neighbours: list[tuple[Any, ...]] = []
            if context:
                around = (
                    f'{select} WHERE e.source_id = ? AND e.session IS ? AND (e."offset", e.id) {{}} (?, ?)'
                )
                params = (row[-1], row[5], row[2], row[0], context)
                before = conn.execute(
                    around.format("<") + ' ORDER BY e."offset" DESC, e.id DESC LIMIT ?', params
                ).fetchall()
                after = conn.execute(
                    around.format(">") + ' ORDER BY e."offset", e.id LIMIT ?', params
                ).fetchall()
                neighbours = [*reversed(before), row, *after]
            for item in neighbours or [row]:
                record = out.get(item[0]) or _event_dict(item)
                record["is_match"] = record["is_match"] or item[0] == event_id
                out[item[0]] = record
        if missing:
            raise UsageError(
                f"no event {', '.join(missing)} in the recall index. Use a ref from a recent search."
            )
        return list(out.values())

    def stats(self) -> dict[str, Any]:
        """Describe the index: files, events by shape/agent/tool/project, skipped lines with file,
        line and reason, files gone, size, freshness (see :mod:`~korg_bridge.recall.history.stats`)."""
        return self.read(lambda conn: index_stats(conn, self.path))

    def prune_gone(self) -> dict[str, Any]:
        """Drop the events of every file marked gone; report the files and events removed.

        Raises:
            UsageError: the caller is walled into its tenant.
            KorgError: the index stays locked past the busy timeout, or SQLite fails.
        """
        if self.walls is not None:
            raise UsageError(
                "prune drops events from the recall index every tenant on this server shares, so "
                "only the operator may run it (korg-recall prune --gone, on the server). "
                "Nothing was dropped."
            )
        with self.write() as conn:
            return prune_gone(conn)


def _gone_within(path: str, roots: Sequence[str], walls: Walls) -> bool:
    """Whether an indexed file no longer on disk was one the walls allow: under one of the
    ``roots``, with no symlink on its way that still exists (a row indexed for someone else
    through a link is not made visible by the link's target being deleted)."""
    if not any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots):
        return False
    return not os.path.lexists(path) and os.path.realpath(path) == path and walls.allows(path)


def _event_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    (event_id, path, offset, seq, shape, session, agent, tool, args, result, success, timestamp) = row[:12]
    triggered_by, extra, text = row[12:15]
    return {
        "ref": f"e{event_id}",
        "event_id": event_id,
        "source": path,
        "offset": offset,
        "seq": seq,
        "shape": shape,
        "session": session,
        "agent": agent,
        "tool": tool,
        "args": load_json(args),
        "result": load_json(result),
        "success": None if success is None else bool(success),
        "timestamp": timestamp,
        "triggered_by": triggered_by,
        "extra": load_json(extra) or {},
        "text": text,
        "is_match": False,
    }
