"""Writing an import's plan (:mod:`.foreign`): its new memories before its turn, the rest in it.

One transaction (``store.write(stage=True)``), so the import lands whole or not at
all. :func:`stage_plan` writes the memories the plan creates -- every version of
them, their ``similar`` links and their foreign identities -- while, on a team
store, the tenant's other writers go on: uncommitted rows are invisible to them.
Then the transaction takes its turn (``take_turn``: a team store's advisory lock;
a SQLite file's lock was taken with the transaction) and :func:`finish_plan`
checks what the plan relied on against the store as it is now (:func:`_check`):

* a memory it adds a version to must have the versions and state it read, and
  the new version is built on its current head, so a use count or provenance
  added meanwhile carries over;
* a text it creates must not have become a current memory of its scope;
* a memory it links to must not have been purged (the link is dropped).

What fails is undone (this transaction's own rows, never committed) and planned
again by the same rules, in turn, against the store as it now is: a change made
meanwhile is never reverted and an exact duplicate is never written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.rows import add_link, chunks, index_versions, insert_versions, select_versions
from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.memory.transfer.foreign import (
    Plan,
    Step,
    digest,
    lineage_facts,
    new_lineages,
    plan_foreign,
)
from korg_bridge.recall.memory.write_policy import Decision
from korg_bridge.recall.memory.writes import decided_version

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["Outcome", "Staged", "finish_plan", "stage_plan", "write_plan"]

_LINKS = "INSERT INTO memory_links (src, dst, kind, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"


@dataclass(slots=True)
class Outcome:
    """What an import did: counts per status, the reasons it skipped memories, the memories it wrote."""

    counts: Counter[str] = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)


def _stage(conn: Tx, plan: Plan, undone: set[str]) -> None:
    """Write the plan's new memories (every version of them) and their similar links, not yet
    searchable, but those of ``undone``: on a team store before the tenant's turn, where no one
    else can see them."""
    keep = [n for n, row in enumerate(plan.staged) if row.id not in undone]
    rows = plan.staged if len(keep) == len(plan.staged) else [plan.staged[n] for n in keep]
    encoded = plan.encoded if len(keep) == len(plan.staged) else [plan.encoded[n] for n in keep]
    insert_versions(conn, rows, index=False, encoded=encoded)
    conn.executemany(
        _LINKS,
        [
            (step.lineage, dst, "similar", step.row.recorded_at)
            for step in plan.steps
            if step.status == "created" and step.row is not None and step.lineage not in undone
            for dst in step.links
        ],
    )


def _identities_written(plan: Plan) -> dict[str, str]:
    """Foreign identity (:func:`digest`) → the lineage this plan writes it to, the last step winning."""
    return {
        step.item.key: step.lineage
        for step in plan.steps
        if step.item.key and step.row is not None and step.lineage
    }


def _stage_identities(conn: Tx, plan: Plan, undone: set[str]) -> None:
    """Record the identities the plan writes for the first time (staged with its new memories)."""
    conn.executemany(
        "INSERT INTO import_identities (digest, id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [
            (key, memory_id)
            for key, memory_id in _identities_written(plan).items()
            if key not in plan.recorded and memory_id not in undone
        ],
    )


def _record_identities(conn: Tx, plan: Plan, undone: set[str]) -> None:
    """In turn: repoint identities recorded before that this plan wrote elsewhere; forget the staged
    ones of memories decided again (their new decision records its own)."""
    written = _identities_written(plan)
    conn.executemany(
        "UPDATE import_identities SET id = ? WHERE digest = ?",
        [
            (memory_id, key)
            for key, memory_id in written.items()
            if key in plan.recorded and plan.recorded[key] != memory_id and memory_id not in undone
        ],
    )
    stale = sorted(
        key for key, memory_id in written.items() if key not in plan.recorded and memory_id in undone
    )
    for part in chunks(stale):
        conn.execute(
            f"DELETE FROM import_identities WHERE digest IN ({', '.join('?' * len(part))})", tuple(part)
        )


def _texts(plan: Plan) -> dict[tuple[str, str], str]:
    """``(scope, text hash)`` of every row the plan writes → its lineage."""
    return {
        (s.row.scope, s.row.content_hash): s.lineage for s in plan.steps if s.row is not None and s.lineage
    }


def _taken(conn: Tx, plan: Plan, since: int | None) -> set[str]:
    """Lineages of the plan whose text someone else made a current memory of its scope: among every
    current memory (``since`` None: before the plan's own rows exist, a probe per text, few
    matches), or among the rows written after row ``since`` (in turn: no one else writes meanwhile,
    so those are few)."""
    texts = _texts(plan)
    new = new_lineages(plan)
    found: list[tuple[str, str, str]] = []
    if since is None:
        by_scope: dict[str, list[str]] = {}
        for scope, text_hash in texts:
            by_scope.setdefault(scope, []).append(text_hash)
        for scope, hashes in by_scope.items():
            for part in chunks(sorted(hashes)):
                marks = ", ".join("?" * len(part))
                found += conn.execute(
                    f"SELECT id, scope, content_hash FROM memory WHERE scope = ? AND superseded_by IS NULL "
                    f"AND content_hash IN ({marks})",
                    (scope, *part),
                ).fetchall()
    else:
        # The plan's own rows all carry its actor and moment (another import's differs by at least
        # a microsecond): leaving them out keeps this read as short as what others wrote.
        found = conn.execute(
            "SELECT id, scope, content_hash FROM memory WHERE rowid > ? AND superseded_by IS NULL "
            "AND NOT (actor = ? AND recorded_at = ?)",
            (since, plan.ctx.actor, iso(plan.ctx.now)),
        ).fetchall()
    taken: set[str] = set()
    for memory_id, scope, text_hash in found:
        mine = texts.get((str(scope), str(text_hash)))
        if mine is not None and memory_id not in new and memory_id != mine:
            taken.add(mine)
    return taken


def _check(conn: Tx, plan: Plan, staged: Staged) -> tuple[set[str], set[str]]:
    """In turn: the lineages whose plan no longer holds (to decide again), and the lineages the plan
    links to that were purged meanwhile."""
    written = {step.lineage for step in plan.steps if step.existing and step.lineage}
    linked = {dst for step in plan.steps for dst in step.links if dst in plan.facts}
    now = lineage_facts(conn, sorted(written | linked))
    undone = {memory_id for memory_id in written if now.get(memory_id) != plan.facts[memory_id]}
    gone = {
        memory_id for memory_id in linked if now.get(memory_id) is None or now[memory_id].state == "purged"
    }
    return undone | staged.undone | _taken(conn, plan, staged.mark), gone


def _unstage(conn: Tx, lineages: Sequence[str]) -> None:
    """Delete staged rows and links of new lineages whose plan no longer holds (this transaction's
    own, never committed)."""
    for part in chunks(list(lineages)):
        marks = ", ".join("?" * len(part))
        conn.execute(f"DELETE FROM memory_links WHERE src IN ({marks})", tuple(part))
        conn.execute(f"DELETE FROM memory WHERE id IN ({marks})", tuple(part))


def _extend(conn: Tx, ctx: Context, steps: Sequence[Step]) -> None:
    """Add the planned versions of memories the store held before, on their current heads (so a
    use count or provenance added meanwhile carries over), superseding those heads."""
    by_lineage: dict[str, list[Step]] = {}
    for step in steps:
        if step.lineage:
            by_lineage.setdefault(step.lineage, []).append(step)
    heads: dict[str, Version] = {}
    for part in chunks(sorted(by_lineage)):
        marks = ", ".join("?" * len(part))
        for version in select_versions(
            conn, f"id IN ({marks}) AND superseded_by IS NULL ORDER BY state DESC, rowid", tuple(part)
        ):
            heads[version.id] = version
    rows: list[Version] = []
    superseding: list[tuple[object, ...]] = []
    for memory_id, chain in by_lineage.items():
        base = heads[memory_id]
        written: list[Version] = []
        for step in chain:
            assert step.row is not None
            row = decided_version(ctx, step.item.draft, Decision(step.status, base), step.row.version)
            if written:
                written[-1].superseded_by, written[-1].superseded_at = row.version, row.recorded_at
            written.append(row)
            step.row = base = row
        first = written[0]
        superseding.append((first.version, first.recorded_at, memory_id, first.version))
        rows += written
    conn.executemany(
        "UPDATE memory SET superseded_by = ?, superseded_at = ? "
        "WHERE id = ? AND superseded_by IS NULL AND version <> ?",
        superseding,
    )
    insert_versions(conn, rows)


def _apply(conn: Tx, plan: Plan, undone: set[str], gone: set[str], outcome: Outcome) -> None:
    """Make the staged rows searchable, extend the memories the store held, count what happened."""
    kept = new_lineages(plan) - undone
    index_versions(conn, [s.row for s in plan.steps if s.row is not None and s.lineage in kept])
    _extend(conn, plan.ctx, [s for s in plan.steps if s.existing and s.lineage not in undone])
    for part in chunks(sorted(gone)):
        marks = ", ".join("?" * len(part))
        conn.execute(f"DELETE FROM memory_links WHERE dst IN ({marks})", tuple(part))
    for step in plan.steps:
        if step.row is not None and step.lineage in undone:
            continue
        outcome.counts[step.status] += 1
        if step.reason:
            outcome.skipped.append(step.reason)
        if step.row is not None and step.lineage:
            outcome.ids.add(step.lineage)
            outcome.counts["links"] += len([dst for dst in step.links if dst not in gone])


def write_plan(conn: Tx, plan: Plan) -> Outcome:
    """Write ``plan`` in ``conn`` (from ``store.write(stage=True)``): its new memories first, then,
    in turn, checked against the store as it is now (see the module docstring).

    Raises:
        KorgError: the store fails (nothing of the import is kept).
    """
    staged = stage_plan(conn, plan)
    conn.take_turn()
    return finish_plan(conn, plan, staged)


@dataclass(slots=True)
class Staged:
    """What :func:`stage_plan` found and wrote before the turn."""

    mark: int
    """The highest memory row before the plan's: whatever others write later lies above it."""
    undone: set[str]
    """Lineages whose text another memory of the scope had by then: not staged, decided again."""


def stage_plan(conn: Tx, plan: Plan) -> Staged:
    """The part of :func:`write_plan` before its turn: the plan's new memories, their links and
    identities, which no one else can see before commit -- but those whose text became a current
    memory since the plan read the store, looked for first, while the plan's rows do not yet exist
    to match their own texts. ``store.write(stage=True)`` lets one import of a team store's tenant
    at a time stage (a SQLite file's lock is held from the start), so no other import can commit
    between this look and the turn, and what others write meanwhile lies above ``mark``."""
    undone = _taken(conn, plan, None)
    mark = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM memory").fetchone()[0])
    _stage(conn, plan, undone)
    _stage_identities(conn, plan, undone)
    return Staged(mark, undone)


def finish_plan(conn: Tx, plan: Plan, staged: Staged) -> Outcome:
    """The part of :func:`write_plan` in turn (after ``conn.take_turn()``)."""
    outcome = Outcome()
    undone, gone = _check(conn, plan, staged)
    _record_identities(conn, plan, undone)
    if undone:
        stale = [s for s in plan.steps if s.row is not None and s.lineage in undone]
        _unstage(conn, sorted((undone - staged.undone) & new_lineages(plan)))
        gone |= undone & new_lineages(plan)
    _apply(conn, plan, undone, gone, outcome)
    known = dict(plan.known)
    if undone:
        # Decided again by the same rules, in turn, against the store as it is now: nothing to check.
        again = plan_foreign(conn, plan.ctx, [step.item for step in stale])
        _stage(conn, again, set())
        _stage_identities(conn, again, set())
        _record_identities(conn, again, set())
        _apply(conn, again, set(), set(), outcome)
        known.update(again.known)
    now = iso(plan.ctx.now)
    for src, dst, kind in plan.relations:
        ends = known.get(digest(src)), known.get(digest(dst))
        if ends[0] and ends[1] and ends[0] != ends[1]:
            outcome.counts["links"] += add_link(conn, ends[0], ends[1], kind, now)
    return outcome
