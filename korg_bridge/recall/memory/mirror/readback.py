"""Reading the mirror back: hand edits become versions, hand-made files become memories.

Run before every memory operation on the scopes it touches (:func:`sync_mirror`).
:func:`~.mirror.detect` lists the files whose size or mtime moved; each one is then
looked at and taken in under the store's write lock (:func:`~.mirror.look`), in its own
transaction, so what a file means never depends on timing:

* bytes equal to what korg-recall last wrote there -> not an edit (only the stat is kept);
* an **edit** of a file whose front matter ``version`` is the current one -> a new version,
  reason "mirror edit"; the file is korg-recall's again and is rewritten with the new
  front matter (and renamed when the title changed);
* an edit made from an **older** version (it raced a newer write) -> a **conflict
  proposal**: a pending version flagged ``conflict``, never the head. The head stays
  what the last write made it; the file is rewritten to show it; the proposal waits for a
  person (``memories --approve ID``, or edit the file again) -- neither text is lost;
* a file whose content is exactly a version it names (an older rendering: a crash
  leftover, a file restored from git) -> not an edit;
* a **new** file without an ``id`` -> a new memory through the write policy, remembered by
  path; korg-recall never rewrites it;
* a file naming a **purged** memory, or holding exactly a purged text -> never taken in
  (a purge is not undone by a file left behind); reported on every scan until deleted;
* an **unparseable** file, a FIFO, a link -> left alone, recorded so ``stats`` reports it;
* a **deleted** file of a live memory -> written again (use ``forget`` to forget).

Who is the writer? With ``KORG_RECALL_WRITES=auto`` whoever can write the folder is
trusted as the user (actor ``user``). With ``confirm`` a file korg-recall did not write
may be an agent's, so every change taken in is held as a proposal by actor ``mirror``
until a person runs ``korg-recall memories --approve ID``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from korg_bridge.config import ENV_RECALL_WRITES
from korg_bridge.errors import UsageError
from korg_bridge.recall.memory.committed import CommittedChange, Touched
from korg_bridge.recall.memory.mirror import files as mirror
from korg_bridge.recall.memory.mirror.files import Change
from korg_bridge.recall.memory.projections import notify
from korg_bridge.recall.memory.records import MEMORY_TYPES, Version, check_id, derived_refusal, is_derived
from korg_bridge.recall.memory.rows import head, mark_dirty, select_versions
from korg_bridge.recall.memory.scopes import Context, mirror_dir_of
from korg_bridge.recall.paths import MIRROR_NAME

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore

# Taking a change in needs the write machinery (drafts, policy, writes, the log); a settled mirror
# -- nearly every call, recall's included -- does not, so those modules are imported where used.

__all__ = ["MIRROR_ACTOR", "sync_mirror"]

logger = logging.getLogger(__name__)

MIRROR_ACTOR = "mirror"
"""The actor of a change taken in under ``KORG_RECALL_WRITES=confirm``: who made it is not known."""


def _unique(scopes: Iterable[str]) -> list[str]:
    out: list[str] = []
    for scope in scopes:
        if scope not in out:
            out.append(scope)
    return out


def sync_mirror(store: Store, ctx: Context, scopes: Iterable[str]) -> list[str]:
    """Import what changed in the mirror folders of ``scopes``, then write what is missing.

    Returns problems worth reporting (files left alone and why, changes held for approval).
    Does nothing when the mirror is off (``KORG_RECALL_MIRROR=0``, and always for a team
    store, which has no folder of files) or writes are off.
    """
    if not ctx.mirror or ctx.writes == "off" or store.kind != "sqlite":
        return []
    return _sync(cast("SqliteStore", store), ctx, scopes)


def _sync(store: SqliteStore, ctx: Context, scopes: Iterable[str]) -> list[str]:
    root = store.folder / MIRROR_NAME
    mirror.clean_tmp(root, ctx.now)
    candidates, problems = mirror.detect(store.conn, root, _unique(scopes))
    for problem in problems:
        logger.warning("memory mirror: %s", problem)
    for path, scope in candidates:
        heard: list[CommittedChange] = []
        with store.write() as conn:
            found = _apply(conn, ctx, root, mirror.look(conn, root, path, scope), heard)
        for change in heard:  # committed: the listeners hear of a hand edit as of any write
            notify(change)
        if found:
            logger.warning("memory mirror: %s", found)
            problems.append(found)
    problems.extend(mirror.reconcile(store))
    return problems


def _writer(ctx: Context, *, held: bool) -> Context:
    """The context a change of the mirror is written with: the user in ``auto`` mode, an unknown
    writer held for approval under ``confirm``; a conflict is held in either mode."""
    confirm = ctx.writes == "confirm"
    actor = MIRROR_ACTOR if confirm else "user"
    if held or confirm:
        return dataclasses.replace(ctx, actor=actor, is_agent=True, writes="confirm")
    return dataclasses.replace(ctx, actor=actor, is_agent=False)


def _apply(conn: Tx, ctx: Context, root: Path, change: Change, heard: list[CommittedChange]) -> str | None:
    """Take one change in (the caller holds the write lock since :func:`~.mirror.look`); a version
    it writes is added to ``heard``, for the listeners once the transaction committed."""
    row, state = change.row, change.read.state
    if change.kind == "gone":
        return None
    if change.kind == "vanished":
        assert row is not None
        mirror.forget_path(conn, change.path)
        if row.id:
            mark_dirty(conn, row.id)  # its memory may need a file again
        return None
    if state is None:  # its folder was swapped for a link since the scan listed it
        return f"{root / change.path} cannot be read ({change.error}); left as it is"
    if change.kind == "touched":
        assert row is not None
        mirror.record(conn, change.path, change.scope, row.id, row.version, row.origin, state)
        return None
    memory_id = row.id if row is not None else None
    if change.kind == "refused" or change.parsed is None:
        mirror.record(conn, change.path, change.scope, memory_id, None, "unparseable", state)
        return f"{root / change.path} cannot be read ({change.error}); left as it is"
    target = memory_id if row is not None and row.origin != "unparseable" else None
    target = target or _id_in(change) or memory_id
    current = head(conn, target) if target else None
    if current is not None and current.state == "purged":
        if row is not None:
            mirror.forget_path(conn, change.path)
        return _purged_left(root, change, current.id)
    if current is None:
        return _take_new(conn, ctx, root, change, heard)
    return _take_edit(conn, ctx, root, change, current, heard)


def _purged_left(root: Path, change: Change, memory_id: str) -> str:
    return (
        f"{root / change.path} holds the text of purged memory {memory_id}; it is not taken in again. "
        "Delete the file yourself"
    )


def _id_in(change: Change) -> str | None:
    assert change.parsed is not None
    raw = change.parsed.meta.get("id")
    if not isinstance(raw, str):
        return None
    try:
        return check_id(raw)
    except UsageError:
        return None


def _fields(change: Change, base: Version | None, ctx: Context) -> tuple[dict[str, Any], str | None]:
    """The memory fields a mirror file states, or why it cannot be taken in. A title derived
    from ``base``'s body follows the edited body (as ``revise`` does); a title someone chose stays."""
    from korg_bridge.recall.memory.drafts import checked_tags, prepare_text, redact_fields
    from korg_bridge.recall.memory.normalize import title_of

    assert change.parsed is not None
    meta = change.parsed.meta
    given = meta.get("title")
    title = given.strip() if isinstance(given, str) and given.strip() else None
    if base is not None and title == base.title and base.title == title_of(base.body):
        title = None
    seen: set[str] = set()
    try:
        text = prepare_text(
            change.parsed.body, title, allow_secrets=ctx.allow_secrets, what="the file's body", seen=seen
        )
        tags = checked_tags(meta["tags"]) if isinstance(meta.get("tags"), list) else None
    except UsageError as exc:
        return {}, exc.message
    if tags is not None:  # a person's tags go through the redactor like every field a memory carries
        redacted, _ = redact_fields({"tags": tags}, allow_secrets=ctx.allow_secrets, seen=seen)
        tags = list(redacted["tags"])
    kind = meta.get("type")
    fields: dict[str, Any] = {
        "body": text.body,
        "title": text.title,
        "content_hash": text.content_hash,
        "trust": text.trust,
    }
    if tags is not None:
        fields["tags"] = tags
    if kind in MEMORY_TYPES:
        fields["type"] = kind
    return fields, None


def _same(fields: dict[str, Any], version: Version) -> bool:
    return all(getattr(version, name) == value for name, value in fields.items() if name != "trust")


def _origin(change: Change, current: Version) -> str:
    """Who owns a file about ``current``'s memory: what its record says; else -- a file with no
    record, or one that could not be read for a while -- ``user`` for the file the memory was
    made from, ``ours`` for a file under korg-recall's name for it in its scope's folder (a
    write whose record a crash lost, an edit saved under a name the memory had before: taken
    in, then renamed or removed like any file of ours), else ``copy``."""
    row = change.row
    if row is not None and row.origin in ("ours", "user", "copy"):
        return row.origin
    if isinstance(current.source, dict) and current.source.get("file") == change.path:
        return "user"
    folder, _, name = change.path.rpartition("/")
    ours = folder == mirror_dir_of(current.scope) and name.endswith(f"--{current.id}.md")
    return "ours" if ours else "copy"


def _take_edit(
    conn: Tx, ctx: Context, root: Path, change: Change, current: Version, heard: list[CommittedChange]
) -> str | None:
    from korg_bridge.recall.memory import oplog
    from korg_bridge.recall.memory.writes import add_version

    assert change.parsed is not None and change.read.state is not None
    state = change.read.state
    if is_derived(current):
        mirror.record(conn, change.path, change.scope, current.id, None, "unparseable", state)
        return f"{root / change.path} is not taken in: {derived_refusal(current)}"
    origin = _origin(change, current)
    stated = change.parsed.meta.get("version")
    if not isinstance(stated, int) or isinstance(stated, bool):
        stated = change.row.version if change.row is not None and origin != "user" else None
    older = None
    if stated is not None and stated < current.version:
        found = select_versions(conn, "id = ? AND version = ?", (current.id, stated))
        older = found[0] if found else None
    fields, error = _fields(change, older or current, ctx)
    if error:
        mirror.record(conn, change.path, change.scope, current.id, None, "unparseable", state)
        return f"{root / change.path} cannot be taken in ({error}); left as it is"
    if _same(fields, current) or (older is not None and _same(fields, older)):
        # Not an edit: the head's text, or an older version's exactly (a rendering of it).
        shown = change.read.data == mirror.render(current).encode("utf-8")
        mirror.record(
            conn, change.path, change.scope, current.id, current.version if shown else None, origin, state
        )
        if not shown and origin == "ours":
            mark_dirty(conn, current.id)
        return None
    conflict = stated is not None and stated < current.version
    writer = _writer(ctx, held=conflict)
    reason = "mirror edit (conflict)" if conflict else "mirror edit"
    version = add_version(conn, writer, current, **fields, reason=reason, conflict=conflict)
    # Recorded with no version: the file is ours to rewrite (the head's front matter, its name).
    mirror.record(conn, change.path, change.scope, current.id, None, origin, state)
    mark_dirty(conn, current.id)
    status = "conflict" if conflict else ("pending" if version.state == "pending" else "revised")
    op_id = oplog.record(
        conn,
        actor=writer.actor,
        op="mirror_edit",
        status=status,
        args=oplog.version_args(version),
        now=ctx.now,
    )
    heard.append(CommittedChange.of(writer, "mirror_edit", [Touched.of(version, status, op_id)]))
    if conflict:
        return (
            f"{root / change.path} was edited from version {stated}, but {current.id} is at version "
            f"{current.version}: the edit is kept as proposal v{version.version} [conflict], not applied. Compare "
            f"with `korg-recall memories --ids {current.id}`; apply it with `korg-recall memories --approve "
            f"{current.id}`, or edit the file again"
        )
    if version.state == "pending":
        return _held_note(root, change, current.id)
    return None


def _held_note(root: Path, change: Change, memory_id: str) -> str:
    return (
        f"{root / change.path}: the change is held for approval ({ENV_RECALL_WRITES}=confirm: a file korg-recall did "
        f"not write may be an agent's). If it is yours, run `korg-recall memories --approve {memory_id}`"
    )


def _purged_text(conn: Tx, scope: str, content_hash: str) -> str | None:
    row = conn.execute(
        "SELECT id FROM memory WHERE scope = ? AND content_hash = ? AND state = 'purged' LIMIT 1",
        (scope, content_hash),
    ).fetchone()
    return None if row is None else str(row[0])


def _take_new(conn: Tx, ctx: Context, root: Path, change: Change, heard: list[CommittedChange]) -> str | None:
    from korg_bridge.recall.memory import oplog
    from korg_bridge.recall.memory.write_policy import Draft, decide
    from korg_bridge.recall.memory.writes import apply_decision

    assert change.read.state is not None and change.parsed is not None
    state = change.read.state
    fields, error = _fields(change, None, ctx)
    if error:
        mirror.record(conn, change.path, change.scope, None, None, "unparseable", state)
        return f"{root / change.path} cannot be taken in ({error}); left as it is"
    purged = _purged_text(conn, change.scope, str(fields["content_hash"]))
    if purged is not None:
        return _purged_left(root, change, purged)
    draft = Draft(
        body=str(fields["body"]),
        title=str(fields["title"]),
        title_given=True,
        type=str(fields.get("type", "note")),
        scope=change.scope,
        content_hash=str(fields["content_hash"]),
        trust=str(fields["trust"]),
        tags=list(fields.get("tags", [])),
        source={"file": change.path},
    )
    writer = _writer(ctx, held=False)
    decision = decide(conn, draft, {})
    version = apply_decision(conn, writer, draft, decision)
    # The file a memory was made from is its mirror; a file repeating or merging into another
    # memory is a copy, which must not displace that memory's own file.
    origin = "user" if decision.status == "created" else "copy"
    mirror.record(conn, change.path, change.scope, version.id, version.version, origin, state)
    op_id = oplog.record(
        conn,
        actor=writer.actor,
        op="mirror_import",
        status=decision.status,
        args=oplog.version_args(version),
        now=ctx.now,
    )
    heard.append(CommittedChange.of(writer, "mirror_import", [Touched.of(version, decision.status, op_id)]))
    return _held_note(root, change, version.id) if version.state == "pending" else None
