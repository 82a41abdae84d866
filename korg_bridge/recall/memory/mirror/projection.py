"""The mirror's projection: after a write commits, the files of the memories it touched follow.

The second step after commit (:mod:`~korg_bridge.recall.memory.projections`), once the log
has its entries: :func:`~.files.reconcile` writes the file of each touched memory that is
live, renames it when its title changed, and removes the file of one no longer live (a
purge removed its files inside the transaction already: :func:`~.files.erase`). What it
finds is reported under ``checks.mirror``, after what reading the mirror back found before
the write; a failure is reported there and repaired by the next call (the memories stay
queued in ``mirror_dirty``), never raised over the committed write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError
from korg_bridge.recall.memory.mirror import files

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store
    from korg_bridge.recall.memory.committed import CommittedChange

__all__ = ["project"]


def project(store: Store, change: CommittedChange) -> dict[str, Any]:
    """Bring the mirror files of ``change``'s memories in line; ``checks.mirror`` says how it went
    (``off`` with ``KORG_RECALL_MIRROR=0`` and always for a team store, the problems, or ``up to date``)."""
    if not change.ctx.mirror:
        return {"mirror": "off"}
    found = list(change.mirror_problems)
    if change.ids:
        try:
            found.extend(files.reconcile(store, ids=list(change.ids)))
        except KorgError as exc:
            found.append(exc.message)
    return {"mirror": found or "up to date"}
