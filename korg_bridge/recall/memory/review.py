"""A person's curation acts besides approving: rejecting a proposal, and marking a memory reviewed.

Both are writes like those of :mod:`.operations` -- one transaction, an operation-log entry by
the acting person, the mirror brought in line after commit -- so the console and any later
command line do the same thing.

**Reject** ends a proposal held by ``KORG_RECALL_WRITES=confirm`` without making it live. The
proposal row stays (a rejected text is history, and automation never destroys a memory):

* a proposed *change* to a memory that has a live or retired version is marked superseded by
  that version -- it drops out of the heads, and the memory reads as before;
* a proposed *new* memory (nothing but the proposal) is retired: hidden, and restorable by a
  person with ``restore``.

**Reviewed** appends ``{"actor", "at", "source": {"kind": "review"}}`` to the current version's
provenance (a lineage-level column, as a merge's provenance grows), so no schema changes and an
export keeps it. A memory is *due for review* when neither it changed nor anyone reviewed it for
:data:`REVIEW_AFTER_DAYS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory import oplog
from korg_bridge.recall.memory.committed import CommittedChange, Touched
from korg_bridge.recall.memory.projections import after_commit
from korg_bridge.recall.memory.records import Version, check_id, iso, parse_iso
from korg_bridge.recall.memory.rows import head, required_proposal, select_versions, update_head

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store
    from korg_bridge.recall.memory.scopes import Context

__all__ = [
    "REVIEW_AFTER_DAYS",
    "REVIEW_KIND",
    "due_for_review",
    "last_reviewed",
    "mark_reviewed",
    "reject",
    "reviewed_epoch",
]

REVIEW_AFTER_DAYS = 90
"""A memory nobody changed or reviewed for this long is listed as due for review: long enough that
a busy store does not list everything, short enough that a quarter's stale facts surface."""
REVIEW_KIND = "review"


def reject(store: Store, ctx: Context, ids: Sequence[str]) -> dict[str, Any]:
    """End the pending proposals of ``ids`` without applying them (all or none: one transaction).

    Raises:
        ConfigError: writes are off.
        UsageError: a malformed id, or an id with nothing pending.
    """
    ctx.check_writes("reject")
    wanted = [check_id(raw) for raw in ids]
    now = iso(ctx.now)
    rejected: list[dict[str, Any]] = []
    touched: list[Touched] = []
    with store.write() as conn:
        for memory_id in wanted:
            proposal = required_proposal(conn, memory_id)
            current = head(conn, memory_id)
            if current is not None and current.version != proposal.version:
                update_head(conn, proposal, superseded_by=current.version, superseded_at=now)
                outcome = "dropped"
            else:
                update_head(conn, proposal, state="retired", retired_at=now)
                outcome = "retired"
            op_id = oplog.record(
                conn,
                actor=ctx.actor,
                op="reject",
                status="rejected",
                args={**oplog.version_args(proposal), "outcome": outcome},
                now=ctx.now,
            )
            rejected.append({"id": memory_id, "version": proposal.version, "outcome": outcome})
            after = current if outcome == "dropped" and current is not None else proposal
            state = after.state if outcome == "dropped" else "retired"
            touched.append(Touched.of(after, "rejected", op_id, state=state))
    checks = after_commit(store, CommittedChange.of(ctx, "reject", touched))
    return {"rejected": rejected, "checks": checks}


def last_reviewed(version: Version) -> str | None:
    """When a person last marked ``version`` reviewed (ISO time), or None."""
    return _latest_review(version.provenance)


def _latest_review(provenance: object) -> str | None:
    entries = provenance if isinstance(provenance, list) else []
    times = [
        str(entry.get("at"))
        for entry in entries
        if isinstance(entry, dict)
        and isinstance(entry.get("source"), dict)
        and entry["source"].get("kind") == REVIEW_KIND
    ]
    return max(times) if times else None


def mark_reviewed(store: Store, ctx: Context, memory_id: str) -> dict[str, Any]:
    """Record that a person read ``memory_id`` and found it right (no new version).

    Raises:
        ConfigError: writes are off.
        UsageError: a malformed, unknown or purged id.
    """
    ctx.check_writes("review")
    memory_id = check_id(memory_id)
    with store.write() as conn:
        current = head(conn, memory_id)
        if current is None or current.state == "purged":
            raise UsageError(f"no memory {memory_id} to review. List ids with `korg-recall memories`.")
        entry = {"actor": ctx.actor, "at": iso(ctx.now), "source": {"kind": REVIEW_KIND}}
        update_head(conn, current, provenance=[*current.provenance, entry])
        op_id = oplog.record(
            conn,
            actor=ctx.actor,
            op="review",
            status="reviewed",
            args=oplog.version_args(current),
            now=ctx.now,
        )
    checks = after_commit(store, CommittedChange.of(ctx, "review", [Touched.of(current, "reviewed", op_id)]))
    return {"id": memory_id, "version": current.version, "status": "reviewed", "checks": checks}


def due_for_review(
    store: Store,
    *,
    scopes: Sequence[str] | None,
    now: float,
    days: int = REVIEW_AFTER_DAYS,
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[Version], int]:
    """Live memories (in ``scopes``; None: every scope) neither changed nor reviewed for ``days``,
    the longest untouched first; and how many there are in all."""
    cutoff = now - days * 86_400
    where = "superseded_by IS NULL AND state = 'live' AND recorded_at < ?"
    params: list[object] = [iso(cutoff)]
    if scopes is not None:
        where += f" AND scope IN ({', '.join('?' * len(scopes))})" if scopes else " AND 0 = 1"
        params += list(scopes)
    with store.reading() as conn:
        # Keys and provenance first (small), the page's whole rows after: a large store's bodies
        # never pass through Python to be dropped.
        candidates = conn.execute(
            f"SELECT rowid, provenance FROM memory WHERE {where} ORDER BY recorded_at, id", params
        )
        due = [int(rowid) for rowid, provenance in candidates if (reviewed_epoch(provenance) or 0.0) < cutoff]
        wanted = due[offset : offset + limit]
        rows = {
            v.rowid: v
            for v in select_versions(conn, f"rowid IN ({', '.join('?' * len(wanted)) or 'NULL'})", wanted)
        }
    return [rows[r] for r in wanted if r in rows], len(due)


def reviewed_epoch(provenance: object) -> float | None:
    """When a stored provenance column (JSON text) says a person last reviewed it (epoch)."""
    if not provenance or REVIEW_KIND not in str(provenance):
        return None
    from korg_bridge.recall.memory import storable

    try:
        when = _latest_review(storable.loads(str(provenance)))
        return parse_iso(when) if when is not None else None
    except ValueError:
        return None
