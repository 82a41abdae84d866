"""The persistent recall index: one SQLite file, refreshed incrementally before each query.

``korg-recall`` runs as a fresh process per query, so re-reading every ledger
each time would cost seconds on a real history. Instead the events live in a
SQLite cache (WAL, FTS5) that each call brings up to date: per file it keeps
the byte offset, line count and identity (inode, device, size, mtime), so an
unchanged file costs one ``stat`` and an appended one only its new lines.

Concurrency: any number of readers and one writer at a time. Writes take
``BEGIN IMMEDIATE`` with a busy timeout, and never hold the lock while reading
a ledger: a batch is parsed first, then written only if the file's stored
state is still the one it was read from (another process may have indexed it
meanwhile). Readers never wait: WAL.

The file is a disposable cache. One that is not SQLite, belongs to another
program, has a schema from a newer version, or reports corruption, is moved
aside (``<name>.broken``) with a warning and rebuilt; a query never fails
because of it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from korg_bridge.errors import ConfigError, KorgError, UsageError
from korg_bridge.recall.event import Event
from korg_bridge.recall.migrations import MIGRATIONS, SchemaMismatch, migrate
from korg_bridge.recall.shapes import ResultPatch
from korg_bridge.recall.sources import FileState, ReadResult, list_file_paths, read_from, stat_file
from korg_bridge.recall.text import flatten
from korg_bridge.recall.timeparse import iso_to_epoch

__all__ = ["ENV_INDEX", "Index", "RefreshReport", "default_index_path"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

ENV_INDEX = "KORG_RECALL_INDEX"

BUSY_TIMEOUT_S = 10.0
"""How long a writer waits for another: far above one batch's commit, below a user's patience."""
BATCH_BYTES = 2 * 1024 * 1024
"""Ledger bytes per write transaction: bounds memory and how long other writers wait."""
MAX_STORED_JSON = 256 * 1024
"""A tool result larger than this (a huge file read) is stored truncated: the index stays a cache."""
QUICK_CHECK_MAX_BYTES = 8 * 1024 * 1024
"""``PRAGMA quick_check`` runs on open only below this size (about 15 ms): it reads every page,
which on a big index would cost more than the query. There, corruption is caught by the error
the first query touching it raises, and handled the same way."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_TABLES = frozenset({"_migrations", "sources", "events", "events_fts", "pending_patches", "meta"})

_INSERT_EVENT = (
    'INSERT INTO events (source_id, "offset", seq, shape, session, agent, tool, args, result, success,'
    " timestamp, ts, triggered_by, extra, tool_use_id, text)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SOURCE_STATE = 'SELECT id, inode, dev, "offset", line_no FROM sources WHERE path = ?'
_EVENT_COLUMNS = (
    'e.id, s.path, e."offset", e.seq, e.shape, e.session, e.agent, e.tool, e.args, e.result,'
    " e.success, e.timestamp, e.triggered_by, e.extra, e.text"
)


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def default_index_path(env: Mapping[str, str]) -> Path:
    """Return ``$KORG_RECALL_INDEX``, else ``$XDG_CACHE_HOME/korg-recall/index.sqlite`` (``~/.cache``)."""
    explicit = env.get(ENV_INDEX, "").strip()
    if explicit:
        if explicit == "~" or explicit.startswith("~/"):
            return _home(env) / explicit[2:]
        return Path(os.path.abspath(explicit))
    cache = env.get("XDG_CACHE_HOME", "").strip()
    # The XDG spec says to ignore a relative value.
    base = Path(cache) if cache and os.path.isabs(cache) else _home(env) / ".cache"
    return base / "korg-recall" / "index.sqlite"


@dataclass
class RefreshReport:
    """What one :meth:`Index.refresh` did."""

    files_scanned: int = 0
    files_changed: int = 0
    events_added: int = 0
    events_removed: int = 0
    skipped_lines: int = 0
    """Malformed lines read in this refresh."""
    ignored_lines: int = 0
    """Valid lines that hold no event (Claude Code system lines and the like)."""
    duration_s: float = 0.0


class _Broken(Exception):
    """The index file cannot be used as it is and must be rebuilt; the message says why."""


def _is_corrupt(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _CORRUPT_CODES


def _is_under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
"""One encoder for every row: ``json.dumps`` with options builds a new one per call."""


def _dump(value: Any) -> str | None:
    if value is None:
        return None
    if not value and isinstance(value, dict):
        return "{}"
    text = _encode(value)
    if len(text) > MAX_STORED_JSON:
        text = _encode({"truncated": True, "chars": len(text), "preview": text[:MAX_STORED_JSON]})
    return text


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _success(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _patched(event: Event, patch: ResultPatch) -> Event:
    extra = dict(event.extra)
    if patch.timestamp:
        extra["result_timestamp"] = patch.timestamp
    # A direct constructor call: dataclasses.replace re-inspects the fields
    # on every call, which a cold build of a transcript history pays per tool.
    return Event(
        source=event.source,
        offset=event.offset,
        seq=event.seq,
        shape=event.shape,
        session=event.session,
        agent=event.agent,
        tool=event.tool,
        args=event.args,
        result=patch.result,
        success=patch.success,
        timestamp=event.timestamp,
        triggered_by=event.triggered_by,
        extra=extra,
    )


def _event_row(event: Event) -> tuple[Any, ...]:
    """Every column of ``events`` but ``id`` and ``source_id``, in :data:`_INSERT_EVENT` order."""
    tool_use_id = event.extra.get("tool_use_id")
    return (
        event.offset,
        event.seq,
        event.shape,
        event.session,
        event.agent,
        event.tool,
        _dump(event.args),
        _dump(event.result),
        _success(event.success),
        event.timestamp,
        iso_to_epoch(event.timestamp),
        event.triggered_by,
        _dump(event.extra) if event.extra else None,
        tool_use_id if isinstance(tool_use_id, str) else None,
        flatten(event),
    )


_SourceRow = tuple[Any, ...]
"""A file's stored state as :data:`_SOURCE_STATE` selects it: id, inode, dev, offset, line_no."""

STALE_RETRIES = 3
"""Times a file another process was indexing at the same moment is re-read from its new state."""


def _plan(row: _SourceRow | None, state: FileState) -> tuple[int, int, bool, int]:
    """Where to read a file from: ``(offset, line_no, reset, bytes_to_read)``.

    Resume at the stored offset, unless the file was replaced (inode or
    device changed) or truncated (smaller than the offset): then start over.
    """
    if row is None:
        return 0, 0, False, state.size
    if row[1] != state.inode or row[2] != state.dev or state.size < row[3]:
        return 0, 0, True, state.size
    return row[3], row[4], False, state.size - row[3]


@dataclass
class _Batch:
    """One slice of one file, parsed and turned into rows, ready to write."""

    path: str
    state: FileState
    row: _SourceRow | None
    """The stored state the file's reading was planned from."""
    start: int
    reset: bool
    result: ReadResult
    events: list[Event]
    rows: list[tuple[Any, ...]]
    final: bool = True
    """The file's last slice: only then is its stat stored, so an interrupted file is resumed."""
    error: ConfigError | None = None


def _join_patches_in_batch(result: ReadResult) -> list[Event]:
    """Apply patches whose ``tool_use`` is in the same batch; leave the others in ``result.patches``."""
    if not result.patches:
        return result.events
    events = list(result.events)
    by_id = {
        event.extra["tool_use_id"]: position
        for position, event in enumerate(events)
        if isinstance(event.extra.get("tool_use_id"), str)
    }
    leftover: list[ResultPatch] = []
    for patch in result.patches:
        position = by_id.get(patch.tool_use_id)
        if position is None:
            leftover.append(patch)
        else:
            events[position] = _patched(events[position], patch)
    result.patches = leftover
    return events


def _batches(work: Sequence[tuple[str, FileState, _SourceRow | None]]) -> Iterator[_Batch]:
    """Read and prepare every file of ``work`` in slices of :data:`BATCH_BYTES` (no database access)."""
    for path, state, row in work:
        start, line_no, reset, _size = _plan(row, state)
        while True:
            try:
                result = read_from(Path(path), start, line_no, max_bytes=BATCH_BYTES)
            except ConfigError as exc:
                yield _Batch(path, state, row, start, reset, ReadResult(), [], [], error=exc)
                break
            events = _join_patches_in_batch(result)
            rows = [_event_row(event) for event in events]
            final = result.end_offset == start or result.end_offset >= state.size
            yield _Batch(path, state, row, start, reset, result, events, rows, final)
            if final:
                break
            start, line_no, reset = result.end_offset, result.end_line, False


class _Meter:
    """Reports bytes indexed so far to an optional ``progress(done, total)`` callback."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int) -> None:
        self.progress = progress
        self.total = total
        self.done = 0

    def advance(self, count: int) -> None:
        self.done += count
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total)


def parse_ref(ref: str) -> int:
    """Return the event id in a ref (``e123``; a bare ``123`` is accepted too).

    Raises:
        UsageError: ``ref`` is not of that form.
    """
    body = ref.strip()
    body = body[1:] if body[:1] in ("e", "E") else body
    if not body.isdigit():
        raise UsageError(f"invalid ref {ref!r}: expected an id such as e123, as printed by a recall search.")
    return int(body)


class Index:
    """The SQLite recall index at ``path``; opening it creates, migrates or rebuilds it as needed.

    Raises (from the constructor):
        ConfigError: the index folder cannot be created, or the file cannot be opened at all.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._last_sources: list[Path] | None = None
        self._conn = self._open()

    # --- opening and recovery ------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot create the recall index folder {self.path.parent}: {exc.strerror or exc}."
                f" Set {ENV_INDEX} to a writable path."
            ) from exc
        try:
            return self._connect()
        except _Broken as exc:
            logger.warning("recall index %s %s; moving it aside and rebuilding it", self.path, exc)
            self._move_aside()
        try:
            return self._connect()
        except _Broken as exc:
            raise ConfigError(
                f"cannot create a recall index at {self.path}: it {exc}. Set {ENV_INDEX} to another path."
            ) from exc

    def _connect(self) -> sqlite3.Connection:
        self._check_header()
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot open the recall index {self.path}: {exc}. Set {ENV_INDEX} to a writable path."
            ) from exc
        try:
            self._prepare_connection(conn)
        except _Broken:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_corrupt(exc):
                raise _Broken(f"is corrupt ({exc})") from exc
            raise self._translate(exc) from exc
        return conn

    def _check_header(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                head = handle.read(len(_SQLITE_MAGIC))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ConfigError(
                f"cannot read the recall index {self.path}: {exc.strerror or exc}."
                f" Set {ENV_INDEX} to a readable path."
            ) from exc
        if head and head != _SQLITE_MAGIC:
            raise _Broken("is not a SQLite database")

    def _prepare_connection(self, conn: sqlite3.Connection) -> None:
        # Look before touching: a foreign database must not even get its journal mode changed.
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if names and "_migrations" not in names:
            raise _Broken("belongs to another program (it has tables but no _migrations)")
        self._ensure_wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a crash loses at most the last batch
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA cache_size = -32000")
        try:
            migrate(conn)
        except SchemaMismatch as exc:
            raise _Broken(f"has a schema this version does not know ({exc})") from exc
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc):
                raise
            raise _Broken(f"has a schema this version cannot read ({exc})") from exc
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = _TABLES - names
        if missing:
            raise _Broken(f"lacks tables {', '.join(sorted(missing))}")
        if self.path.stat().st_size <= QUICK_CHECK_MAX_BYTES:
            verdict = conn.execute("PRAGMA quick_check").fetchone()
            if verdict is None or verdict[0] != "ok":
                raise _Broken(f"fails its integrity check ({verdict[0] if verdict else 'no answer'})")

    @staticmethod
    def _ensure_wal(conn: sqlite3.Connection) -> None:
        """Switch to WAL once; while another process is creating the same file the
        switch fails at once with "locked" (SQLite does not busy-wait for it), so
        retry with a short back-off up to the busy timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        delay = 0.005
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _move_aside(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            target = Path(f"{self.path}.broken{suffix}")
            try:
                os.replace(source, target)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ConfigError(
                    f"cannot move the broken recall index {source} aside: {exc.strerror or exc}."
                    " Delete it by hand; it is a cache."
                ) from exc

    def _recover(self, exc: sqlite3.Error) -> None:
        logger.warning("recall index %s is corrupt (%s); moving it aside and rebuilding it", self.path, exc)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self._move_aside()
        self._conn = self._open()

    def _translate(self, exc: sqlite3.Error) -> KorgError:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            return KorgError(
                f"the recall index {self.path} stayed locked by another process for {BUSY_TIMEOUT_S:g} s."
                " Try again once it finishes indexing."
            )
        return KorgError(f"the recall index {self.path} failed: {exc}. Delete it to rebuild; it is a cache.")

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the connection; if the index turns out corrupt, rebuild, refresh, retry once.

        Raises:
            KorgError: SQLite failed for another reason (e.g. locked past the busy timeout).
        """
        try:
            return work(self._conn)
        except sqlite3.Error as exc:
            if not _is_corrupt(exc):
                raise self._translate(exc) from exc
            self._recover(exc)
        if self._last_sources is not None:
            self.refresh(self._last_sources)
        try:
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

        Public for :mod:`korg_bridge.recall.vectors`, which stores embeddings in
        the same file so they share its lifetime and its rebuilds. Keep it short:
        other writers wait for it.

        Raises:
            KorgError: the index stays locked past the busy timeout, or SQLite fails.
        """
        try:
            with self._write() as conn:
                yield conn
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    # --- refresh -------------------------------------------------------------------------------

    def refresh(
        self, sources: Sequence[Path], progress: Callable[[int, int], None] | None = None
    ) -> RefreshReport:
        """Bring the index up to date with the ledger files at or under ``sources``.

        New lines of grown files are added; a truncated or replaced file is
        re-read from the start; a deleted file's events are dropped; files
        outside ``sources`` are left alone (another call may watch them).
        ``progress(done_bytes, total_bytes)`` is called after each batch.

        Raises:
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
        started = time.monotonic()
        report = RefreshReport()
        roots = [os.path.abspath(source) for source in sources]
        files = list_file_paths(sources)  # absolute path strings: no Path objects on the hot path
        listed = set(files)
        known: dict[str, tuple[Any, ...]] = {
            row[0]: row[1:]
            for row in self._conn.execute(
                'SELECT path, size, mtime_ns, id, inode, dev, "offset", line_no FROM sources'
            )
        }
        gone = [p for p in known if p not in listed and _is_under(p, roots) and not os.path.exists(p)]
        work: list[tuple[str, FileState, _SourceRow | None]] = []
        for path in files:
            state = stat_file(path)
            if state is None:
                if path in known:
                    gone.append(path)
                continue
            report.files_scanned += 1
            stored = known.get(path)
            if stored is not None and tuple(stored[:2]) + tuple(stored[3:5]) == (
                state.size,
                state.mtime_ns,
                state.inode,
                state.dev,
            ):
                continue
            work.append((path, state, None if stored is None else tuple(stored[2:])))
        for path in gone:
            with self._write() as conn:
                row = conn.execute("SELECT id FROM sources WHERE path = ?", (path,)).fetchone()
                if row is not None:
                    report.events_removed += self._delete_events(row[0])
                    conn.execute("DELETE FROM sources WHERE id = ?", (row[0],))
                    report.files_changed += 1
        meter = _Meter(progress, sum(_plan(row, state)[3] for _, state, row in work))
        changed: set[str] = set()
        stale = self._consume(_batches(work), report, meter, changed)
        for _attempt in range(STALE_RETRIES):
            if not stale:
                break
            # Another process indexed these files meanwhile: resume from where it left them.
            again = [
                (path, state, self._conn.execute(_SOURCE_STATE, (path,)).fetchone())
                for path, state, _ in work
                if path in stale
            ]
            stale = self._consume(_batches(again), report, meter, changed)
        report.files_changed += len(changed)
        report.duration_s = time.monotonic() - started
        self._note_refresh()
        return report

    def _consume(
        self, batches: Iterator[_Batch], report: RefreshReport, meter: _Meter, changed: set[str]
    ) -> set[str]:
        """Write each batch whose file is still in the state it was read from; return the others' paths."""
        stale: set[str] = set()
        expected: dict[str, _SourceRow | None] = {}
        for batch in batches:
            if batch.path in stale:
                continue
            if batch.error is not None:  # vanished or unreadable since the stat: next time
                logger.warning("%s", batch.error)
                continue
            with self._write() as conn:
                current = conn.execute(_SOURCE_STATE, (batch.path,)).fetchone()
                if current != expected.setdefault(batch.path, batch.row):
                    stale.add(batch.path)
                    continue
                self._store_batch(conn, batch, current, report)
                expected[batch.path] = conn.execute(_SOURCE_STATE, (batch.path,)).fetchone()
            if batch.reset or batch.result.end_offset != batch.start:
                changed.add(batch.path)
            meter.advance(batch.result.end_offset - batch.start)
        return stale

    def _store_batch(
        self, conn: sqlite3.Connection, batch: _Batch, row: _SourceRow | None, report: RefreshReport
    ) -> None:
        """Write one batch; ``row`` is the file's stored state, checked to be the one it was read from."""
        path, state, result, events, rows = batch.path, batch.state, batch.result, batch.events, batch.rows
        if row is None:
            source_id = int(conn.execute("INSERT INTO sources (path) VALUES (?)", (path,)).lastrowid or 0)
        else:
            source_id = row[0]
        if batch.reset:
            report.events_removed += self._delete_events(source_id)
            conn.execute("UPDATE sources SET skipped = 0, ignored = 0 WHERE id = ?", (source_id,))
        self._take_pending(conn, source_id, events, rows)
        last = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        conn.executemany(_INSERT_EVENT, ((source_id, *values) for values in rows))
        # One statement feeds FTS5 the whole batch: far cheaper than a row at a time.
        conn.execute(
            "INSERT INTO events_fts (rowid, text) SELECT id, text FROM events WHERE id > ?",
            (last[0] if last else 0,),
        )
        for patch in result.patches:
            if not self._patch_stored(conn, source_id, path, patch):
                conn.execute(
                    "INSERT INTO pending_patches (source_id, tool_use_id, result, success, timestamp)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        source_id,
                        patch.tool_use_id,
                        _dump(patch.result),
                        _success(patch.success),
                        patch.timestamp,
                    ),
                )
        conn.execute(
            'UPDATE sources SET inode = ?, dev = ?, size = ?, mtime_ns = ?, "offset" = ?, line_no = ?,'
            " skipped = skipped + ?, ignored = ignored + ?, indexed_at = ? WHERE id = ?",
            (
                state.inode,
                state.dev,
                # Mid-file, a size no file has: the next refresh must not take the file as done.
                state.size if batch.final else -1,
                state.mtime_ns,
                result.end_offset,
                result.end_line,
                result.skipped,
                result.ignored,
                time.time(),
                source_id,
            ),
        )
        report.events_added += len(rows)
        report.skipped_lines += result.skipped
        report.ignored_lines += result.ignored

    def _delete_events(self, source_id: int) -> int:
        conn = self._conn
        conn.execute(
            "INSERT INTO events_fts (events_fts, rowid, text)"
            " SELECT 'delete', id, text FROM events WHERE source_id = ?",
            (source_id,),
        )
        removed = conn.execute("DELETE FROM events WHERE source_id = ?", (source_id,)).rowcount
        conn.execute("DELETE FROM pending_patches WHERE source_id = ?", (source_id,))
        return removed

    @staticmethod
    def _take_pending(
        conn: sqlite3.Connection, source_id: int, events: list[Event], rows: list[tuple[Any, ...]]
    ) -> None:
        """Join stored patches that were waiting for a ``tool_use`` now in ``events``."""
        pending = conn.execute(
            "SELECT id, tool_use_id, result, success, timestamp FROM pending_patches WHERE source_id = ?",
            (source_id,),
        ).fetchall()
        if not pending:
            return
        by_id = {
            event.extra["tool_use_id"]: position
            for position, event in enumerate(events)
            if isinstance(event.extra.get("tool_use_id"), str)
        }
        for pending_id, tool_use_id, result, success, timestamp in pending:
            position = by_id.get(tool_use_id)
            if position is None:
                continue
            patch = ResultPatch(
                source=events[position].source,
                tool_use_id=tool_use_id,
                result=_load(result),
                success=None if success is None else bool(success),
                timestamp=timestamp,
            )
            events[position] = _patched(events[position], patch)
            rows[position] = _event_row(events[position])
            conn.execute("DELETE FROM pending_patches WHERE id = ?", (pending_id,))

    @staticmethod
    def _patch_stored(conn: sqlite3.Connection, source_id: int, path: str, patch: ResultPatch) -> bool:
        """Apply ``patch`` to its already indexed event (text and FTS row too); False if there is none."""
        found = conn.execute(
            'SELECT id, "offset", seq, shape, tool, args, extra, text FROM events'
            " WHERE source_id = ? AND tool_use_id = ? ORDER BY id DESC LIMIT 1",
            (source_id, patch.tool_use_id),
        ).fetchone()
        if found is None:
            return False
        event_id, offset, seq, shape, tool, args, extra, old_text = found
        event = Event(
            source=path,
            offset=offset,
            seq=seq,
            shape=shape,
            tool=tool,
            args=_load(args),
            extra=_load(extra) or {},
        )
        event = _patched(event, patch)
        text = flatten(event)
        conn.execute(
            "INSERT INTO events_fts (events_fts, rowid, text) VALUES ('delete', ?, ?)", (event_id, old_text)
        )
        conn.execute(
            "UPDATE events SET result = ?, success = ?, extra = ?, text = ? WHERE id = ?",
            (_dump(event.result), _success(event.success), _dump(event.extra), text, event_id),
        )
        conn.execute("INSERT INTO events_fts (rowid, text) VALUES (?, ?)", (event_id, text))
        return True

    def _note_refresh(self) -> None:
        """Record the refresh time for ``stats``, unless another process holds the write lock.

        Freshness is informative: it must never make a query wait for a writer.
        """
        conn = self._conn
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('last_refresh', ?)", (repr(time.time()),)
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
        """Describe the index: files, events by shape/agent/tool, skipped lines, size, freshness."""
        return self.read(self._stats)

    def _stats(self, conn: sqlite3.Connection) -> dict[str, Any]:
        def grouped(column: str) -> dict[str, int]:
            rows = conn.execute(
                f"SELECT {column}, count(*) FROM events GROUP BY {column} ORDER BY count(*) DESC, {column}"
            )
            return {str(key): count for key, count in rows}

        sources = [
            {
                "path": path,
                "events": events,
                "bytes_indexed": offset,
                "size": size,
                "skipped_lines": skipped,
                "ignored_lines": ignored,
                "indexed_at": _iso(indexed_at),
            }
            for path, events, offset, size, skipped, ignored, indexed_at in conn.execute(
                'SELECT s.path, (SELECT count(*) FROM events e WHERE e.source_id = s.id), s."offset",'
                " s.size, s.skipped, s.ignored, s.indexed_at FROM sources s ORDER BY s.path"
            )
        ]
        last = conn.execute("SELECT value FROM meta WHERE key = 'last_refresh'").fetchone()
        size = sum(
            os.path.getsize(f"{self.path}{suffix}")
            for suffix in ("", "-wal")
            if os.path.exists(f"{self.path}{suffix}")
        )
        return {
            "index_path": str(self.path),
            "index_size_bytes": size,
            "schema": [name for name, _ in MIGRATIONS],
            "last_refresh": _iso(float(last[0])) if last else None,
            "last_refresh_age_s": round(time.time() - float(last[0]), 3) if last else None,
            "events": conn.execute("SELECT count(*) FROM events").fetchone()[0],
            "by_shape": grouped("shape"),
            "by_agent": grouped("agent"),
            "by_tool": grouped("tool"),
            "skipped_lines": sum(source["skipped_lines"] for source in sources),
            "ignored_lines": sum(source["ignored_lines"] for source in sources),
            "pending_results": conn.execute("SELECT count(*) FROM pending_patches").fetchone()[0],
            "sources": sources,
        }


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        "args": _load(args),
        "result": _load(result),
        "success": None if success is None else bool(success),
        "timestamp": timestamp,
        "triggered_by": triggered_by,
        "extra": _load(extra) or {},
        "text": text,
        "is_match": False,
    }
