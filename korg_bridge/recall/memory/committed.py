"""What one committed memory write did: the value the projections and listeners receive.

Built by the operation once its transaction committed (:mod:`.operations`, :mod:`.forget`)
and handed to :func:`~.projections.after_commit`; a projection (the log, the mirror, the
Claude Code write-back) and a listener (:func:`~.projections.subscribe`) read it and nothing
else of the operation. It names what changed -- ids, versions, states, scopes, log entries --
never a memory's text: whoever needs the text reads that version from the store (an id and
a version never change meaning).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store
    from korg_bridge.recall.memory.records import Version
    from korg_bridge.recall.memory.scopes import Context

__all__ = ["CommittedChange", "Listener", "Projection", "Touched", "tenant_of"]


@dataclass(frozen=True, slots=True)
class Touched:
    """One memory a committed write changed: the version it is at now and the log entry saying so."""

    memory_id: str
    version: int
    """The version written (or, for a ``remember`` that found the fact stored already, the one it
    found; for a retire or a purge, the version the lineage was at)."""
    state: str
    """Its state after the commit: ``live``, ``pending``, ``retired`` or ``purged``."""
    scope: str
    status: str
    """What happened to it, as the operation log says: ``created``, ``merged``, ``superseded``,
    ``exists``, ``revised``, ``restored``, ``approved``, ``retired``, ``purged``."""
    op_id: str
    """The ``op_id`` of its operation-log entry (``args.op_id``): what a replica deduplicates on."""

    @classmethod
    def of(cls, version: Version, status: str, op_id: str, *, state: str | None = None) -> Touched:
        """``version`` as a write left it (``state``: its state after the commit, when the
        transaction changed it in place -- a retire, a purge)."""
        return cls(version.id, version.version, state or version.state, version.scope, status, op_id)


@dataclass(frozen=True, slots=True)
class CommittedChange:
    """What one committed write did: the value every projection and listener receives.

    A listener gets this and nothing else: the operation (``op``), who did it (``actor``),
    for whom (``tenant``: a team store's tenant, else None), and per memory its id, version,
    state, scope, status and log entry (``touched``). Its text is not here: a listener that
    needs it reads the version from the store (ids and versions never change meaning).
    """

    op: str
    """``remember``, ``revise``, ``restore``, ``approve`` or ``forget`` (through every projection);
    ``reject`` or ``review``: a person's curation in the console (:mod:`.review`);
    ``sync``: other machines' operations applied by ``korg-recall sync`` (through every projection);
    ``mirror_edit`` or ``mirror_import``: a hand edit or a new file of the Markdown mirror taken in
    before an operation, which the listeners alone are told of (its log entry is appended and its
    file rewritten with the operation's projections)."""
    actor: str
    tenant: str | None
    touched: tuple[Touched, ...]
    ctx: Context
    """The call's context (environment, approval mode, mirror switch, time)."""
    mirror_problems: tuple[str, ...] = ()
    """What reading the mirror back found before the write, and files a purge left: reported
    under ``checks.mirror`` with what the mirror projection finds."""

    @classmethod
    def of(
        cls, ctx: Context, op: str, touched: Iterable[Touched], *, mirror_problems: Iterable[str] = ()
    ) -> CommittedChange:
        """The change ``ctx``'s caller committed: its actor, and its tenant when it has one."""
        return cls(op, ctx.actor, tenant_of(ctx), tuple(touched), ctx, tuple(mirror_problems))

    @property
    def ids(self) -> tuple[str, ...]:
        """The memories whose files follow them (every one touched but the purged)."""
        return tuple(t.memory_id for t in self.touched if t.state != "purged")

    @property
    def purged(self) -> tuple[str, ...]:
        """The memories erased: nothing of them may remain in any copy."""
        return tuple(t.memory_id for t in self.touched if t.state == "purged")


Projection = Callable[["Store", CommittedChange], Mapping[str, Any]]
"""A copy kept of what was committed: takes the change and the open store, returns its checks."""
Listener = Callable[[CommittedChange], None]
"""An in-process subscriber told of every committed change; what it returns is ignored."""


def tenant_of(ctx: Context) -> str | None:
    """The tenant a change is written for (None without one, or when the setting is unreadable:
    the write committed, so this never fails it)."""
    from korg_bridge.recall.tenancy import tenant_from

    try:
        return tenant_from(ctx.env)
    except KorgError:
        return None
