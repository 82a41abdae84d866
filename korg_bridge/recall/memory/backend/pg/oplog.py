"""The team store's operation log: table ``memory_ops``, one korg-ledger@v1 chain per tenant.

Each entry is the line a :class:`korg_bridge.ledger.chain.LedgerWriter` would append to a
file -- ``schema_version``, ``seq_id``, the fields of :func:`..oplog.record` (ids,
versions, counts and hashes, never text), ``prev_hash``, ``entry_hash`` (SHA-256 of
:func:`korg_bridge.ledger.chain.preimage`, or HMAC-SHA256 with ``KORG_LEDGER_KEY``) --
stored as JSON text beside its ``seq_id``. It is written *inside* the operation's
transaction, after the tenant's write lock was taken (:mod:`.store`), so the
entry exists exactly when the operation does and two writers never fork the
chain; the application role may insert and read it, never update or delete it.

:func:`verify` walks a tenant's chain the way ``korg-recall verify --path`` walks a
file: contiguous ``seq_id`` from 1 (a deleted row is a gap), each ``prev_hash`` the
previous ``entry_hash``, each ``entry_hash`` recomputed, and the last entry the one the
tenant's ``memory_ops_head`` row names (rows deleted at the end are missing, not a shorter
chain). It is what ``korg-recall verify --store URL`` prints.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from korg_bridge.ledger.chain import GENESIS_HASH, VerifyReport, entry_hash, preimage

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["BATCH", "append", "verify"]

SCHEMA_VERSION = "1.0"
BATCH = 2000
"""Entries read per query while verifying: a chain of millions never sits in memory at once."""


def _span(first: int, last: int) -> str:
    return f"seq {first}" if first == last else f"seq {first}-{last}"


def _head(tx: Tx) -> tuple[int, str] | None:
    """``(seq_id, entry_hash)`` of the last entry appended for the tenant, as ``memory_ops_head`` keeps it."""
    row = tx.execute("SELECT seq_id, entry_hash FROM memory_ops_head").fetchone()
    return (int(row[0]), str(row[1])) if row is not None else None


def append(tx: Tx, entry: Mapping[str, Any], key: bytes | None) -> dict[str, Any]:
    """Chain ``entry`` onto the tenant's log (the caller's transaction holds the tenant's lock).

    The chain goes on from the head the tenant's ``memory_ops_head`` row keeps, not from the
    table's last row: if rows at the end were deleted, the new entry's ``seq_id`` and
    ``prev_hash`` leave the gap where :func:`verify` keeps finding it.
    """
    row = tx.execute("SELECT seq_id, entry_hash FROM memory_ops ORDER BY seq_id DESC LIMIT 1").fetchone()
    seq, prev = (int(row[0]), str(row[1])) if row is not None else (0, GENESIS_HASH)
    kept = _head(tx)
    if kept is not None and kept[0] > seq:
        seq, prev = kept
    event: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "seq_id": seq + 1}
    event.update((name, value) for name, value in entry.items() if name != "schema_version")
    event["prev_hash"] = prev
    event["entry_hash"] = entry_hash(event, key)
    tx.execute(
        "INSERT INTO memory_ops (seq_id, entry, entry_hash) VALUES (?, ?, ?)",
        (seq + 1, json.dumps(event), event["entry_hash"]),
    )
    tx.execute(
        "INSERT INTO memory_ops_head (seq_id, entry_hash) VALUES (?, ?) ON CONFLICT (tenant_id) "
        "DO UPDATE SET seq_id = excluded.seq_id, entry_hash = excluded.entry_hash",
        (seq + 1, event["entry_hash"]),
    )
    return event


def verify(tx: Tx, key: bytes | None, label: str) -> VerifyReport:
    """Check the tenant's chain, every problem named by ``seq N``; never raises on bad content."""
    errors: list[str] = []
    events = 0
    expected_seq = 1
    expected_prev = GENESIS_HASH
    tip: str | None = None
    after = 0
    while True:
        rows = tx.execute(
            "SELECT seq_id, entry, entry_hash FROM memory_ops WHERE seq_id > ? ORDER BY seq_id LIMIT ?",
            (after, BATCH),
        ).fetchall()
        if not rows:
            break
        for seq_id, text, column_hash in rows:
            seq_id = int(seq_id)
            after = seq_id
            events += 1
            label_seq = f"seq {seq_id}"
            if seq_id > expected_seq:
                errors.append(f"{_span(expected_seq, seq_id - 1)} missing (entries were deleted)")
            elif seq_id != expected_seq:
                errors.append(f"{label_seq}: expected seq {expected_seq} (entries were deleted or inserted)")
            expected_seq = seq_id + 1
            try:
                obj = json.loads(text)
            except ValueError:
                errors.append(f"{label_seq}: not a JSON object (malformed JSON)")
                expected_prev = str(column_hash)
                continue
            if not isinstance(obj, dict) or obj.get("seq_id") != seq_id:
                errors.append(f"{label_seq}: the entry's seq_id differs from its row's")
            claimed = obj.get("entry_hash") if isinstance(obj, dict) else None
            if claimed != column_hash:
                errors.append(f"{label_seq}: the entry's entry_hash differs from its row's")
            if isinstance(obj, dict) and obj.get("prev_hash") != expected_prev:
                errors.append(
                    f"{label_seq}: prev_hash mismatch (broken link: an entry was inserted, deleted or reordered)"
                )
            if isinstance(obj, dict) and isinstance(claimed, str):
                data = preimage(obj)
                actual = (
                    hashlib.sha256(data).hexdigest()
                    if key is None
                    else hmac.new(key, data, hashlib.sha256).hexdigest()
                )
                if not hmac.compare_digest(actual, claimed):
                    hint = (
                        "or the wrong key" if key is not None else "or a keyed chain checked without its key"
                    )
                    errors.append(f"{label_seq}: entry_hash mismatch (content tampered, {hint})")
            tip = str(claimed) if isinstance(claimed, str) else str(column_hash)
            expected_prev = tip
    kept = _head(tx)
    if kept is not None and (expected_seq - 1, tip) != kept:
        last = expected_seq - 1
        if last < kept[0]:
            errors.append(
                f"{_span(last + 1, kept[0])} missing: the log ends at seq {last}, but entries were appended "
                f"up to seq {kept[0]}"
            )
        else:
            errors.append(
                f"seq {kept[0]}: the log does not end with the entry last appended (rows were changed)"
            )
    return VerifyReport(path=label, events=events, intact=not errors, tip_entry_hash=tip, errors=errors)
