"""Bringing the index up to date with the ledgers: what to read, and writing it safely.

Per file the index keeps the byte offset, line count, identity (inode,
device, size, mtime) and a fingerprint of its first bytes, so an unchanged
file costs one ``stat`` and an appended one only its new lines. A file is
read again from the start — its stored events replaced — when it was:

* replaced (inode or device changed);
* truncated (smaller than the stored offset);
* rewritten in place: its first bytes differ from the fingerprint (logrotate
  ``copytruncate`` followed by new lines past the old offset), or its mtime
  changed while its size did not (a same-size rewrite).

A file that disappears (Claude Code deletes transcripts after
``cleanupPeriodDays``) keeps its events, marked gone, until ``korg-recall
prune --gone``; if it comes back it is resumed or re-read, never duplicated.

Several processes may refresh at once. None holds the write lock while
reading a ledger: a slice is parsed first (:mod:`~korg_bridge.recall.history.ingest.batches`,
maybe in a :mod:`~korg_bridge.recall.history.ingest.worker`), then written only if the
file's stored state is still the one it was planned from. When another
process got there first the file is re-planned from its new state.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge._fs.lines import MAX_LINE_BYTES, head_hash
from korg_bridge.recall.history.ingest import pairing
from korg_bridge.recall.history.ingest.batches import (
    BATCH_BYTES,
    MAX_SKIP_RECORDS,
    STORED_COLUMNS,
    WORKER_MIN_BYTES,
    Batch,
    Stored,
    Work,
    read_batches,
)
from korg_bridge.recall.history.ingest.rows import ROW_COLUMNS
from korg_bridge.recall.history.ingest.sources import FileState, Walls, list_sources, stat_file

__all__ = ["RefreshReport", "Refresher", "delete_source_events", "plan"]

logger = logging.getLogger(__name__)

STALE_RETRIES = 3
"""Times a file another process was indexing at the same moment is re-read from its new state."""

INSERT_EVENT = f"INSERT INTO events (source_id, {ROW_COLUMNS}) VALUES (?{', ?' * 17})"
SOURCE_STATE = f"SELECT {STORED_COLUMNS} FROM sources WHERE path = ?"


@dataclass
class RefreshReport:
    """What one :meth:`~korg_bridge.recall.history.index.Index.refresh` did."""

    files_scanned: int = 0
    files_changed: int = 0
    files_gone: int = 0
    """Files that disappeared in this refresh (their events are kept, marked gone)."""
    files_passed_over: list[str] = field(default_factory=list)
    """``*.jsonl`` entries of scanned folders that are no regular file (FIFOs, devices …)."""
    events_added: int = 0
    events_removed: int = 0
    skipped_lines: int = 0
    """Lines read in this refresh that could not be indexed (``stats`` says which and why)."""
    ignored_lines: int = 0
    """Valid lines that hold no event (Claude Code system lines and the like)."""
    duration_s: float = 0.0


def _is_under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def plan(path: str, state: FileState, stored: Stored | None, size: int | None, mtime_ns: int | None) -> Work:
    """Where to read a file from, given what the index stored of it (``size``/``mtime_ns`` then).

    Resume at the stored offset if the file only grew; otherwise start over.
    """
    if stored is None:
        return Work(path, state, None, 0, 0, False)
    same = (stored.inode, stored.dev) == (state.inode, state.dev) and state.size >= stored.offset
    if same and state.size == size and state.mtime_ns != mtime_ns:
        same = False  # rewritten in place at the same size
    if same and stored.head_len:
        same = head_hash(path, stored.head_len) == stored.head_sha
    if same:
        return Work(path, state, stored, stored.offset, stored.line_no, False)
    return Work(path, state, stored, 0, 0, True)


def delete_source_events(conn: sqlite3.Connection, source_id: int) -> int:
    """Drop a file's events (and their full-text rows), waiting results and skip records; return how many."""
    conn.execute(
        "INSERT INTO events_fts (events_fts, rowid, text, body)"
        " SELECT 'delete', id, text, body FROM events WHERE source_id = ?",
        (source_id,),
    )
    removed = conn.execute("DELETE FROM events WHERE source_id = ?", (source_id,)).rowcount
    conn.execute("DELETE FROM pending_patches WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM skipped_lines WHERE source_id = ?", (source_id,))
    return int(removed)


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

    ``batch_bytes``, ``worker_min_bytes`` and ``max_line_bytes`` are the slice
    size, the size of work from which parsing moves to a worker process, and
    the longest line read (tests lower them). ``walls`` confine the listing of a
    caller walled into its tenant (:class:`~korg_bridge.recall.history.ingest.sources.Walls`).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        write: Callable[[], AbstractContextManager[sqlite3.Connection]],
        *,
        batch_bytes: int = BATCH_BYTES,
        worker_min_bytes: int = WORKER_MIN_BYTES,
        max_line_bytes: int = MAX_LINE_BYTES,
        walls: Walls | None = None,
    ) -> None:
        self._conn = conn
        self._write = write
        self._walls = walls
        self._batch_bytes = batch_bytes
        self._worker_min_bytes = worker_min_bytes
        self._max_line = max_line_bytes

    def run(self, sources: Sequence[Path], progress: Callable[[int, int], None] | None) -> RefreshReport:
        """Refresh from the files at or under ``sources`` (sqlite3 errors propagate to the index).

        Raises:
            UsageError: a source is neither a folder nor a regular file.
        """
        started = time.monotonic()
        report = RefreshReport()
        work, gone = self._survey(sources, report)
        if gone:
            with self._write() as conn:
                now = time.time()
                for path in gone:
                    marked = conn.execute(
                        "UPDATE sources SET gone_at = ? WHERE path = ? AND gone_at IS NULL", (now, path)
                    ).rowcount
                    report.files_gone += marked
        meter = _Meter(progress, sum(item.to_read for item in work))
        changed: set[str] = set()
        stale = self._consume(work, report, meter, changed)
        for _attempt in range(STALE_RETRIES):
            if not stale:
                break
            # Another process indexed these files meanwhile: resume from where it left them.
            again = [self._replan(item) for item in work if item.path in stale]
            stale = self._consume(again, report, meter, changed)
        report.files_changed += len(changed)
        report.duration_s = time.monotonic() - started
        return report

    def _replan(self, item: Work) -> Work:
        found = self._conn.execute(
            f"SELECT size, mtime_ns, {STORED_COLUMNS} FROM sources WHERE path = ?", (item.path,)
        ).fetchone()
        if found is None:
            return plan(item.path, item.state, None, None, None)
        return plan(item.path, item.state, Stored(*found[2:]), found[0], found[1])

    def _survey(self, sources: Sequence[Path], report: RefreshReport) -> tuple[list[Work], list[str]]:
        """The files to read (new, changed, or back after being gone) and the stored ones now gone."""
        roots = [os.path.abspath(source) for source in sources]
        listing = list_sources(sources, self._walls)
        report.files_passed_over = listing.passed_over
        listed = set(listing.files)
        known: dict[str, tuple[Any, ...]] = {
            row[0]: row[1:]
            for row in self._conn.execute(f"SELECT path, size, mtime_ns, {STORED_COLUMNS} FROM sources")
        }
        gone = [
            path
            for path, row in known.items()
            if row[-1] is None and path not in listed and _is_under(path, roots) and not os.path.exists(path)
        ]
        work: list[Work] = []
        for path in listing.files:
            state = stat_file(path)
            if state is None:
                if path in known:
                    gone.append(path)
                continue
            report.files_scanned += 1
            row = known.get(path)
            if row is None:
                work.append(plan(path, state, None, None, None))
                continue
            size, mtime_ns, stored = row[0], row[1], Stored(*row[2:])
            if stored.gone_at is None and (size, mtime_ns, stored.inode, stored.dev) == (
                state.size,
                state.mtime_ns,
                state.inode,
                state.dev,
            ):
                continue
            work.append(plan(path, state, stored, size, mtime_ns))
        return work, gone

    def _batches(self, work: Sequence[Work]) -> Generator[Batch, None, None]:
        if sum(item.to_read for item in work) < self._worker_min_bytes:
            return read_batches(
                work, self._batch_bytes, self._max_line
            )  # not worth a process (nor its imports)
        from korg_bridge.recall.history.ingest.worker import parsed_batches

        return parsed_batches(
            work, self._batch_bytes, min_bytes=self._worker_min_bytes, max_line=self._max_line
        )

    def _consume(
        self, work: Sequence[Work], report: RefreshReport, meter: _Meter, changed: set[str]
    ) -> set[str]:
        """Write each batch whose file is still in the state it was read from; return the others' paths."""
        stale: set[str] = set()
        expected: dict[str, Stored | None] = {}
        with contextlib.closing(self._batches(work)) as batches:
            for batch in batches:
                if batch.path in stale:
                    continue
                if batch.error is not None:  # vanished or unreadable since the stat: next time
                    logger.warning("%s", batch.error)
                    continue
                with self._write() as conn:
                    found = conn.execute(SOURCE_STATE, (batch.path,)).fetchone()
                    current = None if found is None else Stored(*found)
                    if current != expected.setdefault(batch.path, batch.work.stored):
                        stale.add(batch.path)
                        continue
                    self._store(conn, batch, current, report)
                    found = conn.execute(SOURCE_STATE, (batch.path,)).fetchone()
                    expected[batch.path] = None if found is None else Stored(*found)
                if batch.reset or batch.end_offset != batch.start or (current and current.gone_at):
                    changed.add(batch.path)
                meter.advance(batch.end_offset - batch.start)
        return stale

    def _store(
        self, conn: sqlite3.Connection, batch: Batch, stored: Stored | None, report: RefreshReport
    ) -> None:
        """Write one batch; ``stored`` is the file's stored state, checked to be the one it was read from."""
        state, rows = batch.work.state, batch.rows
        if stored is None:
            source_id = int(
                conn.execute("INSERT INTO sources (path) VALUES (?)", (batch.path,)).lastrowid or 0
            )
        else:
            source_id = stored.id
        if batch.reset:
            report.events_removed += delete_source_events(conn, source_id)
            conn.execute(
                "UPDATE sources SET skipped = 0, ignored = 0, head_len = 0, head_sha = NULL WHERE id = ?",
                (source_id,),
            )
        pairing.take_pending(conn, source_id, rows)
        last = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        conn.executemany(INSERT_EVENT, ((source_id, *values) for values in rows))
        # One statement feeds FTS5 the whole batch: far cheaper than a row at a time.
        conn.execute(
            "INSERT INTO events_fts (rowid, text, body) SELECT id, text, body FROM events WHERE id > ?",
            (last[0] if last else 0,),
        )
        pairing.settle(conn, source_id, batch.results)
        self._note_skips(conn, source_id, batch)
        head_len, head_sha = batch.head if batch.head else (None, None)
        conn.execute(
            'UPDATE sources SET inode = ?, dev = ?, size = ?, mtime_ns = ?, "offset" = ?, line_no = ?,'
            " skipped = skipped + ?, ignored = ignored + ?, indexed_at = ?, parse_state = ?,"
            " head_len = coalesce(?, head_len), head_sha = coalesce(?, head_sha), gone_at = NULL WHERE id = ?",
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
                json.dumps(batch.parse_state) if batch.parse_state else None,  # ASCII: always storable
                head_len,
                head_sha,
                source_id,
            ),
        )
        report.events_added += len(rows)
        report.skipped_lines += batch.skipped
        report.ignored_lines += batch.ignored

    @staticmethod
    def _note_skips(conn: sqlite3.Connection, source_id: int, batch: Batch) -> None:
        """Remember the first :data:`MAX_SKIP_RECORDS` skipped lines of the file, with why."""
        if not batch.skips:
            return
        kept = conn.execute(
            "SELECT count(*) FROM skipped_lines WHERE source_id = ?", (source_id,)
        ).fetchone()[0]
        room = MAX_SKIP_RECORDS - int(kept)
        if room > 0:
            conn.executemany(
                "INSERT INTO skipped_lines (source_id, line_no, reason) VALUES (?, ?, ?)",
                [(source_id, line_no, reason) for line_no, reason in batch.skips[:room]],
            )
