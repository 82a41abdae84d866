"""The SQLite store's operation log file: appending after commit, its anchor in the store, verify.

``memory-ops.jsonl`` beside the store is written by
:class:`korg_bridge.ledger.chain.LedgerWriter` (hash-chained, flock, fsync), so
``korg-recall verify`` checks the store's history and recall can search who
changed what. An entry never holds a title, body, key or tag -- only ids,
versions, counts and SHA-256 hashes; not a mirror file's path either, whose name
holds the title's slug -- so a purge leaves nothing readable behind in the log
(nor in the recall index built from it).

**The chain's head is anchored in the store.** A hash chain proves no entry was
changed, not that none is missing at its end: a log cut short, or deleted and
started afresh, still verifies. So the store keeps ``seq_id`` and ``entry_hash``
of the last entry it appended (``meta``: :data:`ANCHOR_SEQ`, :data:`ANCHOR_TIP`).
Before appending, :func:`flush` checks that the log still ends with that entry (or
goes past it, by entries a crash left unrecorded); if not, what is missing is
recorded in the store for good (:data:`BREAKS`) and the log goes on, so
``korg-recall verify --store`` reports it on every run after -- as it reports a log
found cut short or missing before any further write. A log replaced by a FIFO, a
directory or a link is refused at once (never opened blocking, never while the
write lock waits on it); the entries stay queued until a log file is back.

Crash safety without two-phase commit: the entry is inserted into
``oplog_pending`` inside the operation's own transaction (so it exists exactly
when the operation does) and appended after commit by :func:`flush`. A process
killed in between leaves the row for the next one. Flushing holds the store's
write lock, so flushers take turns, and each entry carries an ``op_id`` that is
looked for in the log's tail first: a row appended just before a crash (but not
yet deleted) is not appended twice.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge._fs.safe_read import NotRegular, RegularFile, not_regular
from korg_bridge.config import ledger_key
from korg_bridge.errors import KorgError
from korg_bridge.recall.memory.records import iso
from korg_bridge.recall.paths import OPLOG_NAME

if TYPE_CHECKING:
    from korg_bridge.ledger.chain import VerifyReport

    pass


__all__ = ["ANCHOR_SEQ", "ANCHOR_TIP", "BREAKS", "flush", "log_state", "verify_log"]

logger = logging.getLogger(__name__)

_TAIL_BLOCK = 64 * 1024


ANCHOR_SEQ = "oplog_seq"


ANCHOR_TIP = "oplog_tip"
"""``meta`` keys of the log's anchor: ``seq_id`` and ``entry_hash`` of the last entry this store appended."""


BREAKS = "oplog_breaks"
"""``meta`` key of the damage found to the log (JSON list of ``{at, problem}``), kept for ``verify``."""


_MAX_BREAKS = 100


_MAX_BEYOND = 100_000
"""Entries past the anchor a log may hold (a crash between an append and its commit leaves a
few): more, and it is not the log the store wrote."""


def _not_a_file(path: Path) -> str | None:
    """What ``path`` is when something other than a regular file (or nothing) sits there: the
    log is never opened through a link, nor as a FIFO that would block the writer forever."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    return not_regular(info.st_mode)


def _tail_entries(path: Path, wanted: int) -> list[dict[str, Any]]:
    """The last ``wanted`` complete entries of the log, oldest first (fewer if it is shorter;
    none if it is missing). Never blocks: read through :class:`RegularFile`, which refuses
    anything but a regular file (and a link) without opening it for a writer.

    Raises:
        OSError: the log cannot be read, or is not a regular file.
    """
    try:
        with RegularFile(path, follow=False) as file:
            start = file.stat.st_size
            data = b""
            while start > 0 and data.count(b"\n") <= wanted:
                step = min(_TAIL_BLOCK, start)
                start -= step
                data = file.pread(step, start) + data
    except FileNotFoundError:
        return []
    except NotRegular as exc:
        raise OSError(errno.EINVAL, f"{path} is {exc.kind}") from exc
    lines = data.split(b"\n")[:-1]  # the last piece is empty, or a line still being written
    found: list[dict[str, Any]] = []
    for raw in lines[-(wanted + 1) :] if wanted else []:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found[-wanted:] if wanted else []


def _op_ids(entries: list[dict[str, Any]]) -> set[str]:
    out: set[str] = set()
    for obj in entries:
        args = obj.get("args")
        if isinstance(args, dict) and isinstance(args.get("op_id"), str):
            out.add(args["op_id"])
    return out


def _anchor(tx: Any) -> tuple[int, str] | None:
    """``(seq_id, entry_hash)`` of the last entry this store appended to its log, or None."""
    found = dict(
        tx.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", (ANCHOR_SEQ, ANCHOR_TIP)).fetchall()
    )
    if ANCHOR_SEQ not in found or ANCHOR_TIP not in found:
        return None
    return int(found[ANCHOR_SEQ]), str(found[ANCHOR_TIP])


def _breaks(tx: Any) -> list[dict[str, str]]:
    row = tx.execute("SELECT value FROM meta WHERE key = ?", (BREAKS,)).fetchone()
    try:
        found = json.loads(row[0]) if row is not None else []
    except ValueError:
        return [{"at": "?", "problem": "the store's record of earlier damage to the log is unreadable"}]
    return [b for b in found if isinstance(b, dict)] if isinstance(found, list) else []


def _set_meta(tx: Any, key: str, value: str) -> None:
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _against_anchor(path: Path, anchor: tuple[int, str] | None) -> str | None:
    """Why the log does not hold the entry the store last appended to it (None: it does).

    Raises:
        OSError: the log cannot be read, or is not a regular file.
    """
    if anchor is None:
        return None
    seq, tip = anchor
    last = _tail_entries(path, 1)
    top = last[-1].get("seq_id") if last else None
    if not last:
        return f"the log is missing or empty, but the store appended {seq} entries to it (up to seq {seq})"
    if not isinstance(top, int) or isinstance(top, bool):
        return "its last entry has no seq_id"
    if top < seq:
        gone = f"seq {top + 1}" if top + 1 == seq else f"seq {top + 1}-{seq}"
        return f"{gone} missing: the log ends at seq {top}, but the store appended entries up to seq {seq}"
    if top - seq >= _MAX_BEYOND:
        return f"{top - seq} entries follow seq {seq}, the last the store appended: the log was replaced"
    near = last if top == seq else _tail_entries(path, top - seq + 1)  # the usual case: one read
    match = next((e for e in near if e.get("seq_id") == seq), None)
    if match is None or match.get("entry_hash") != tip:
        return f"seq {seq}: not the entry the store appended there (the log was replaced or rewritten)"
    return None


def flush(store: Any, env: Mapping[str, str]) -> str | None:
    """Append every queued entry of a SQLite store to its log; ``None`` on success, else why
    they stay queued.

    A failure here never undoes or hides a committed write: the entries wait for the
    next process, and the caller reports the reason in its ``checks``. The last entry
    appended is anchored in the store (``meta``), so a log whose tail was cut off, or that
    was deleted, is noticed here -- recorded in the store for ``verify`` to report for good,
    before the chain goes on -- and by ``verify --store``.
    """
    from korg_bridge.ledger.chain import LedgerWriter

    conn: sqlite3.Connection = store.conn
    try:
        if conn.execute("SELECT 1 FROM oplog_pending LIMIT 1").fetchone() is None:
            return None
    except sqlite3.Error as exc:
        return f"cannot read the queued log entries: {exc}"
    path: Path = store.folder / OPLOG_NAME
    kind = _not_a_file(path)
    if kind is not None:
        message = f"{path} is {kind}, not the operation log; the entries stay queued. Move it aside"
        logger.warning("memory operation log: %s", message)
        return message
    writer = LedgerWriter(path, key=ledger_key(env))
    try:
        with store.write() as tx:
            rows = tx.execute("SELECT seq, op_id, entry FROM oplog_pending ORDER BY seq").fetchall()
            if not rows:
                return None
            broken = _against_anchor(path, _anchor(tx))
            if broken is not None:
                logger.warning("memory operation log %s: %s; recorded, and the log goes on", path, broken)
                found = _breaks(tx)[-(_MAX_BREAKS - 1) :]
                found.append({"at": iso(time.time()), "problem": broken})
                _set_meta(tx, BREAKS, json.dumps(found))
            present = _op_ids(_tail_entries(path, len(rows)))
            last: dict[str, Any] | None = None
            for seq, op_id, entry in rows:
                if op_id not in present:
                    last = writer.append(json.loads(entry))
                tx.execute("DELETE FROM oplog_pending WHERE seq = ?", (seq,))
            tail = [last] if last is not None else _tail_entries(path, 1)
            if (
                tail
                and isinstance(tail[-1].get("seq_id"), int)
                and isinstance(tail[-1].get("entry_hash"), str)
            ):
                _set_meta(tx, ANCHOR_SEQ, str(tail[-1]["seq_id"]))
                _set_meta(tx, ANCHOR_TIP, str(tail[-1]["entry_hash"]))
    except (KorgError, OSError, ValueError) as exc:
        message = exc.message if isinstance(exc, KorgError) else str(exc)
        logger.warning("memory operation log %s: %s; the entries stay queued", path, message)
        return message
    return None


def verify_log(
    store_path: Path, anchor: tuple[int, str] | None, breaks: list[dict[str, str]], key: bytes | None
) -> VerifyReport:
    """The verdict on a SQLite store's ``log``: its chain, and the store's ``anchor`` (the last entry
    it recorded appending) and the damage it found before (``breaks``): a missing tail or log is
    not intact.

    Raises:
        ConfigError: no log, and a store that never wrote one (no anchor).
    """
    from korg_bridge.errors import ConfigError
    from korg_bridge.ledger.chain import VerifyReport, verify_file

    log = store_path.parent / OPLOG_NAME
    kind = _not_a_file(log)
    if kind is None and not log.exists():
        if anchor is None:
            raise ConfigError(
                f"no operation log beside the memory store {store_path} ({log} does not exist)."
            )
        report = VerifyReport(path=str(log), events=0, intact=False, tip_entry_hash=None)
    elif kind is not None:
        report = VerifyReport(path=str(log), events=0, intact=False, tip_entry_hash=None)
        report.errors.append(f"{log} is {kind}, not a log file")
    else:
        report = verify_file(log, key)
    if kind is None:
        try:
            problem = _against_anchor(log, anchor)
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or exc})"
        if problem is not None:
            report.errors.append(problem)
    report.errors.extend(f"found {b.get('at')}: {b.get('problem')} (entries lost for good)" for b in breaks)
    report.intact = not report.errors
    return report


def log_state(tx: Any) -> tuple[tuple[int, str] | None, list[dict[str, str]]]:
    """What the store recorded of its log: the anchor and the damage found, for :func:`verify_log`."""
    return _anchor(tx), _breaks(tx)
