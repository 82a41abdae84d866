"""Bringing the index up to date with the ledgers: what to read, and writing it safely.

Per file the index keeps the byte offset, line count and identity (inode,
device, size, mtime), so an unchanged file costs one ``stat`` and an appended
one only its new lines; a truncated or replaced file is read again from the
start, a deleted one's events are dropped.

Several processes may refresh at once. None holds the write lock while
reading a ledger: a slice is parsed first (:mod:`~korg_bridge.recall.batches`,
maybe in a :mod:`~korg_bridge.recall.worker`), then written only if the
file's stored state is still the one it was planned from. When another
process got there first the file is re-planned from its new state.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from korg_bridge.recall.batches import (
    BATCH_BYTES,
    ROW_COLUMNS,
    TOOL_USE_COLUMN,
    WORKER_MIN_BYTES,
    Batch,
    SourceRow,
    Work,
    dump_json,
    event_from_row,
    event_row,
    load_json,
    patched,
    plan,
    read_batches,
    success_int,
)
from korg_bridge.recall.shapes import ResultPatch
from korg_bridge.recall.sources import list_file_paths, stat_file
from korg_bridge.recall.text import flatten

__all__ = ["RefreshReport", "Refresher"]

logger = logging.getLogger(__name__)

STALE_RETRIES = 3
"""Times a file another process was indexing at the same moment is re-read from its new state."""

INSERT_EVENT = f"INSERT INTO events (source_id, {ROW_COLUMNS}) VALUES (?{', ?' * 15})"
SOURCE_STATE = 'SELECT id, inode, dev, "offset", line_no FROM sources WHERE path = ?'


@dataclass
class RefreshReport:
    """What one :meth:`~korg_bridge.recall.index.Index.refresh` did."""

    files_scanned: int = 0
    files_changed: int = 0
    events_added: int = 0
    events_removed: int = 0
    skipped_lines: int = 0
    """Malformed lines read in this refresh."""
    ignored_lines: int = 0
    """Valid lines that hold no event (Claude Code system lines and the like)."""
    duration_s: float = 0.0


def _is_under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


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


class Refresher:
    """One refresh of the index behind ``conn``; ``write`` opens its write transactions.

    ``batch_bytes`` and ``worker_min_bytes`` are the slice size and the size of
    work from which parsing moves to a worker process (tests lower both).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        write: Callable[[], AbstractContextManager[sqlite3.Connection]],
        *,
        batch_bytes: int = BATCH_BYTES,
        worker_min_bytes: int = WORKER_MIN_BYTES,
    ) -> None:
        self._conn = conn
        self._write = write
        self._batch_bytes = batch_bytes
        self._worker_min_bytes = worker_min_bytes

    def run(self, sources: Sequence[Path], progress: Callable[[int, int], None] | None) -> RefreshReport:
        """Refresh from the files at or under ``sources`` (sqlite3 errors propagate to the index)."""
        started = time.monotonic()
        report = RefreshReport()
        work, gone = self._survey(sources, report)
        for path in gone:
            with self._write() as conn:
                row = conn.execute("SELECT id FROM sources WHERE path = ?", (path,)).fetchone()
                if row is not None:
                    report.events_removed += self._delete_events(row[0])
                    conn.execute("DELETE FROM sources WHERE id = ?", (row[0],))
                    report.files_changed += 1
        meter = _Meter(progress, sum(plan(row, state)[3] for _, state, row in work))
        changed: set[str] = set()
        stale = self._consume(work, report, meter, changed)
        for _attempt in range(STALE_RETRIES):
            if not stale:
                break
            # Another process indexed these files meanwhile: resume from where it left them.
            again = [
                (path, state, self._conn.execute(SOURCE_STATE, (path,)).fetchone())
                for path, state, _ in work
                if path in stale
            ]
            stale = self._consume(again, report, meter, changed)
        report.files_changed += len(changed)
        report.duration_s = time.monotonic() - started
        return report

    def _survey(self, sources: Sequence[Path], report: RefreshReport) -> tuple[list[Work], list[str]]:
        """The files to read (new or changed since stored) and the stored ones that are gone."""
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
        work: list[Work] = []
        for path in files:
            state = stat_file(path)
            if state is None:
                if path in known:
                    gone.append(path)
                continue
            report.files_scanned += 1
            stored = known.get(path)
            if stored is not None and (stored[0], stored[1], stored[3], stored[4]) == (
                state.size,
                state.mtime_ns,
                state.inode,
                state.dev,
            ):
                continue
            work.append((path, state, None if stored is None else tuple(stored[2:])))
        return work, gone

    def _consume(
        self, work: Sequence[Work], report: RefreshReport, meter: _Meter, changed: set[str]
    ) -> set[str]:
        """Write each batch whose file is still in the state it was read from; return the others' paths."""
        stale: set[str] = set()
        expected: dict[str, SourceRow | None] = {}
        batches: Generator[Batch, None, None]
        if sum(plan(row, state)[3] for _path, state, row in work) < self._worker_min_bytes:
            batches = read_batches(work, self._batch_bytes)  # not worth a process (nor its imports)
        else:
            from korg_bridge.recall.worker import parsed_batches

            batches = parsed_batches(work, self._batch_bytes, min_bytes=self._worker_min_bytes)
        with contextlib.closing(batches):
            for batch in batches:
                if batch.path in stale:
                    continue
                if batch.error is not None:  # vanished or unreadable since the stat: next time
                    logger.warning("%s", batch.error)
                    continue
                with self._write() as conn:
                    current = conn.execute(SOURCE_STATE, (batch.path,)).fetchone()
                    if current != expected.setdefault(batch.path, batch.row):
                        stale.add(batch.path)
                        continue
                    self._store_batch(conn, batch, current, report)
                    expected[batch.path] = conn.execute(SOURCE_STATE, (batch.path,)).fetchone()
                if batch.reset or batch.end_offset != batch.start:
                    changed.add(batch.path)
                meter.advance(batch.end_offset - batch.start)
        return stale

    def _store_batch(
        self, conn: sqlite3.Connection, batch: Batch, row: SourceRow | None, report: RefreshReport
    ) -> None:
        """Write one batch; ``row`` is the file's stored state, checked to be the one it was read from."""
        path, state, rows = batch.path, batch.state, batch.rows
        if row is None:
            source_id = int(conn.execute("INSERT INTO sources (path) VALUES (?)", (path,)).lastrowid or 0)
        else:
            source_id = row[0]
        if batch.reset:
            report.events_removed += self._delete_events(source_id)
            conn.execute("UPDATE sources SET skipped = 0, ignored = 0 WHERE id = ?", (source_id,))
        self._take_pending(conn, source_id, path, rows)
        last = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        conn.executemany(INSERT_EVENT, ((source_id, *values) for values in rows))
        # One statement feeds FTS5 the whole batch: far cheaper than a row at a time.
        conn.execute(
            "INSERT INTO events_fts (rowid, text) SELECT id, text FROM events WHERE id > ?",
            (last[0] if last else 0,),
        )
        for patch in batch.patches:
            if not self._patch_stored(conn, source_id, path, patch):
                conn.execute(
                    "INSERT INTO pending_patches (source_id, tool_use_id, result, success, timestamp)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        source_id,
                        patch.tool_use_id,
                        dump_json(patch.result),
                        success_int(patch.success),
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
                batch.end_offset,
                batch.end_line,
                batch.skipped,
                batch.ignored,
                time.time(),
                source_id,
            ),
        )
        report.events_added += len(rows)
        report.skipped_lines += batch.skipped
        report.ignored_lines += batch.ignored

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
        conn: sqlite3.Connection, source_id: int, path: str, rows: list[tuple[Any, ...]]
    ) -> None:
        """Join stored results that were waiting for a ``tool_use`` now in ``rows`` (rewritten in place)."""
        pending = conn.execute(
            "SELECT id, tool_use_id, result, success, timestamp FROM pending_patches WHERE source_id = ?",
            (source_id,),
        ).fetchall()
        if not pending:
            return
        by_id = {
            row[TOOL_USE_COLUMN]: position
            for position, row in enumerate(rows)
            if row[TOOL_USE_COLUMN] is not None
        }
        for pending_id, tool_use_id, result, success, timestamp in pending:
            position = by_id.get(tool_use_id)
            if position is None:
                continue
            patch = ResultPatch(
                source=path,
                tool_use_id=tool_use_id,
                result=load_json(result),
                success=None if success is None else bool(success),
                timestamp=timestamp,
            )
            rows[position] = event_row(patched(event_from_row(path, rows[position]), patch))
            conn.execute("DELETE FROM pending_patches WHERE id = ?", (pending_id,))

    @staticmethod
    def _patch_stored(conn: sqlite3.Connection, source_id: int, path: str, patch: ResultPatch) -> bool:
        """Apply ``patch`` to its already indexed event (text and FTS row too); False if there is none."""
        found = conn.execute(
            f"SELECT id, {ROW_COLUMNS} FROM events WHERE source_id = ? AND tool_use_id = ? ORDER BY id DESC LIMIT 1",
            (source_id, patch.tool_use_id),
        ).fetchone()
        if found is None:
            return False
        event_id, row, old_text = found[0], found[1:], found[-1]
        event = patched(event_from_row(path, row), patch)
        text = flatten(event)
        conn.execute(
            "INSERT INTO events_fts (events_fts, rowid, text) VALUES ('delete', ?, ?)", (event_id, old_text)
        )
        conn.execute(
            "UPDATE events SET result = ?, success = ?, extra = ?, text = ? WHERE id = ?",
            (dump_json(event.result), success_int(event.success), dump_json(event.extra), text, event_id),
        )
        conn.execute("INSERT INTO events_fts (rowid, text) VALUES (?, ?)", (event_id, text))
        return True
