"""Reading the mirror back: hand edits become versions, hand-made files become memories.

Run before every memory operation on the scopes it touches
(:func:`sync_mirror`). For each change :func:`~.mirror.detect` found:

* an **edit** of a file whose front matter ``version`` is the current one ->
  a new version, actor ``user``, reason "mirror edit";
* an edit made from an **older** version (it raced a newer write) -> still
  its own new version, newest so it wins, flagged ``conflict`` -- neither text
  is lost: the version it raced stays in the history;
* a **new** file without an ``id`` -> a new memory through the write policy
  (actor ``user``), remembered by path; korg-recall never rewrites it;
* an **unparseable** file -> left alone, recorded so ``stats`` reports it;
* a **deleted** file of a live memory -> written again (use ``forget`` to forget).

Each change is applied in its own transaction that first re-checks the file's
recorded hash, so two processes scanning at once import an edit once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory import mirror
from korg_bridge.recall.memory.mirror import Change
from korg_bridge.recall.memory.records import MEMORY_TYPES, check_id
from korg_bridge.recall.memory.rows import head, mark_dirty
from korg_bridge.recall.memory.scopes import Context

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Store, Tx
    from korg_bridge.recall.memory.store import SqliteStore

# Taking a change in needs the write machinery (drafts, policy, writes, the log); a settled mirror
# -- nearly every call, recall's included -- does not, so those modules are imported where used.

__all__ = ["sync_mirror"]

logger = logging.getLogger(__name__)


def _unique(scopes: Iterable[str]) -> list[str]:
    out: list[str] = []
    for scope in scopes:
        if scope not in out:
            out.append(scope)
    return out


def sync_mirror(store: Store, ctx: Context, scopes: Iterable[str]) -> list[str]:
    """Import what changed in the mirror folders of ``scopes``, then write what is missing.

    Returns problems worth reporting (files left alone and why). Does nothing when the
    mirror is off (``KORG_RECALL_MIRROR=0``, and always for a team store, which has no
    folder of files) or writes are off.
    """
    if not ctx.mirror or ctx.writes == "off" or store.kind != "sqlite":
        return []
    return _sync(cast("SqliteStore", store), ctx, scopes)


def _sync(store: SqliteStore, ctx: Context, scopes: Iterable[str]) -> list[str]:
    wanted = _unique(scopes)
    root = store.folder / mirror.MIRROR_NAME
    mirror.clean_tmp(root, ctx.now)
    problems: list[str] = []
    # A person editing a file is the user, whoever runs this call; their edits are never held.
    person = dataclasses.replace(ctx, actor="user", is_agent=False)
    for change in mirror.detect(store.conn, root, wanted):
        problem = _apply(store, person, root, change)
        if problem:
            logger.warning("memory mirror: %s", problem)
            problems.append(problem)
    problems.extend(mirror.reconcile(store))
    return problems


def _apply(store: SqliteStore, ctx: Context, root: Path, change: Change) -> str | None:
    with store.write() as conn:
        if change.state is not None:
            row = conn.execute("SELECT sha256 FROM mirror_files WHERE path = ?", (change.path,)).fetchone()
            if row is not None and row[0] == change.state.sha256 and change.kind != "touched":
                return None  # another process took this change in already
        if change.kind == "vanished":
            mirror.forget_path(conn, change.path)
            if change.memory_id:
                mark_dirty(conn, change.memory_id)  # its memory may need a file again
            return None
        assert change.state is not None
        if change.kind == "touched":
            mirror.record(
                conn, change.path, change.scope, change.memory_id, change.recorded_version, change.origin or "ours",
                change.state,
            )  # fmt: skip
            return None
        if change.parsed is None:
            mirror.record(
                conn, change.path, change.scope, change.memory_id, None, "unparseable", change.state
            )
            return f"{root / change.path} cannot be read ({change.error}); left as it is"
        target_id = change.memory_id if change.origin in ("ours", "user") else None
        if target_id is None:
            target_id = _id_in(change)
        current = head(conn, target_id) if target_id else None
        if current is None or current.state == "purged":
            return _import_new(conn, ctx, root, change)
        return _import_edit(conn, ctx, root, change, current)


def _id_in(change: Change) -> str | None:
    assert change.parsed is not None
    raw = change.parsed.meta.get("id")
    if not isinstance(raw, str):
        return None
    try:
        return check_id(raw)
    except UsageError:
        return None


def _fields(
    change: Change, fallback_type: str, fallback_tags: list[str], ctx: Context
) -> tuple[dict[str, object], str | None]:
    """The memory fields a mirror file states, or why it cannot be taken in."""
    from korg_bridge.recall.memory.drafts import checked_tags, prepare_text, title_from

    assert change.parsed is not None
    meta = change.parsed.meta
    try:
        text = prepare_text(
            change.parsed.body, title_from(meta.get("title"), change.parsed.body),
            allow_secrets=ctx.allow_secrets, what="the file's body",
        )  # fmt: skip
        tags = checked_tags(meta["tags"]) if isinstance(meta.get("tags"), list) else fallback_tags
    except UsageError as exc:
        return {}, exc.message
    kind = meta.get("type")
    return {
        "body": text.body,
        "title": text.title,
        "content_hash": text.content_hash,
        "trust": text.trust,
        "tags": tags,
        "type": kind if kind in MEMORY_TYPES else fallback_type,
    }, None


def _import_edit(conn: Tx, ctx: Context, root: Path, change: Change, current: object) -> str | None:
    from korg_bridge.recall.memory import oplog
    from korg_bridge.recall.memory.records import Version
    from korg_bridge.recall.memory.writes import add_version

    assert isinstance(current, Version) and change.state is not None and change.parsed is not None
    origin = "ours" if change.path.endswith(mirror.file_name(current)) and change.origin != "user" else "user"
    fields, error = _fields(change, current.type, current.tags, ctx)
    if error:
        mirror.record(conn, change.path, change.scope, current.id, None, "unparseable", change.state)
        return f"{root / change.path} cannot be taken in ({error}); left as it is"
    same = all(getattr(current, name) == value for name, value in fields.items() if name != "trust")
    if same:
        mirror.record(conn, change.path, change.scope, current.id, current.version, origin, change.state)
        return None
    stated = change.parsed.meta.get("version")
    conflict = isinstance(stated, int) and stated < current.version
    version = add_version(
        conn,
        ctx,
        current,
        **fields,
        reason="mirror edit (conflict)" if conflict else "mirror edit",
        conflict=conflict,
    )
    # Recorded at the version it was edited from, so the file is rewritten with the new front matter.
    mirror.record(conn, change.path, change.scope, current.id, current.version, origin, change.state)
    oplog.record(
        conn,
        actor=ctx.actor,
        op="mirror_edit",
        status="conflict" if conflict else "revised",
        args={**oplog.version_args(version), "file": change.path},
        now=ctx.now,
    )
    return None


def _import_new(conn: Tx, ctx: Context, root: Path, change: Change) -> str | None:
    from korg_bridge.recall.memory import oplog
    from korg_bridge.recall.memory.policy import Draft, decide
    from korg_bridge.recall.memory.writes import apply_decision

    assert change.state is not None and change.parsed is not None
    fields, error = _fields(change, "note", [], ctx)
    if error:
        mirror.record(conn, change.path, change.scope, None, None, "unparseable", change.state)
        return f"{root / change.path} cannot be taken in ({error}); left as it is"
    draft = Draft(
        body=str(fields["body"]),
        title=str(fields["title"]),
        title_given=True,
        type=str(fields["type"]),
        scope=change.scope,
        content_hash=str(fields["content_hash"]),
        trust=str(fields["trust"]),
        tags=list(fields["tags"]),  # type: ignore[call-overload]
        source={"file": change.path},
    )
    decision = decide(conn, draft, {})
    version = apply_decision(conn, ctx, draft, decision)
    mirror.record(conn, change.path, change.scope, version.id, version.version, "user", change.state)
    oplog.record(
        conn,
        actor=ctx.actor,
        op="mirror_import",
        status=decision.status,
        args={**oplog.version_args(version), "file": change.path},
        now=ctx.now,
    )
    return None
