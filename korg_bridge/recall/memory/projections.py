"""After commit: what a memory write hands on, and to whom, in order.

A write (``remember``, ``revise``, ``restore``, ``memories --approve``, ``forget``)
is one store transaction; everything that follows it is a *projection* of what that
transaction committed -- a copy kept somewhere else, which may fail or lag without
undoing the write. The operation builds one :class:`CommittedChange` and calls
:func:`after_commit` once; the projections run in this order:

1. the operation log: the entries queued in the transaction are appended
   (:func:`~.oplog.flush`; a team store appended them in the transaction already);
2. the Markdown mirror: the files of the touched memories (:mod:`.mirror.projection`);
3. projections the composition root added (:func:`add_projection`): the Claude Code
   write-back (:mod:`korg_bridge.recall.interop.claude.writeback`), registered by
   :mod:`korg_bridge.recall.cli.app` -- so ``recall/memory`` never imports ``interop``;
4. the listeners (:func:`subscribe`): in-process callables told of every committed
   change (the console's live view and the engine's/sync's replication subscribe here).

Each projection receives the change and the open store, returns the ``checks`` it
reports (``oplog``, ``mirror``, ``claude_writeback``: the keys a command's result
carries), and never calls back into the operation. None undoes a committed write: a
projection reports its failure in its check (only a bad value of its own switch is
raised, as a configuration error); a listener that raises is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store
    from korg_bridge.recall.memory.records import Version
    from korg_bridge.recall.memory.scopes import Context

__all__ = [
    "CommittedChange",
    "Listener",
    "Projection",
    "Touched",
    "add_projection",
    "after_commit",
    "notify",
    "subscribe",
]

logger = logging.getLogger(__name__)


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
    """``remember``, ``revise``, ``restore``, ``approve`` or ``forget``."""
    actor: str
    tenant: str | None
    touched: tuple[Touched, ...]
    ctx: Context
    """The call's context (environment, approval mode, mirror switch, time)."""
    mirror_problems: tuple[str, ...] = ()
    """What reading the mirror back found before the write, and files a purge left: reported
    under ``checks.mirror`` with what the mirror projection finds."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Reserved for what a later operation adds; empty today."""

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

_added: dict[str, Projection] = {}
_listeners: list[Listener] = []


def add_projection(name: str, projection: Projection) -> None:
    """Run ``projection`` after the log and the mirror for every committed change (the
    composition root's call; adding a name again replaces that projection in its place)."""
    _added[name] = projection


def subscribe(listener: Listener) -> Callable[[], None]:
    """Tell ``listener`` of every committed change from now on; returns the call that stops it.

    A listener runs in the writing process, after the change is committed and its copies are
    written, with no lock held; it must be quick (queue the work elsewhere) and it cannot fail
    the write: an exception is logged and the next listener runs.
    """
    _listeners.append(listener)

    def unsubscribe() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return unsubscribe


def notify(change: CommittedChange) -> None:
    """Tell every listener of ``change`` (a change that touched no memory is not news)."""
    if not change.touched:
        return
    for listener in list(_listeners):
        try:
            listener(change)
        except Exception:  # a subscriber's bug must not fail a committed write
            logger.exception("a listener of committed memory changes failed on %s", change.op)


def after_commit(store: Store, change: CommittedChange) -> dict[str, Any]:
    """Run the projections of ``change`` in order, then tell the listeners; return the checks.

    Raises:
        ConfigError: a projection's switch has a bad value (``KORG_RECALL_CLAUDE_WRITEBACK``): the
            write stands; the command says what to fix.
    """
    from korg_bridge.recall.memory import oplog
    from korg_bridge.recall.memory.mirror import projection as mirror_projection

    checks: dict[str, Any] = {}
    for run in (oplog.flush, mirror_projection.project, *_added.values()):
        checks.update(run(store, change))
    notify(change)
    return checks


def tenant_of(ctx: Context) -> str | None:
    """The tenant a change is written for (None without one, or when the setting is unreadable:
    the write committed, so this never fails it)."""
    from korg_bridge.recall.tenancy import tenant_from

    try:
        return tenant_from(ctx.env)
    except KorgError:
        return None
