"""The operation log: every memory write, as a korg-ledger@v1 entry, hash-chained.

:func:`record` builds the entry (ids, versions, counts and hashes, never text) and
hands it to the transaction (:meth:`~.backend.protocols.Tx.log_op`). A team store appends
it to its ``memory_ops`` table right there, chained per tenant (:mod:`.backend.pg.oplog`);
a SQLite store queues it and appends it to a file after commit, as follows.

After commit, :func:`flush` -- the first projection of a write
(:mod:`~korg_bridge.recall.memory.projections`) -- appends what the transaction queued.
The SQLite store's file, its anchor in the store and its checks are
:mod:`korg_bridge.recall.memory.backend.sqlite.oplogfile`.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.safety import redact_value

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx
    from korg_bridge.recall.memory.committed import CommittedChange

__all__ = ["flush", "record", "version_args"]

logger = logging.getLogger(__name__)


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


def flush(store: Store, change: CommittedChange) -> dict[str, Any]:
    """The log's projection: append the entries the committed transaction queued (a team store
    appended them in it already); its check says whether they are in the log or still queued."""
    queued = store.flush_log(change.ctx.env)
    return {"oplog": "appended" if queued is None else f"queued: {queued}"}
