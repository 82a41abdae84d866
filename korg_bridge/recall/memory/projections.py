"""After commit: what a memory write hands on, and to whom, in order.

A write (``remember``, ``revise``, ``restore``, ``memories --approve``, ``forget``)
is one store transaction; everything that follows it is a *projection* of what that
transaction committed -- a copy kept somewhere else, which may fail or lag without
undoing the write. The operation builds one :class:`~.committed.CommittedChange` (the
value, re-exported here for subscribers) and calls
:func:`after_commit` once; the projections run in this order:

1. the operation log: the entries queued in the transaction are appended
   (:func:`~.oplog.flush`; a team store appended them in the transaction already);
2. the Markdown mirror: the files of the touched memories (:mod:`.mirror.projection`);
3. projections the composition root added (:func:`add_projection`): the Claude Code
   write-back (:mod:`korg_bridge.recall.interop.claude.writeback`), registered by
   :mod:`korg_bridge.recall.cli.wiring` -- so ``recall/memory`` never imports ``interop``;
4. the listeners (:func:`subscribe`): in-process callables told of every committed
   change (the console's live view and the engine's/sync's replication subscribe here).

A hand edit of the Markdown mirror taken in before an operation (:mod:`.mirror.readback`)
is a committed change too: the listeners are told of it at once (:func:`notify`); its log
entry and its file follow with the operation's projections.

Each projection receives the change and the open store, returns the ``checks`` it
reports (``oplog``, ``mirror``, ``claude_writeback``: the keys a command's result
carries), and never calls back into the operation. None undoes a committed write: a
projection reports its failure in its check (only a bad value of its own switch is
raised, as a configuration error); a listener that raises is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.committed import CommittedChange, Listener, Projection, Touched

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store

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
