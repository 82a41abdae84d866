"""``korg-recall import``: writing what :mod:`.incoming` read, all of it or nothing.

An import is **one transaction**: every file is read and checked first (the
store is not even opened when one fails), then everything is written in a
single ``BEGIN IMMEDIATE`` transaction, so an import either lands whole or
leaves the store as it was. The operation log gets one ``memory.import``
entry per import (counts and the file's SHA-256, never text); the mirror
files of the imported memories appear over the next calls (at most 64 per
call), as after any large change.

**Our export** is written verbatim, lineage by lineage: a lineage the store
lacks is inserted exactly as exported (ids, versions, timestamps, actors,
states, provenance) and so are its links; one the store holds with the same
versions is left alone (importing twice changes nothing); one whose exported
versions extend the store's is extended (the older rows take the exported
superseded marks); one whose versions differ from the store's is a conflict,
reported and not imported -- the store's text is never replaced.

**Foreign memories** go through the write policy as actor ``import`` (never
held for approval: importing is a person's act at a terminal). A text the
scope has ever held -- current, superseded, retired or purged -- is not
imported again, so a second import adds nothing and an old export cannot
revert a fact or bring back a forgotten one. A foreign memory imported before
under the same foreign id (``mem0:<id>``, an MCP entity's name, a Claude Code
file) whose text changed becomes a new version of that memory.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory import mirror, oplog
from korg_bridge.recall.memory.drafts import prepare_text, redact_fields
from korg_bridge.recall.memory.incoming import Batch
from korg_bridge.recall.memory.policy import Draft, decide
from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.rows import add_link, head, insert_version, lineage, update_head
from korg_bridge.recall.memory.scopes import Context, parse_scope
from korg_bridge.recall.memory.verbatim import Exported, read_exported
from korg_bridge.recall.memory.writes import apply_decision

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Store, Tx

__all__ = ["IMPORT_ACTOR", "Prepared", "apply_import", "prepare_import"]

IMPORT_ACTOR = "import"
LINEAGE_COLUMNS = (
    "state",
    "retired_at",
    "superseded_by",
    "superseded_at",
    "provenance",
    "use_count",
    "last_used_at",
)
"""What an extended lineage's older rows take from the export: the columns a version may change in place."""

_VERBATIM_COUNTS = ("new", "extended", "present", "conflict", "versions", "links")
"""Lineages new to the store, extended, already present, in conflict; versions and links written."""
_FOREIGN_COUNTS = ("created", "merged", "superseded", "exists", "skipped", "links")
"""Write-policy outcomes of foreign memories, those forgotten before (skipped), links written."""


@dataclass(slots=True)
class Prepared:
    """An import checked and ready to write: our export, or drafts of foreign memories."""

    batch: Batch
    exported: Exported | None = None
    drafts: list[tuple[Draft, str | None]] = field(default_factory=list)
    """Each foreign memory's draft and its foreign identity."""
    secrets_redacted: int = 0
    untrusted: int = 0

    @property
    def scopes(self) -> list[str]:
        if self.exported is not None:
            return sorted({v.scope for v in self.exported.versions})
        return sorted({draft.scope for draft, _ in self.drafts})


def prepare_import(batch: Batch, ctx: Context, scope: str | None) -> Prepared:
    """Check and redact everything an import will write, without the store.

    Raises:
        UsageError: a malformed line (see :mod:`.verbatim`), a bad scope, ``scope`` given for
            our export (it keeps its own scopes), or a foreign text that is empty.
    """
    if batch.format == "korg-recall":
        if scope:
            raise UsageError(
                "an export keeps its memories' scopes, so --scope does not apply to it. Export with --scope "
                "to move one scope."
            )
        exported = read_exported(batch.lines, str(batch.path), allow_secrets=ctx.allow_secrets)
        return Prepared(
            batch, exported, secrets_redacted=exported.secrets_redacted, untrusted=exported.marked_untrusted
        )
    chosen = ctx.write_scope(scope) if scope else None
    prepared = Prepared(batch)
    for item in batch.items:
        try:
            item_scope = chosen or (
                parse_scope(item.scope, ctx.project) if item.scope else ctx.default_write_scope
            )
            seen: set[str] = set()
            text = prepare_text(
                item.body,
                item.title,
                allow_secrets=ctx.allow_secrets,
                what=f"the text of {item.where}",
                seen=seen,
            )
        except UsageError as exc:
            raise UsageError(f"{item.where}: {exc.message}") from None
        source = {**item.source, "file": str(batch.path) if batch.format != "markdown" else item.where}
        if item.identity:
            source["identity"] = item.identity
        meta, secrets = redact_fields(
            {"tags": item.tags, "source": source}, allow_secrets=ctx.allow_secrets, seen=seen
        )  # every field of a foreign memory, not only its text
        draft = Draft(
            body=text.body, title=text.title, title_given=text.title_given, type=item.type, scope=item_scope,
            content_hash=text.content_hash, trust=text.trust, tags=meta["tags"], pinned=item.pinned,
            source=meta["source"],
        )  # fmt: skip
        prepared.drafts.append((draft, meta["source"].get("identity")))  # as stored: redacted
        prepared.secrets_redacted += text.secrets_redacted + secrets
        prepared.untrusted += text.trust == "untrusted"
    return prepared


def _identities(conn: Tx) -> dict[str, str]:
    """Foreign identity → the lineage that holds it (the latest row naming it wins)."""
    identity = conn.source_field("identity")
    rows = conn.execute(
        f"SELECT id, {identity} FROM memory WHERE source IS NOT NULL AND {identity} IS NOT NULL ORDER BY rowid"
    )
    return {str(identity): str(memory_id) for memory_id, identity in rows}


def _foreign(
    conn: Tx, ctx: Context, prepared: Prepared, counts: Counter[str], report: dict[str, Any]
) -> None:
    held = {(scope, digest) for scope, digest in conn.execute("SELECT scope, content_hash FROM memory")}
    known = _identities(conn)
    for draft, identity in prepared.drafts:
        if (draft.scope, draft.content_hash) in held:
            counts["exists"] += 1
            continue
        previous = known.get(identity) if identity else None
        if previous is not None:
            current = head(conn, previous)
            if current is None or current.state in ("retired", "purged"):
                counts["skipped"] += 1
                report["skipped"].append(
                    f"{(draft.source or {}).get('file')}: {previous} holding it was forgotten; not imported again"
                )
                continue
            if current.scope == draft.scope:
                draft.supersedes = previous
        decision = decide(conn, draft, {})
        version = apply_decision(conn, ctx, draft, decision)
        if decision.status == "created":
            for similar in decision.similar:
                add_link(conn, version.id, similar.id, "similar", version.recorded_at)
        counts[decision.status] += 1
        held.add((draft.scope, draft.content_hash))
        if identity:
            known[identity] = version.id
        report["ids"].add(version.id)
    now = iso(ctx.now)
    for src, dst, kind in prepared.batch.relations:
        if src in known and dst in known and known[src] != known[dst]:
            counts["links"] += add_link(conn, known[src], known[dst], kind, now)


def _plan_lineage(exported: Sequence[Version], stored: Sequence[Version]) -> tuple[str, list[Version]]:
    """What to do with one exported lineage: ``new``, ``present``, ``extended`` or ``conflict``, and the
    exported versions to insert."""
    if not stored:
        return "new", list(exported)
    mine = {v.version: v for v in stored}
    if any(v.version in mine and mine[v.version].content_hash != v.content_hash for v in exported):
        return "conflict", []
    missing = [v for v in exported if v.version not in mine]
    if not missing:
        return "present", []
    if min(v.version for v in missing) <= max(mine):
        return "conflict", []  # the store went on differently after the export
    return "extended", missing


def _verbatim(conn: Tx, exported: Exported, counts: Counter[str], report: dict[str, Any]) -> None:
    by_id: dict[str, list[Version]] = {}
    for version in exported.versions:
        by_id.setdefault(version.id, []).append(version)
    accepted: set[tuple[str, int]] = set()
    for memory_id, versions in by_id.items():
        stored = lineage(conn, memory_id)
        verdict, insert = _plan_lineage(versions, stored)
        counts[verdict] += 1
        if verdict == "conflict":
            report["conflicts"].append(
                f"{memory_id}: the store holds other versions of it than the file; kept the store's"
            )
            continue
        if verdict == "extended":
            theirs = {v.version: v for v in versions}
            for row in stored:
                if row.version in theirs:
                    update_head(
                        conn, row, **{name: getattr(theirs[row.version], name) for name in LINEAGE_COLUMNS}
                    )
        accepted.update((v.id, v.version) for v in insert)
        if insert:
            report["ids"].add(memory_id)
    for version in exported.versions:  # file order: the export's row order is kept
        if (version.id, version.version) in accepted:
            insert_version(conn, dataclasses.replace(version, rowid=None))
            counts["versions"] += 1
    present = {row[0] for row in conn.execute("SELECT DISTINCT id FROM memory")} if exported.links else set()
    for link in exported.links:
        if link.src in present and link.dst in present:
            counts["links"] += add_link(conn, link.src, link.dst, link.kind, link.created_at)


def apply_import(store: Store, ctx: Context, prepared: Prepared) -> dict[str, Any]:
    """Write a prepared import in one transaction, log it, and report what happened.

    Raises:
        ConfigError: writes are off.
        KorgError: the store fails (nothing of the import is kept).
    """
    ctx.check_writes("import")
    # A person at a terminal runs an import: never held for approval under confirm.
    importing = dataclasses.replace(ctx, actor=IMPORT_ACTOR, is_agent=False)
    counts: Counter[str] = Counter()
    report: dict[str, Any] = {"skipped": list(prepared.batch.skipped), "conflicts": [], "ids": set()}
    batch = prepared.batch
    with store.write() as conn:
        if prepared.exported is not None:
            _verbatim(conn, prepared.exported, counts, report)
        else:
            _foreign(conn, importing, prepared, counts, report)
        names = _VERBATIM_COUNTS if prepared.exported is not None else _FOREIGN_COUNTS
        summary = {name: counts[name] for name in names}
        oplog.record(
            conn,
            actor=IMPORT_ACTOR,
            op="import",
            status="imported",
            args={
                "format": batch.format,
                "file_sha256": batch.sha256,
                "bytes": batch.bytes,
                "scopes": prepared.scopes,
                **summary,
            },
            now=ctx.now,
        )
    problems: list[str] | str = mirror.reconcile(store) if ctx.mirror else []
    waiting = mirror.waiting(store) if ctx.mirror else 0
    queued = store.flush_log(ctx.env)
    if ctx.mirror and not problems:
        problems = f"{waiting} file(s) follow over the next calls" if waiting else "up to date"
    result: dict[str, Any] = {
        "status": "imported",
        "format": batch.format,
        "path": str(batch.path),
        **summary,
        "memories_touched": len(report["ids"]),
        "skipped": report["skipped"],
        "conflicts": report["conflicts"],
        "secrets_redacted": prepared.secrets_redacted,
        "untrusted": prepared.untrusted,
        "checks": {
            "oplog": "appended" if queued is None else f"queued: {queued}",
            "mirror": "off"
            if not ctx.mirror
            else (problems or "files follow over the next calls (64 per call)"),
        },
    }
    return result
