"""``forget``: retire (hidden, restorable) or purge (erased), by id or -- in two steps -- by query.

Nothing automatic ever calls this: decay only ranks, expiry only hides, dedup
never deletes. Forgetting by **query** is two-step: the first call changes
nothing and returns the matching memories with a confirmation token; only a
second call with that token acts, and only on exactly those memories (by id
and version -- if any changed in between, nothing happens and the new list
comes back with a new token). Tokens are HMACs over the (id, version) list,
the mode and the scopes, keyed by a random secret kept in the store, and
expire after 10 minutes.

**Purge** empties every version of the lineage (title, body, tags, key,
source, provenance, reason) leaving tombstones (id, version, scope, type,
content hash, state ``purged``), drops its vectors, links and the mirror file
korg-recall wrote, and clears the keyword index of it. Then the store finishes
the erasure its own way (:meth:`~.backend.Store.after_purge`): a SQLite store
checkpoints its WAL (with ``secure_delete`` on, the body's bytes are gone from
the file and its WAL); a team store vacuums the tables. Copies outside the store
are not touched, and the result says so.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.config import ENV_RECALL_WRITES
from korg_bridge.errors import ConfigError, ListChanged, UsageError
from korg_bridge.recall.memory import oplog
from korg_bridge.recall.memory.committed import CommittedChange, Touched
from korg_bridge.recall.memory.embedding import drop_vectors
from korg_bridge.recall.memory.mirror import files as mirror
from korg_bridge.recall.memory.mirror.readback import sync_mirror
from korg_bridge.recall.memory.projections import after_commit
from korg_bridge.recall.memory.records import Version, check_id, iso
from korg_bridge.recall.memory.rows import head, lineage, update_head
from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.memory.search import FORGET_MAX, forget_matches
from korg_bridge.recall.paths import MIRROR_NAME

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx

__all__ = ["MODES", "TOKEN_TTL_S", "forget", "validate_forget"]

MODES = ("retire", "purge")
TOKEN_TTL_S = 600
"""A confirmation token is good for 10 minutes: long enough to ask the user, short enough to go stale."""
NOT_TOUCHED = (
    "copies outside the memory store are not touched: session transcripts and ledgers that recorded "
    "earlier tool calls, audit ledgers and the recall index keep what they recorded"
)


def validate_forget(ctx: Context, args: dict[str, Any]) -> None:
    """What can be checked of a ``forget`` call without the store.

    Raises:
        ConfigError: writes are off, or an agent asks under ``KORG_RECALL_WRITES=confirm``.
        UsageError: neither or both of id and query, an unknown mode, a malformed id.
    """
    ctx.check_writes("forget")
    if ctx.holds_for_approval:
        target = args.get("id") or "ID"
        raise ConfigError(
            f"{ENV_RECALL_WRITES}=confirm: an agent cannot forget memories. Ask the user to run "
            f"`korg-recall forget --id {target} --mode {args.get('mode') or 'retire'}` in a terminal."
        )
    if (args.get("mode") or "retire") not in MODES:
        raise UsageError(f"bad mode {args.get('mode')!r}: use retire (hidden, restorable) or purge (erased).")
    memory_id, query = args.get("id"), args.get("query")
    if (memory_id is None) == (query is None):
        raise UsageError("pass either id (one memory) or query (matching memories, confirmed in two steps).")
    if memory_id is not None:
        if args.get("confirm"):
            raise UsageError("confirm goes with query; forgetting by id acts at once.")
        check_id(str(memory_id))
    else:
        ctx.scopes_for(args.get("scope"))  # a bad scope fails before anything is opened
        if not str(query).strip():
            raise UsageError("query is empty. Pass the words the memories to forget contain.")


def forget(store: Store, ctx: Context, args: dict[str, Any]) -> dict[str, Any]:
    """The ``forget`` callable's result.

    Raises:
        ConfigError: writes are off, or an agent asks under ``KORG_RECALL_WRITES=confirm``.
        UsageError: neither or both of id and query, an unknown mode, id or purged memory.
    """
    validate_forget(ctx, args)
    mode = args.get("mode") or "retire"
    memory_id, query = args.get("id"), args.get("query")
    if memory_id is not None:
        memory_id = check_id(str(memory_id))
        with store.reading() as tx:
            current = head(tx, memory_id)
        if current is None:
            raise UsageError(f"no memory {memory_id}. List ids with `korg-recall memories`.")
        return _act(store, ctx, [(memory_id, None)], mode, [current.scope])
    return _by_query(store, ctx, str(query), mode, args.get("scope"), args.get("confirm"))


def _token(secret: str, matches: Sequence[Version], mode: str, scopes: Sequence[str], expires: int) -> str:
    message = json.dumps(
        {
            "m": sorted([v.id, v.version] for v in matches),
            "mode": mode,
            "scopes": sorted(scopes),
            "exp": expires,
        },
        sort_keys=True,
    )
    mac = hmac.new(bytes.fromhex(secret), message.encode("utf-8"), hashlib.sha256).hexdigest()[:32]
    return f"{expires}.{mac}"


def _listing(matches: Sequence[Version]) -> list[dict[str, Any]]:
    return [
        {
            "id": v.id,
            "version": v.version,
            "type": v.type,
            "scope": v.scope,
            "title": v.title,
            "state": v.state,
        }
        for v in matches
    ]


def _by_query(
    store: Store, ctx: Context, query: str, mode: str, scope: str | None, confirm: str | None
) -> dict[str, Any]:
    scopes = list(ctx.scopes_for(scope))
    problems = sync_mirror(store, ctx, scopes)
    with store.reading() as conn:
        matches = forget_matches(conn, query, scopes, mode)
        secret = conn.secret("forget")
    if not matches:
        return {"status": "no_match", "query": query, "scopes": scopes, "matches": []}
    if len(matches) > FORGET_MAX:
        return {
            "status": "too_many",
            "query": query,
            "matches": _listing(matches[:FORGET_MAX]),
            "note": f"more than {FORGET_MAX} memories match; nothing changed. Narrow the query (every word must match).",
        }
    now = int(ctx.now)
    fresh = _token(secret, matches, mode, scopes, now + TOKEN_TTL_S)
    ask = {
        "query": query,
        "mode": mode,
        "scopes": scopes,
        "matches": _listing(matches),
        "confirm": fresh,
        "expires_in_s": TOKEN_TTL_S,
    }
    if not confirm:
        note = (
            f"nothing changed yet. To {mode} exactly these {len(matches)}, call forget again with the same "
        )
        return {"status": "confirm", **ask, "note": note + "query, mode and scope, and confirm=<this token>."}
    expires_text, _, _mac = str(confirm).partition(".")
    if not expires_text.isdigit() or int(expires_text) < now:
        return {
            "status": "expired",
            **ask,
            "note": "the token expired or is malformed; nothing changed. Confirm again.",
        }
    if not hmac.compare_digest(_token(secret, matches, mode, scopes, int(expires_text)), str(confirm)):
        note = "the matching memories, mode or scope changed since the token was made; nothing changed. Review and confirm again."
        return {"status": "changed", **ask, "note": note}
    try:
        return _act(store, ctx, [(v.id, v.version) for v in matches], mode, scopes, problems)
    except ListChanged:
        with store.reading() as conn:
            matches = forget_matches(conn, query, scopes, mode)
        ask["matches"] = _listing(matches)
        ask["confirm"] = _token(secret, matches, mode, scopes, now + TOKEN_TTL_S)
        return {
            "status": "changed",
            **ask,
            "note": "a memory changed meanwhile; nothing changed. Review and confirm again.",
        }


def _purge(conn: Tx, memory_id: str, now: str, root: Path | None) -> tuple[list[str], list[str]]:
    """Empty every version of ``memory_id``, and (with a mirror) delete the files korg-recall
    wrote of it in the same transaction -- under the write lock every mirror write holds, so no
    other process can read a file of it as new in between; return the files left (ours edited
    by hand, and files korg-recall did not write)."""
    versions = lineage(conn, memory_id)
    left: tuple[list[str], list[str]] = ([], [])
    if conn.has_mirror and root is not None:
        left = mirror.erase(conn, root, memory_id, versions)
    conn.execute(
        "UPDATE memory SET title = '', body = '', tags = '[]', key = NULL, source = NULL, provenance = '[]', "
        "reason = NULL, state = 'purged', retired_at = coalesce(retired_at, ?) WHERE id = ?",
        (now, memory_id),
    )
    drop_vectors(conn, [v.rowid for v in versions if v.rowid is not None])
    conn.execute("DELETE FROM memory_links WHERE src = ? OR dst = ?", (memory_id, memory_id))
    return left


def _act(
    store: Store,
    ctx: Context,
    targets: Sequence[tuple[str, int | None]],
    mode: str,
    scopes: Sequence[str],
    problems: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Retire or purge ``targets`` in one transaction (raising :class:`ListChanged` if a version moved)."""
    found = list(problems) if problems is not None else sync_mirror(store, ctx, scopes)
    now = iso(ctx.now)
    done: list[str] = []
    touched: list[Touched] = []
    unchanged: list[str] = []
    edited: list[str] = []
    theirs: list[str] = []
    root = store.folder / MIRROR_NAME if store.folder is not None else None
    with store.write() as conn:
        for memory_id, expected in targets:
            current = head(conn, memory_id)
            if current is None:
                raise UsageError(f"no memory {memory_id}. List ids with `korg-recall memories`.")
            if expected is not None and current.version != expected:
                raise ListChanged(memory_id)
            if current.state == "purged":
                if mode == "retire":
                    raise UsageError(
                        f"memory {memory_id} was purged already; there is nothing left to retire."
                    )
                unchanged.append(memory_id)
                continue
            if mode == "retire":
                if current.state == "retired":
                    unchanged.append(memory_id)
                    continue
                update_head(conn, current, state="retired", retired_at=now)
            else:
                kept_edited, kept = _purge(conn, memory_id, now, root)
                edited.extend(kept_edited)
                theirs.extend(kept)
            state = "retired" if mode == "retire" else "purged"
            args = {**oplog.version_args(current), "state": state}
            op_id = oplog.record(
                conn, actor=ctx.actor, op="forget", status=f"{mode}d", args=args, now=ctx.now
            )
            done.append(memory_id)
            touched.append(Touched.of(current, f"{mode}d", op_id, state=state))
        if mode == "purge" and done:
            conn.text.after_purge(conn)
    found.extend(f"{path} was edited by hand; left as it is (delete it yourself)" for path in edited)
    checks = after_commit(store, CommittedChange.of(ctx, "forget", touched, mirror_problems=found))
    result: dict[str, Any] = {"status": f"{mode}d" if done else "unchanged", "mode": mode, "ids": done}
    if unchanged:
        result["unchanged"] = unchanged
    if mode == "purge" and done:
        checks.update(store.after_purge())
        if theirs:
            result["files_you_made"] = theirs
        result["note"] = NOT_TOUCHED
    elif done:
        result["note"] = "hidden, not erased: `korg-recall restore ID` (or revise) brings one back"
    result["checks"] = checks
    return result
