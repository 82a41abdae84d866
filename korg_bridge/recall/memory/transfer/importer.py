"""``korg-recall import``: writing what :mod:`.incoming` read, all of it or nothing, without
holding everyone else off while it does.

An import happens in three steps:

1. **Read and check** every file (:mod:`.incoming`, :mod:`.verbatim`) before the store
   is opened: a malformed line changes nothing.
2. **Plan** in one read transaction, which never holds a writer off: what each
   memory becomes is decided against the store as it is (:mod:`.foreign` for foreign
   memories, :func:`plan_verbatim` for our export), and the rows are built.
3. **Write** in one transaction (``store.write(stage=True)``), so the import lands
   whole or not at all: the new memories first -- on a team store before the
   tenant's write lock is taken, invisible to everyone until commit -- then, holding
   the lock, what the plan relied on is checked against the store as it is now, and
   what no longer holds is undone in the transaction and decided again. Only this
   check and the writes to memories the store held before happen in turn; the
   operation log gets one ``memory.import`` entry (counts and the file's SHA-256,
   never text). On a SQLite file a transaction that writes holds the lock from its
   first row, so there the whole of step 3 is in turn -- bulk statements, about
   35 µs of CPU per memory written (``docs/benchmarks.md``, "Imports").

The mirror files of the imported memories appear over the next calls (at most 64
per call), as after any large change.

**Our export** is written verbatim, lineage by lineage: a lineage the store lacks is
inserted exactly as exported (ids, versions, timestamps, actors, states,
provenance) and so are its links; one the store holds with the same versions is
left alone (importing twice changes nothing); one whose exported versions extend
the store's is extended (the older rows take the exported superseded marks); one
whose versions differ from the store's is a conflict, reported and not imported --
the store's text is never replaced. **Tombstones win**: a lineage this store purged
is never written again, and one it retired stays retired unless the file carries a
later explicit restore (a version after this store's retirement that follows a
retired version of its own, or says it was restored); what was skipped is in the
report, with the reason.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory import oplog
from korg_bridge.recall.memory.drafts import prepare_text, redact_fields
from korg_bridge.recall.memory.mirror import files as mirror
from korg_bridge.recall.memory.records import Version
from korg_bridge.recall.memory.rows import (
    add_link,
    chunks,
    index_versions,
    insert_versions,
    select_versions,
    update_head,
)
from korg_bridge.recall.memory.scopes import Context, parse_scope
from korg_bridge.recall.memory.transfer.foreign import Foreign, plan_foreign
from korg_bridge.recall.memory.transfer.formats import Batch
from korg_bridge.recall.memory.transfer.staging import Outcome, finish_plan, stage_plan
from korg_bridge.recall.memory.transfer.verbatim import Exported, read_exported
from korg_bridge.recall.memory.write_policy import Draft

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx

__all__ = ["IMPORT_ACTOR", "Prepared", "apply_import", "plan_verbatim", "prepare_import"]

logger = logging.getLogger(__name__)

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

_VERBATIM_COUNTS = ("new", "extended", "present", "conflict", "skipped", "versions", "links")
"""Lineages new to the store, extended, already present, in conflict, forgotten here (skipped);
versions and links written."""
_FOREIGN_COUNTS = ("created", "merged", "superseded", "exists", "skipped", "links")
"""Write-policy outcomes of foreign memories, those forgotten before (skipped), links written."""
_RESTORED = "restored"
"""How ``restore`` (``restored``) and a revise of a retired memory (``restored by revise``) start
their reason."""


@dataclass(slots=True)
class Prepared:
    """An import checked and ready to write: our export, or the foreign memories."""

    batch: Batch
    exported: Exported | None = None
    foreign: list[Foreign] = field(default_factory=list)
    secrets_redacted: int = 0
    untrusted: int = 0

    @property
    def scopes(self) -> list[str]:
        if self.exported is not None:
            return sorted({v.scope for v in self.exported.versions})
        return sorted({item.draft.scope for item in self.foreign})


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
        prepared.foreign.append(
            Foreign(draft, meta["source"].get("identity"), item.where)
        )  # as stored: redacted
        prepared.secrets_redacted += text.secrets_redacted + secrets
        prepared.untrusted += text.trust == "untrusted"
    return prepared


# --- our export ---------------------------------------------------------------------------------


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


def _current(stored: Sequence[Version]) -> Version | None:
    """A stored lineage's current version, as :func:`~.rows.head` chooses it."""
    heads = [v for v in stored if v.superseded_by is None]
    settled = [v for v in heads if v.state != "pending"]
    return max(settled or heads, key=lambda v: v.version) if heads else None


def _restores(version: Version, earlier: dict[int, Version], retired_at: str) -> bool:
    """Whether ``version`` brings back a memory retired at ``retired_at``: written after it, as a
    restore -- after a retired version, or saying so (``restore``, a revise of a retired memory)."""
    before = earlier.get(version.version - 1)
    explicit = (before is not None and before.state == "retired") or (version.reason or "").startswith(
        _RESTORED
    )
    return explicit and version.recorded_at > retired_at


def _verdict(
    memory_id: str, exported: Sequence[Version], stored: Sequence[Version]
) -> tuple[str, list[Version], str | None]:
    """:func:`_plan_lineage`, with the store's tombstones winning: ``skipped`` and the reason."""
    if any(v.state == "purged" for v in stored):
        return "skipped", [], f"{memory_id}: purged in this store; not imported again"
    verdict, insert = _plan_lineage(exported, stored)
    current = _current(stored)
    if insert and current is not None and current.state == "retired":
        retired_at = current.retired_at or ""
        earlier = {**{v.version: v for v in stored}, **{v.version: v for v in exported}}
        if not any(_restores(v, earlier, retired_at) for v in insert):
            why = (
                f"{memory_id}: retired in this store at {retired_at or 'an unknown time'}, and the file does not "
                "restore it after that; not imported again (restore it here with `korg-recall restore`)"
            )
            return "skipped", [], why
    return verdict, insert, None


@dataclass(slots=True)
class VerbatimPlan:
    """Our export decided against a snapshot: each lineage's verdict and the rows it relied on."""

    exported: Exported
    by_id: dict[str, list[Version]]
    verdicts: dict[str, tuple[str, list[Version], str | None]]
    read: dict[str, list[tuple[Any, ...]]]
    """What each lineage the store held looked like (its rows' versions, states and marks)."""
    staged: list[Version] = field(default_factory=list)
    """The versions of the lineages new to the store, in file order."""
    encoded: list[tuple[object, ...]] = field(default_factory=list)
    """Their rows, made while planning rather than in the write transaction."""


_PRINT = "id, version, content_hash, state, superseded_by, retired_at"


def _prints(conn: Tx, ids: Sequence[str]) -> dict[str, list[tuple[Any, ...]]]:
    """The version, hash, state and marks of every row of the lineages ``ids``: what a decision on
    them relies on (a use count or provenance changing in place relies on nothing)."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    for part in chunks(list(ids)):
        marks = ", ".join("?" * len(part))
        for row in conn.execute(
            f"SELECT {_PRINT} FROM memory WHERE id IN ({marks}) ORDER BY id, version", tuple(part)
        ):
            found.setdefault(str(row[0]), []).append(tuple(row))
    return found


def _lineages(conn: Tx, ids: Sequence[str]) -> dict[str, list[Version]]:
    found: dict[str, list[Version]] = {}
    for part in chunks(list(ids)):
        marks = ", ".join("?" * len(part))
        for version in select_versions(conn, f"id IN ({marks}) ORDER BY id, version", tuple(part)):
            found.setdefault(version.id, []).append(version)
    return found


def plan_verbatim(conn: Tx, exported: Exported) -> VerbatimPlan:
    """Each exported lineage's verdict against the store as ``conn`` (a read transaction) shows it."""
    by_id: dict[str, list[Version]] = {}
    for version in exported.versions:
        by_id.setdefault(version.id, []).append(version)
    stored = _lineages(conn, list(by_id))
    verdicts = {mid: _verdict(mid, versions, stored.get(mid, [])) for mid, versions in by_id.items()}
    plan = VerbatimPlan(exported, by_id, verdicts, _prints(conn, list(stored)))
    plan.staged = [
        dataclasses.replace(v, rowid=None) for v in exported.versions if verdicts[v.id][0] == "new"
    ]
    plan.encoded = [version.to_row() for version in plan.staged]
    return plan


def _existing(conn: Tx, ids: Sequence[str], *, live: bool = False) -> set[str]:
    """Which of ``ids`` the store holds (``live``: and has not purged)."""
    found: set[str] = set()
    extra = " AND state <> 'purged'" if live else ""
    for part in chunks(sorted(set(ids))):
        marks = ", ".join("?" * len(part))
        found |= {
            str(r[0])
            for r in conn.execute(f"SELECT DISTINCT id FROM memory WHERE id IN ({marks}){extra}", tuple(part))
        }
    return found


@dataclass(slots=True)
class _Staged:
    """What :func:`_stage_verbatim` wrote before the turn."""

    new: set[str]
    """Lineages new to the store, written as exported."""
    arrived: set[str]
    """Lineages the plan found new that the store holds now (the same export imported meanwhile)."""
    versions: list[Version]
    inner: int
    """Links between new lineages, written with them."""


def _stage_verbatim(conn: Tx, plan: VerbatimPlan) -> _Staged:
    """The new lineages and the links between them: no one else can see them before commit."""
    new = {mid for mid, (verdict, _, _) in plan.verdicts.items() if verdict == "new"}
    arrived = _existing(conn, sorted(new))  # decided again in turn
    new -= arrived
    keep = [n for n, v in enumerate(plan.staged) if v.id in new]
    versions = [plan.staged[n] for n in keep]
    insert_versions(conn, versions, index=False, encoded=[plan.encoded[n] for n in keep])
    inner = [link for link in plan.exported.links if link.src in new and link.dst in new]
    conn.executemany(
        "INSERT INTO memory_links (src, dst, kind, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(link.src, link.dst, link.kind, link.created_at) for link in inner],
    )
    return _Staged(new, arrived, versions, len(inner))


def _finish_verbatim(
    conn: Tx, plan: VerbatimPlan, staged: _Staged, counts: Counter[str], report: dict[str, Any]
) -> None:
    """In turn: the lineages the store held, decided again on their rows as they are now wherever
    those changed since the plan read them."""
    new, arrived = staged.new, staged.arrived
    index_versions(conn, staged.versions)
    held = sorted(set(plan.read) | arrived)
    now = _prints(conn, held)
    changed = [mid for mid in held if now.get(mid, []) != plan.read.get(mid, [])]
    verdicts = dict(plan.verdicts)
    fresh = _lineages(conn, changed)
    for memory_id in changed:
        verdicts[memory_id] = _verdict(memory_id, plan.by_id[memory_id], fresh.get(memory_id, []))
    extended = _lineages(conn, [mid for mid, (verdict, _, _) in verdicts.items() if verdict == "extended"])
    added: list[Version] = []
    for memory_id, (verdict, insert, reason) in verdicts.items():
        counts[verdict] += 1
        if reason:
            report["skipped"].append(reason)
        elif verdict == "conflict":
            report["conflicts"].append(
                f"{memory_id}: the store holds other versions of it than the file; kept the store's"
            )
        if insert:
            report["ids"].add(memory_id)
        if verdict == "extended":
            theirs = {v.version: v for v in plan.by_id[memory_id]}
            for row in extended.get(memory_id, []):
                if row.version in theirs:
                    update_head(
                        conn, row, **{name: getattr(theirs[row.version], name) for name in LINEAGE_COLUMNS}
                    )
        if memory_id not in new:
            added += [dataclasses.replace(v, rowid=None) for v in insert]
    order = {(v.id, v.version): n for n, v in enumerate(plan.exported.versions)}
    insert_versions(conn, sorted(added, key=lambda v: order[(v.id, v.version)]))  # the export's row order
    counts["versions"] += len(staged.versions) + len(added)
    counts["links"] += staged.inner
    rest = [link for link in plan.exported.links if not (link.src in new and link.dst in new)]
    if rest:
        live = _existing(conn, [end for link in rest for end in (link.src, link.dst)], live=True)
        for link in rest:
            if link.src in live and link.dst in live:
                counts["links"] += add_link(conn, link.src, link.dst, link.kind, link.created_at)


# --- both ------------------------------------------------------------------------------------------


def apply_import(store: Store, ctx: Context, prepared: Prepared) -> dict[str, Any]:
    """Plan a prepared import against a snapshot, write it in one transaction, log it, and report.

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
    exported = prepared.exported
    started, cpu_started = time.monotonic(), time.process_time()
    with store.reading() as snapshot:
        plan = (
            plan_verbatim(snapshot, exported)
            if exported is not None
            else plan_foreign(snapshot, importing, prepared.foreign, batch.relations)
        )
    planned, cpu_planned = time.monotonic(), time.process_time()
    with store.write(stage=True) as conn:
        if isinstance(plan, VerbatimPlan):
            staged = _stage_verbatim(conn, plan)
            turn, cpu_turn = time.monotonic(), time.process_time()
            conn.take_turn()
            _finish_verbatim(conn, plan, staged, counts, report)
        else:
            ahead = stage_plan(conn, plan)
            turn, cpu_turn = time.monotonic(), time.process_time()
            conn.take_turn()
            outcome: Outcome = finish_plan(conn, plan, ahead)
            counts.update(outcome.counts)
            report["skipped"] += outcome.skipped
            report["ids"] |= outcome.ids
        names = _VERBATIM_COUNTS if exported is not None else _FOREIGN_COUNTS
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
    done, cpu_done = time.monotonic(), time.process_time()
    # A SQLite file's write lock is taken with the transaction; a team store's at the turn. CPU
    # beside wall time: on a busy machine the wall time is mostly waiting for a core.
    turned = store.kind == "postgresql"
    logger.debug(
        "import of %s: planned in %.3f s (%.3f s CPU), written in %.3f s, the write lock held %.3f s "
        "(%.3f s CPU)",
        batch.path, planned - started, cpu_planned - cpu_started, done - planned,
        done - (turn if turned else planned), cpu_done - (cpu_turn if turned else cpu_planned),
    )  # fmt: skip
    problems: list[str] | str = mirror.reconcile(store) if ctx.mirror else []
    waiting = mirror.waiting(store) if ctx.mirror else 0
    queued = store.flush_log(ctx.env)
    if ctx.mirror and not problems:
        problems = f"{waiting} file(s) follow over the next calls" if waiting else "up to date"
    return {
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
