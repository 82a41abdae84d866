"""``remember``, ``revise``, ``restore`` and approval: each one transaction, logged, mirrored.

Shape of every write here:

1. refuse early what the approval mode forbids (``KORG_RECALL_WRITES=off``);
2. validate and prepare the text (:mod:`.drafts`) -- nothing touched yet;
3. take in hand edits of the mirror folders involved (:mod:`.sync`);
4. one ``BEGIN IMMEDIATE`` transaction: decide against the store as it is now
   (:mod:`.write_policy`), write the version(s), links, vector, and the queued log entry
   (:mod:`.oplog`);
5. after commit, one :class:`~.projections.CommittedChange` handed to
   :func:`~.projections.after_commit`: the log appended, the mirror files, the Claude Code
   write-back when registered, the listeners -- none of which calls back in here.

The result is printed only after step 4 committed, so a memory whose result was
printed survives a crash at any later moment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from korg_bridge.config import ENV_RECALL_WRITES
from korg_bridge.errors import UsageError
from korg_bridge.recall.memory import oplog
from korg_bridge.recall.memory.committed import CommittedChange, Touched
from korg_bridge.recall.memory.drafts import (
    checked_key,
    checked_tags,
    checked_type,
    make_draft,
    prepare_text,
    redact_fields,
)
from korg_bridge.recall.memory.embedding import embed_heads, embed_text, semantic_check, store_vector
from korg_bridge.recall.memory.mirror.readback import sync_mirror
from korg_bridge.recall.memory.normalize import title_of
from korg_bridge.recall.memory.projections import after_commit
from korg_bridge.recall.memory.records import Version, check_id, derived_refusal, is_derived, iso, user_time
from korg_bridge.recall.memory.rows import (
    add_link,
    head,
    required_proposal,
    select_versions,
    supersede,
    update_head,
)
from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.memory.write_policy import SCOPE_SOFT_CAP, decide
from korg_bridge.recall.memory.writes import add_version, apply_decision, live_count

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx

__all__ = ["approve", "remember", "restore", "revise", "validate_revise"]

SETTABLE = ("title", "type", "tags", "pinned", "key", "valid_from", "valid_until", "expires_at")
"""Metadata ``revise(set=…)`` may change."""


def _pending_note(version: Version) -> dict[str, Any]:
    if version.state != "pending":
        return {}
    return {
        "note": (
            f"stored pending approval ({ENV_RECALL_WRITES}=confirm): it is not recalled until a person runs "
            f"`korg-recall memories --approve {version.id}`"
        )
    }


def remember(store: Store, ctx: Context, args: Mapping[str, Any]) -> dict[str, Any]:
    """Store a memory through the write policy; the ``remember`` callable's result.

    Raises:
        ConfigError: writes are off.
        UsageError: bad arguments (see :func:`~.drafts.make_draft`), an unknown ``supersedes``.
    """
    ctx.check_writes("remember")
    scope = ctx.write_scope(args.get("scope"))
    draft, text = make_draft(args, scope, allow_secrets=ctx.allow_secrets, by_person=not ctx.is_agent)
    problems = sync_mirror(store, ctx, (scope,))  # the folder of the scope it writes to: the one it touches
    semantic = semantic_check(store, ctx.env, scope, embed_text(draft.title, draft.body))
    with store.write() as conn:
        decision = decide(conn, draft, semantic.cosines)
        version = apply_decision(conn, ctx, draft, decision)
        if semantic.vector is not None and decision.status != "exists" and version.rowid is not None:
            store_vector(conn, version.rowid, str(semantic.model_id), semantic.dim, semantic.vector)
        if decision.status == "created":
            for similar in decision.similar:
                add_link(conn, version.id, similar.id, "similar", version.recorded_at)
        count = live_count(conn, scope)
        op_id = oplog.record(
            conn,
            actor=ctx.actor,
            op="remember",
            status=decision.status,
            args=oplog.version_args(version),
            now=ctx.now,
        )
    checks: dict[str, Any] = {**decision.checks, "semantic": semantic.note, **text.checks()}
    checks["scope_memories"] = count
    if count > SCOPE_SOFT_CAP:
        checks["soft_cap"] = (
            f"{count} live memories in {scope}, above the soft cap of {SCOPE_SOFT_CAP}: review them with "
            "`memories` and forget what is stale (nothing was refused)"
        )
    touched = Touched.of(version, decision.status, op_id)
    checks.update(
        after_commit(store, CommittedChange.of(ctx, "remember", [touched], mirror_problems=problems))
    )
    result: dict[str, Any] = {
        "id": version.id,
        "version": version.version,
        "status": decision.status,
        "state": version.state,
        "scope": version.scope,
        "similar": [similar.to_dict() for similar in decision.similar],
        "checks": checks,
    }
    if decision.similar and decision.status == "created":
        first = decision.similar[0].id
        result["hint"] = f"if this replaces {first}, pass supersedes={first} or use revise"
    result.update(_pending_note(version))
    return result


def _current(tx: Tx, memory_id: str) -> Version:
    """Raises:
    UsageError: no such memory, or it was purged."""
    current = head(tx, memory_id)
    if current is None:
        raise UsageError(f"no memory {memory_id}. List ids with `korg-recall memories`.")
    if current.state == "purged":
        raise UsageError(
            f"memory {memory_id} was purged; it cannot be changed or restored. Remember it anew."
        )
    return current


def _settles_conflict(tx: Tx, current: Version, named: Any) -> bool:
    """Whether this revise settles a conflict: the memory is in one and ``resolves`` names every
    version in it (a conflict is resolved only by someone who read both texts, never silently).

    Raises:
        UsageError: the memory is in conflict and ``resolves`` does not name exactly its versions,
            or ``resolves`` is given for a memory that is in none.
    """
    heads = sorted(
        version.version
        for version in select_versions(
            tx, "id = ? AND superseded_by IS NULL AND state = 'live' AND conflict = 1", (current.id,)
        )
    )
    named_set = sorted({int(v) for v in named}) if isinstance(named, list) else None
    if len(heads) > 1:
        if named_set == heads:
            return True
        listed = " and ".join(str(v) for v in heads)
        flags = " ".join(f"--resolves {v}" for v in heads)
        raise UsageError(
            f"{current.id} is in conflict: versions {listed} were written on two machines from one version. "
            f"Read both (`korg-recall memories --ids {current.id}`), then revise it naming both: "
            f"resolves={heads} ({flags})."
        )
    if named_set:
        raise UsageError(f"{current.id} is not in conflict: revise it without resolves.")
    return False


def _new_body(current: Version, args: Mapping[str, Any]) -> str | None:
    """The revised body (None: unchanged), from ``content`` or one ``old_text`` → ``new_text``.

    Raises:
        UsageError: both forms given, half of one, or ``old_text`` not found exactly once.
    """
    content, old, new = args.get("content"), args.get("old_text"), args.get("new_text")
    if content is not None and (old is not None or new is not None):
        raise UsageError("pass either content or old_text with new_text, not both.")
    if (old is None) != (new is None):
        raise UsageError("old_text and new_text go together: pass both (new_text may be empty).")
    if content is not None:
        return str(content)
    if old is None:
        return None
    if not old:
        raise UsageError("old_text is empty. Pass the exact text to replace.")
    count = current.body.count(str(old))
    if count == 0:
        raise UsageError(
            f"old_text not found in {current.id} (version {current.version}). Read it with "
            f"memories(ids=[{current.id}]) and pass text that occurs in it."
        )
    if count > 1:
        raise UsageError(
            f"old_text occurs {count} times in {current.id}; include more of the surrounding text so it "
            "matches exactly once."
        )
    return current.body.replace(str(old), str(new), 1)


def _settings(raw: Any) -> dict[str, Any]:
    """``set`` turned into Version fields.

    Raises:
        UsageError: an unknown name or a bad value.
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError('set must be an object such as {"title": "…", "pinned": true}.')
    unknown = sorted(set(raw) - set(SETTABLE))
    if unknown:
        raise UsageError(f"set cannot change {', '.join(unknown)}; it changes {', '.join(SETTABLE)}.")
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name == "type":
            out["type"] = checked_type(value)
        elif name == "tags":
            out["tags"] = checked_tags(value)
        elif name == "key":
            out["key"] = checked_key(value)
        elif name == "pinned":
            if not isinstance(value, bool):
                raise UsageError("set.pinned must be true or false.")
            out["pinned"] = value
        elif name == "title":
            out["title"] = str(value)
        else:
            column = "valid_to" if name == "valid_until" else name
            out[column] = user_time(str(value), name) if value is not None else None
    return out


def validate_revise(args: Mapping[str, Any]) -> None:
    """What can be checked of a ``revise`` call without the store.

    Raises:
        UsageError: a malformed id, bad ``set``, or content together with old_text/new_text.
    """
    check_id(str(args.get("id", "")))
    _settings(args.get("set"))
    if args.get("content") is not None and (
        args.get("old_text") is not None or args.get("new_text") is not None
    ):
        raise UsageError("pass either content or old_text with new_text, not both.")
    if (args.get("old_text") is None) != (args.get("new_text") is None):
        raise UsageError("old_text and new_text go together: pass both (new_text may be empty).")


def revise(store: Store, ctx: Context, args: Mapping[str, Any]) -> dict[str, Any]:
    """Write a new version of a memory (the old one is kept, superseded); ``revise``'s result.

    Raises:
        ConfigError: writes are off.
        UsageError: unknown or purged id, ``expected_version`` not current, bad ``old_text``,
            bad ``set``, a key another memory holds.
    """
    ctx.check_writes("revise")
    memory_id = check_id(str(args.get("id", "")))
    settings = _settings(args.get("set"))
    with store.reading() as tx:
        scope = _current(tx, memory_id).scope
    problems = sync_mirror(store, ctx, (scope, *ctx.visible_scopes))
    with store.write() as conn:
        current = _current(conn, memory_id)
        if is_derived(current):
            raise UsageError(derived_refusal(current))
        expected = args.get("expected_version")
        if _settles_conflict(conn, current, args.get("resolves")):
            pass  # the versions named are the ones in conflict: any of them is a version read
        elif expected is not None and expected != current.version:
            raise UsageError(
                f"{memory_id} is at version {current.version}, not {expected}: it changed since you read it. "
                f"Read it again with memories(ids=[{memory_id}]) and retry with expected_version={current.version}."
            )
        body = _new_body(current, args)
        changes: dict[str, Any] = {}
        seen: set[str] = set()  # a secret in the text and in a tag or the reason counts once
        meta, secrets = redact_fields(
            {name: settings[name] for name in ("key", "tags") if name in settings}
            | {"reason": args.get("reason")},
            allow_secrets=ctx.allow_secrets,
            seen=seen,
        )
        if "tags" in meta:
            meta["tags"] = checked_tags(meta["tags"])  # two tags may be one once redacted
        text_checks: dict[str, Any] = {"secrets_redacted": secrets} if secrets else {}
        if body is not None or "title" in settings:
            # A title derived from the old body follows the new one; a title someone chose stays.
            derived = current.title == title_of(current.body)
            title = settings.pop("title", None) or (None if body is not None and derived else current.title)
            text = prepare_text(
                body if body is not None else current.body,
                title,
                allow_secrets=ctx.allow_secrets,
                by_person=not ctx.is_agent,
                seen=seen,
            )
            changes.update(body=text.body, title=text.title, content_hash=text.content_hash, trust=text.trust)
            text_checks = text.checks()
            text_checks["secrets_redacted"] += secrets
        reason = meta.pop("reason")
        changes.update(settings)
        changes.update(meta)
        differs = {name: value for name, value in changes.items() if getattr(current, name) != value}
        # A memory in conflict (sync) is resolved by any revise, even one keeping the head's text.
        if not differs and current.state == "live" and not current.conflict:
            return {
                "id": memory_id,
                "version": current.version,
                "status": "unchanged",
                "state": current.state,
            }
        key = changes.get("key", current.key)
        if key is not None and "key" in differs:
            holder = conn.execute(
                "SELECT id FROM memory WHERE scope = ? AND key = ? AND superseded_by IS NULL AND state = 'live' "
                "AND id <> ?",
                (current.scope, key, memory_id),
            ).fetchone()
            if holder is not None:
                raise UsageError(
                    f"key {key!r} is held by {holder[0]} in {current.scope}; revise that one instead."
                )
        reason = reason or ("restored by revise" if current.state == "retired" else "revised")
        version = add_version(conn, ctx, current, **changes, reason=str(reason)[:500])
        op_id = oplog.record(
            conn,
            actor=ctx.actor,
            op="revise",
            status="revised",
            args=oplog.version_args(version),
            now=ctx.now,
        )
    change = CommittedChange.of(
        ctx, "revise", [Touched.of(version, "revised", op_id)], mirror_problems=problems
    )
    checks = {**text_checks, **after_commit(store, change)}
    embed_heads(store, ctx.env, [memory_id])  # its vector, when a model is present (never fails the write)
    result = {
        "id": memory_id,
        "version": version.version,
        "previous_version": current.version,
        "status": "revised",
        "state": version.state,
        "checks": checks,
    }
    result.update(_pending_note(version))
    return result


def restore(store: Store, ctx: Context, memory_id: str) -> dict[str, Any]:
    """Bring a retired memory back as a new live version (its retirement stays in the history).

    Raises:
        ConfigError: writes are off.
        UsageError: unknown or purged id.
    """
    ctx.check_writes("restore")
    memory_id = check_id(memory_id)
    with store.reading() as tx:
        scope = _current(tx, memory_id).scope
    problems = sync_mirror(store, ctx, (scope,))
    with store.write() as conn:
        current = _current(conn, memory_id)
        if current.state != "retired":
            return {
                "id": memory_id,
                "version": current.version,
                "status": "unchanged",
                "state": current.state,
            }
        version = add_version(conn, ctx, current, reason="restored")
        op_id = oplog.record(
            conn,
            actor=ctx.actor,
            op="restore",
            status="restored",
            args=oplog.version_args(version),
            now=ctx.now,
        )
    touched = Touched.of(version, "restored", op_id)
    checks = after_commit(store, CommittedChange.of(ctx, "restore", [touched], mirror_problems=problems))
    embed_heads(store, ctx.env, [memory_id])  # the vector its text had before, or a new one
    return {
        "id": memory_id,
        "version": version.version,
        "status": "restored",
        "state": version.state,
        "checks": checks,
    }


def approve(store: Store, ctx: Context, ids: Sequence[str]) -> dict[str, Any]:
    """Make pending proposals live (``memories --approve``, a person's act on the command line).

    All of ``ids`` or none: one transaction.

    Raises:
        ConfigError: writes are off.
        UsageError: an id with nothing pending.
    """
    ctx.check_writes("approve")
    wanted = [check_id(raw) for raw in ids]
    approved: list[dict[str, Any]] = []
    touched: list[Touched] = []
    with store.write() as conn:
        for memory_id in wanted:
            proposal = required_proposal(conn, memory_id)
            update_head(conn, proposal, state="live")
            supersede(conn, memory_id, proposal.version, iso(ctx.now))
            op_id = oplog.record(
                conn,
                actor=ctx.actor,
                op="approve",
                status="approved",
                args=oplog.version_args(proposal),
                now=ctx.now,
            )
            approved.append({"id": memory_id, "version": proposal.version})
            touched.append(Touched.of(proposal, "approved", op_id, state="live"))
    checks = after_commit(store, CommittedChange.of(ctx, "approve", touched))
    return {"approved": approved, "checks": checks}
