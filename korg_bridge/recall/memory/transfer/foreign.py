"""Foreign memories (Markdown, the MCP memory server's file, mem0) into the store: decided
against a snapshot, then written in one transaction that holds the write lock only briefly.

**Planning** reads the scopes the import writes to once, in one read transaction
(which never holds a writer off): every ``(scope, text hash)`` they ever held, each
lineage's head, version count and state, the foreign identities imported before,
and the live and pending heads, which go into a :class:`~.dedupe.ScopeIndex`. Then
every memory is decided in file order, as ``remember`` would decide it one after
the other -- the write policy's rules (:func:`~.policy.judge`, with the candidates
of :mod:`.dedupe`) on a model of the store that each decision updates -- and the
rows it becomes are built (:func:`~.writes.decided_version`). Nothing is written.

A text the scope has ever held is not imported again: ``exists``, or -- when the
memory that held it was retired or purged -- ``skipped``, with the reason in the
report. So is a memory whose foreign identity (``mem0:<id>`` …) or Markdown ``id``
names a memory that was forgotten: tombstones win.

**Writing** (:mod:`.staging`) is one transaction, so the import lands whole or
not at all. Its new memories are written first (on a team store before the
tenant's write lock is taken: uncommitted rows are invisible to everyone else);
then, holding the lock, what the plan relied on is checked against the store as
it is now: a memory it adds a version to must be as it was read (its versions and
state), a text it creates must not have become a current memory of its scope
meanwhile, and a memory it links to must not have been purged. Whatever fails a
check is undone in the transaction and planned again by the same rules, in turn,
against the store as it now is. A near duplicate written by someone else while
the import was planned is not merged with (a missed merge costs one line); an
exact one is never duplicated, and a change made meanwhile is never reverted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.records import Version
from korg_bridge.recall.memory.rows import chunks, select_versions
from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.memory.transfer.dedupe import ScopeIndex
from korg_bridge.recall.memory.write_policy import Decision, Draft, judge
from korg_bridge.recall.memory.writes import decided_version

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "FORGOTTEN",
    "Facts",
    "Foreign",
    "Plan",
    "Step",
    "digest",
    "lineage_facts",
    "new_lineages",
    "plan_foreign",
]

FORGOTTEN = ("retired", "purged")
_OUR_ID = re.compile(r"^m[a-z2-7]{10}$")


@dataclass(slots=True)
class Foreign:
    """One foreign memory to import: its draft, its foreign identity, where it was read."""

    draft: Draft
    identity: str | None
    where: str
    key: str | None = field(init=False, default=None)
    """The identity as ``import_identities`` keeps it (:func:`digest`)."""

    def __post_init__(self) -> None:
        self.key = digest(self.identity) if self.identity else None

    @property
    def our_id(self) -> str | None:
        """The memory id a Markdown file of ours names in its front matter (a memory of ours)."""
        source = self.draft.source or {}
        named = source.get("foreign_id")
        mine = source.get("import") == "markdown" and isinstance(named, str) and _OUR_ID.match(named)
        return str(named) if mine else None


@dataclass(slots=True)
class Facts:
    """What a lineage was when it was read: the decisions that rely on it are checked against it."""

    scope: str
    last: int
    """Its highest version number (a proposal's included): the next version is one more."""
    head: int | None
    state: str | None
    """The current version's state (``head()``'s: the newest non-pending head, else the proposal)."""


def _facts(rows: Iterable[Sequence[Any]]) -> dict[str, Facts]:
    """Facts per lineage from ``(id, version, state, superseded_by, scope)`` rows."""
    found: dict[str, Facts] = {}
    for memory_id, number, state, by, scope in rows:
        facts = found.setdefault(str(memory_id), Facts(str(scope), 0, None, None))
        facts.last = max(facts.last, int(number))
        if by is None and (facts.head is None or _current_first(state, number, facts)):
            facts.head, facts.state = int(number), str(state)
    return found


def _current_first(state: str, number: int, facts: Facts) -> bool:
    if (state == "pending") != (facts.state == "pending"):
        return state != "pending"
    return number > (facts.head or 0)


_FACT_COLUMNS = "id, version, state, superseded_by, scope"


def lineage_facts(conn: Tx, ids: Sequence[str]) -> dict[str, Facts]:
    """:class:`Facts` of the lineages ``ids`` as the store holds them now."""
    rows: list[Sequence[Any]] = []
    for part in chunks(list(dict.fromkeys(ids))):
        marks = ", ".join("?" * len(part))
        rows += conn.execute(
            f"SELECT {_FACT_COLUMNS} FROM memory WHERE id IN ({marks})", tuple(part)
        ).fetchall()
    return _facts(rows)


@dataclass(slots=True)
class Step:
    """What one foreign memory became in the plan."""

    item: Foreign
    status: str
    """``created``, ``merged``, ``superseded``, ``exists`` or ``skipped``."""
    lineage: str | None = None
    """The lineage it writes to (or the one already holding its text)."""
    row: Version | None = None
    links: list[str] = field(default_factory=list)
    """Lineages a created memory is linked to as ``similar``."""
    existing: bool = False
    """It adds a version to a memory the store held before the import."""
    reason: str | None = None


@dataclass(slots=True)
class Plan:
    """An import decided against a snapshot: its steps in file order, and what they relied on."""

    ctx: Context
    steps: list[Step]
    facts: dict[str, Facts]
    known: dict[str, str]
    """Foreign identity (:func:`digest`) → the lineage holding it (imported before, or by this plan)."""
    recorded: dict[str, str]
    """What ``import_identities`` held when the plan read it."""
    relations: list[tuple[str, str, str]]
    staged: list[Version] = field(default_factory=list)
    """Every row of the memories the plan creates, in file order: written before the turn."""
    encoded: list[tuple[object, ...]] = field(default_factory=list)
    """Their :meth:`~.records.Version.to_row`, made while planning rather than in the transaction."""


def digest(identity: str) -> str:
    """How ``import_identities`` keeps a foreign identity: its SHA-256, nothing readable."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()


def _identities(conn: Tx) -> tuple[dict[str, str], dict[str, str]]:
    """Foreign identity (by :func:`digest`) → the lineage it became, and the digests
    ``import_identities`` holds. The table outlives a purge; the ``source`` of memories imported
    before it existed still names theirs (the latest row naming one wins)."""
    identity = conn.source_field("identity")
    rows = conn.execute(
        f"SELECT id, {identity} FROM memory WHERE source IS NOT NULL AND {identity} IS NOT NULL ORDER BY rowid"
    )
    known = {digest(str(name)): str(memory_id) for memory_id, name in rows}
    recorded = {
        str(key): str(memory_id)
        for key, memory_id in conn.execute("SELECT digest, id FROM import_identities")
    }
    return {**known, **recorded}, recorded


class _Model:
    """The store as the plan sees it: read once, then changed by each decision in turn."""

    def __init__(self, conn: Tx, items: Sequence[Foreign]) -> None:
        scopes = sorted({item.draft.scope for item in items})
        self.held: dict[tuple[str, str], str] = {}
        rows: list[Sequence[Any]] = []
        for scope in scopes:
            for memory_id, number, state, by, in_scope, text_hash in conn.execute(
                f"SELECT {_FACT_COLUMNS}, content_hash FROM memory WHERE scope = ?", (scope,)
            ):
                self.held.setdefault((str(in_scope), str(text_hash)), str(memory_id))
                rows.append((memory_id, number, state, by, in_scope))
        self.facts = _facts(rows)
        self.known, self.recorded = _identities(conn)
        named = [item.our_id for item in items if item.our_id]
        elsewhere = [mid for mid in [*self.known.values(), *named] if mid not in self.facts]
        self.facts.update(lineage_facts(conn, elsewhere))
        self.read = {
            memory_id: Facts(f.scope, f.last, f.head, f.state) for memory_id, f in self.facts.items()
        }
        self.heads: dict[str, Version] = {}
        self.indexes = {scope: ScopeIndex() for scope in scopes}
        for scope in scopes:
            # Proposals first, so that a lineage's live head replaces its proposal (the policy's choice).
            current = select_versions(
                conn,
                "scope = ? AND superseded_by IS NULL AND state IN ('live', 'pending') ORDER BY state DESC, rowid",
                (scope,),
            )
            for version in current:
                self.indexes[scope].put(version)
                self.heads[version.id] = version
        known_heads = [mid for mid in self.known.values() if mid in self.facts and mid not in self.heads]
        for part in chunks(list(dict.fromkeys(known_heads))):
            marks = ", ".join("?" * len(part))
            for version in select_versions(
                conn, f"id IN ({marks}) AND superseded_by IS NULL ORDER BY state DESC, rowid", tuple(part)
            ):
                self.heads[version.id] = version
        self.planned: dict[str, list[Version]] = {}
        """Rows the plan adds, per lineage."""

    def state(self, memory_id: str) -> str | None:
        facts = self.facts.get(memory_id)
        return facts.state if facts is not None else None

    def add(self, row: Version) -> None:
        """``row`` becomes its lineage's head: the rows it replaces are marked superseded by it."""
        for earlier in self.planned.setdefault(row.id, []):
            if earlier.superseded_by is None:
                earlier.superseded_by, earlier.superseded_at = row.version, row.recorded_at
        self.planned[row.id].append(row)
        facts = self.facts.setdefault(row.id, Facts(row.scope, 0, None, None))
        facts.last, facts.head, facts.state = row.version, row.version, row.state
        self.heads[row.id] = row
        self.indexes[row.scope].put(row)


def _skipped(item: Foreign, memory_id: str, state: str | None, what: str) -> Step:
    why = f"{item.where}: {what} {memory_id}, which was {state or 'forgotten'} here; not imported again"
    return Step(item, "skipped", memory_id, reason=why)


def _step(model: _Model, ctx: Context, item: Foreign) -> Step:
    draft = item.draft
    holder = model.held.get((draft.scope, draft.content_hash))
    if holder is not None:
        state = model.state(holder)
        if state in FORGOTTEN:
            return _skipped(item, holder, state, "the same text as")
        return Step(item, "exists", holder)
    target: str | None = None
    previous = model.known.get(item.key) if item.key else None
    if previous is not None:
        state = model.state(previous)
        if state is None or state in FORGOTTEN:
            return _skipped(item, previous, state, "an earlier import of it is")
        if model.facts[previous].scope == draft.scope:
            target = previous  # the foreign memory changed: a new version of what it became here
    ours = item.our_id
    if ours is not None and model.state(ours) in FORGOTTEN:
        return _skipped(item, ours, model.state(ours), "it is")
    if target is not None:
        decision = Decision("superseded", model.heads[target])
    else:
        decision = judge(draft, model.indexes[draft.scope].candidates(draft.title, draft.body), {})
    base = decision.target
    if decision.status == "created" or base is None:
        row = decided_version(ctx, draft, decision)
        step = Step(item, "created", row.id, row, [similar.id for similar in decision.similar])
    else:
        row = decided_version(ctx, draft, decision, model.facts[base.id].last + 1)
        step = Step(item, decision.status, base.id, row, existing=base.id in model.read)
    model.add(row)
    model.held[(draft.scope, draft.content_hash)] = row.id
    if item.key:
        model.known[item.key] = row.id
    return step


def new_lineages(plan: Plan) -> set[str]:
    """The lineages the plan creates."""
    return {step.lineage for step in plan.steps if step.status == "created" and step.lineage}


def plan_foreign(
    conn: Tx, ctx: Context, items: Sequence[Foreign], relations: Sequence[tuple[str, str, str]] = ()
) -> Plan:
    """Decide every foreign memory, in order, against the store as ``conn`` shows it (a read
    transaction: nothing is written, and no writer is held off)."""
    model = _Model(conn, items)
    steps = [_step(model, ctx, item) for item in items]
    plan = Plan(ctx, steps, model.read, model.known, model.recorded, list(relations))
    new = new_lineages(plan)
    plan.staged = [step.row for step in steps if step.row is not None and step.lineage in new]
    plan.encoded = [row.to_row() for row in plan.staged]
    return plan
