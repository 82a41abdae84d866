"""The building blocks every write shares: new versions and proposals.

Versions are immutable once written, except for the lineage-level columns of
the current row (state, provenance, use). A new version *supersedes* the
current rows of its lineage -- unless it is a **proposal** (``pending``, under
``KORG_RECALL_WRITES=confirm``): a proposal supersedes nothing but an older
proposal, so retrieval keeps showing the live version until a person approves.

What happens after the transaction commits is not here: the operation hands what it
committed to :func:`~.projections.after_commit` (the log, the mirror, the write-back, the
listeners), whose failures are reported in ``checks`` and repaired by the next call,
never raised over a committed write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.records import Version, iso, new_id
from korg_bridge.recall.memory.rows import insert_version, next_version, supersede, update_head
from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.memory.write_policy import Decision, Draft

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["add_version", "apply_decision", "decided_version", "live_count", "provenance_entry", "version_of"]


def provenance_entry(ctx: Context, source: dict[str, Any] | None) -> dict[str, Any]:
    from korg_bridge.recall.sync.state import machine_id_of

    entry = {"actor": ctx.actor, "at": iso(ctx.now), "source": source}
    machine = machine_id_of(ctx.env)  # a store that syncs names the machine a fact was told on
    if machine is not None:
        entry["machine"] = machine
    return entry


def version_of(ctx: Context, base: Version, number: int, **changes: Any) -> Version:
    """The row :func:`add_version` writes as version ``number`` of ``base``'s lineage, built
    without a store (an import plans its rows before it takes the store's write lock)."""
    fields = {
        name: getattr(base, name)
        for name in (
            "id", "scope", "type", "title", "body", "content_hash", "trust", "key", "tags", "pinned",
            "valid_from", "valid_to", "expires_at", "use_count", "last_used_at", "source", "provenance",
        )
    }  # fmt: skip
    fields.update(changes)
    return Version(
        version=number,
        actor=ctx.actor,
        recorded_at=iso(ctx.now),
        state="pending" if ctx.holds_for_approval else "live",
        **fields,
    )


def add_version(conn: Tx, ctx: Context, base: Version, **changes: Any) -> Version:
    """A new version of ``base``'s lineage: ``base``'s fields, ``changes`` applied, written by
    ``ctx.actor`` now; a proposal when ``ctx`` holds writes for approval.

    ``base`` is the version the change was made to (the current one).
    """
    version = version_of(ctx, base, next_version(conn, base.id), **changes)
    supersede(conn, base.id, version.version, version.recorded_at, pending_only=ctx.holds_for_approval)
    return insert_version(conn, version)


def decided_version(ctx: Context, draft: Draft, decision: Decision, number: int = 1) -> Version:
    """The row :func:`apply_decision` writes for a ``created``, ``merged`` or ``superseded``
    decision (``number``: the version it gets in the target's lineage), built without a store."""
    entry = provenance_entry(ctx, draft.source)
    target = decision.target
    if decision.status == "created" or target is None:
        return Version(
            id=new_id(),
            version=1,
            scope=draft.scope,
            type=draft.type,
            title=draft.title,
            body=draft.body,
            content_hash=draft.content_hash,
            actor=ctx.actor,
            recorded_at=iso(ctx.now),
            state="pending" if ctx.holds_for_approval else "live",
            trust=draft.trust,
            key=draft.key,
            tags=draft.tags,
            pinned=draft.pinned,
            valid_from=draft.valid_from,
            valid_to=draft.valid_to,
            source=draft.source,
            provenance=[entry],
        )
    merged = decision.status == "merged"
    tags = (
        [*target.tags, *(t for t in draft.tags if t not in target.tags)]
        if merged
        else draft.tags or target.tags
    )
    reason = (
        "merged near duplicate"
        if merged
        else ("key upsert" if draft.key else f"supersedes v{target.version}")
    )
    return version_of(
        ctx,
        target,
        number,
        type=draft.type,
        title=draft.title,
        body=draft.body,
        content_hash=draft.content_hash,
        trust=draft.trust,
        key=draft.key or target.key,
        tags=tags,
        pinned=draft.pinned or target.pinned,
        valid_from=draft.valid_from,
        valid_to=draft.valid_to,
        source=draft.source,
        provenance=[*target.provenance, entry],
        reason=reason,
    )


def apply_decision(conn: Tx, ctx: Context, draft: Draft, decision: Decision) -> Version:
    """Write what :func:`~.policy.decide` decided; return the version the caller gets back."""
    target = decision.target
    if decision.status == "exists" and target is not None:
        update_head(conn, target, provenance=[*target.provenance, provenance_entry(ctx, draft.source)])
        return target
    if decision.status == "created" or target is None:
        return insert_version(conn, decided_version(ctx, draft, decision))
    version = decided_version(ctx, draft, decision, next_version(conn, target.id))
    supersede(conn, target.id, version.version, version.recorded_at, pending_only=ctx.holds_for_approval)
    return insert_version(conn, version)


def live_count(conn: Tx, scope: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM memory WHERE scope = ? AND superseded_by IS NULL AND state = 'live'", (scope,)
    ).fetchone()
    return int(row[0])
