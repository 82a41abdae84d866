"""The operation log: every memory write, as a korg-ledger@v1 entry, hash-chained.

:func:`record` builds the entry (ids, versions, counts and hashes, never text) and
hands it to the transaction (:meth:`~.backend.Tx.log_op`). A team store appends
it to its ``memory_ops`` table right there, chained per tenant (:mod:`.pg.oplog`);
a SQLite store queues it and appends it to a file after commit, as follows.

``memory-ops.jsonl`` beside the store is written by
:class:`korg_bridge.ledger.LedgerWriter` (hash-chained, flock, fsync), so
``korg-recall verify`` checks the store's history and recall can search who
changed what. An entry never holds a title, body, key or tag -- only ids,
versions, counts and SHA-256 hashes -- so a purge leaves nothing readable
behind in the log.

Crash safety without two-phase commit: the entry is inserted into
``oplog_pending`` inside the operation's own transaction (so it exists exactly
when the operation does) and appended after commit by :func:`flush`. A process
killed in between leaves the row for the next one. Flushing holds the store's
write lock, so flushers take turns, and each entry carries an ``op_id`` that is
looked for in the log's tail first: a row appended just before a crash (but not
yet deleted) is not appended twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError
from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.safety import redact_value

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Tx

__all__ = ["OPLOG_NAME", "flush", "record", "verify_store", "version_args"]

logger = logging.getLogger(__name__)

OPLOG_NAME = "memory-ops.jsonl"
ENV_LEDGER_KEY = "KORG_LEDGER_KEY"
"""The HMAC key of keyed ledgers; the same variable ``korg-recall verify`` reads."""
_TAIL_BLOCK = 64 * 1024


def version_args(version: Version) -> dict[str, Any]:
    """What the log may say about a version: ids, counts and hashes, never its text."""
    body = version.body.encode("utf-8")
    return {
        "id": version.id,
        "version": version.version,
        "scope": version.scope,
        "type": version.type,
        "state": version.state,
        "trust": version.trust,
        "content_sha256": hashlib.sha256(body).hexdigest(),
        "bytes": len(body),
        "tags": len(version.tags),
        "has_key": version.key is not None,
    }


def record(conn: Tx, *, actor: str, op: str, status: str, args: Mapping[str, Any], now: float) -> str:
    """Write one log entry with the caller's transaction; return its ``op_id``."""
    op_id = secrets.token_hex(12)
    entry: dict[str, Any] = {
        "source_agent": actor,
        "tool_name": f"memory.{op}",
        "args": {"op_id": op_id, **args},
        "result": {"status": status},
        "success": True,
        "timestamp": iso(now),
    }
    clean, _count = redact_value(entry)
    conn.log_op(op_id, clean)
    return op_id


def _tail_op_ids(path: Path, wanted: int) -> set[str]:
    """``op_id`` of the last ``wanted`` complete entries of the log (fewer if it is shorter)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return set()
    try:
        size = os.fstat(fd).st_size
        start = size
        data = b""
        while start > 0 and data.count(b"\n") <= wanted:
            step = min(_TAIL_BLOCK, start)
            start -= step
            data = os.pread(fd, step, start) + data
    finally:
        os.close(fd)
    lines = data.split(b"\n")
    complete = lines[:-1] if not data.endswith(b"\n") else lines
    found: set[str] = set()
    for raw in complete[-(wanted + 1) :]:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        args = obj.get("args") if isinstance(obj, dict) else None
        if isinstance(args, dict) and isinstance(args.get("op_id"), str):
            found.add(args["op_id"])
    return found


def flush(store: Any, env: Mapping[str, str]) -> str | None:
    """Append every queued entry of a SQLite store to its log; ``None`` on success, else why
    they stay queued.

    A failure here never undoes or hides a committed write: the entries wait for the
    next process, and the caller reports the reason in its ``checks``.
    """
    from korg_bridge.ledger import LedgerWriter

    conn: sqlite3.Connection = store.conn
    try:
        if conn.execute("SELECT 1 FROM oplog_pending LIMIT 1").fetchone() is None:
            return None
    except sqlite3.Error as exc:
        return f"cannot read the queued log entries: {exc}"
    key = env.get(ENV_LEDGER_KEY)
    writer = LedgerWriter(store.folder / OPLOG_NAME, key=key.encode("utf-8") if key else None)
    try:
        with store.write() as tx:
            rows = tx.execute("SELECT seq, op_id, entry FROM oplog_pending ORDER BY seq").fetchall()
            if not rows:
                return None
            present = _tail_op_ids(writer.path, len(rows))
            for seq, op_id, entry in rows:
                if op_id not in present:
                    writer.append(json.loads(entry))
                tx.execute("DELETE FROM oplog_pending WHERE seq = ?", (seq,))
    except (KorgError, OSError, ValueError) as exc:
        message = exc.message if isinstance(exc, KorgError) else str(exc)
        logger.warning("memory operation log %s: %s; the entries stay queued", writer.path, message)
        return message
    return None


def verify_store(target: str, env: Mapping[str, str]) -> Any:
    """The verdict on a memory store's operation log (a :class:`~korg_bridge.ledger.VerifyReport`):
    a ``postgresql://`` URL's chain for the tenant of ``env``, or the ``memory-ops.jsonl`` beside a
    SQLite store at path ``target``.

    Raises:
        ConfigError: a team store without a tenant or unusable as it is; a SQLite store with no log.
        NetworkError: the server cannot be reached.
    """
    from korg_bridge.errors import ConfigError
    from korg_bridge.ledger import verify_file
    from korg_bridge.recall.memory.backend import ENV_STORE, location

    key = env.get(ENV_LEDGER_KEY)
    where = location({**env, ENV_STORE: target})
    if where.url is not None:
        from korg_bridge.recall.memory.pg.oplog import verify
        from korg_bridge.recall.memory.pg.store import PgStore

        with PgStore.open(where.url, env) as store, store.reading() as tx:
            return verify(tx, key.encode("utf-8") if key else None, f"{store.label} (tenant {store.tenant})")
    assert where.path is not None
    log = where.path.parent / OPLOG_NAME
    if not log.is_file():
        raise ConfigError(f"no operation log beside the memory store {where.path} ({log} does not exist).")
    return verify_file(log, key.encode("utf-8") if key else None)
