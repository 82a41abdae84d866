"""What a list of memories is made from, kept in memory for a SQLite store: one small row per
version (no text), so filtering, counting and ordering 10,000 memories costs a few milliseconds
instead of a walk over every row's page of the table for each list shown.

The copy is read again whenever the store changed: another process's commit moves SQLite's
``PRAGMA data_version``, a commit on the console's own connection moves its ``total_changes``.
A team store is asked each time (PostgreSQL's indexes and planner serve the same queries), so
:func:`heads_of` returns None for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx

__all__ = ["Head", "heads_of"]


@dataclass(frozen=True, slots=True)
class Head:
    rowid: int
    id: str
    version: int
    scope: str
    type: str
    state: str
    trust: str
    pinned: bool
    recorded_at: str
    actor: str
    tags: str
    """The stored JSON array, matched as text for a tag filter (exact element: ``"tag"`` quoted)."""
    superseded: bool
    reviewed: bool
    """Whether its provenance mentions a review at all (the exact time is read for those only)."""


_SQL = (
    "SELECT rowid, id, version, scope, type, state, trust, pinned, recorded_at, actor, tags, "
    "superseded_by IS NOT NULL, instr(provenance, '\"review\"') > 0 FROM memory WHERE state <> 'purged'"
)

_lock = threading.Lock()
_kept: dict[tuple[int, str], tuple[tuple[int, int], list[Head]]] = {}


def heads_of(store: Store, conn: Tx) -> list[Head] | None:
    """Every unpurged version's listing row, pinned first, then newest first (ties: the newer row),
    from the copy kept for ``store`` when it is current (None for a team store)."""
    raw: Any = getattr(store, "conn", None)
    if store.kind != "sqlite" or raw is None:
        return None
    mark = (int(conn.execute("PRAGMA data_version").fetchone()[0]), int(raw.total_changes))
    with _lock:
        found = _kept.get((id(store), store.label))
    if found is not None and found[0] == mark:
        return found[1]
    rows = [
        Head(
            int(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), str(r[5]), str(r[6]), bool(r[7]), str(r[8]),
            str(r[9]), str(r[10] or "[]"), bool(r[11]), bool(r[12]),
        )
        for r in conn.execute(_SQL)
    ]  # fmt: skip
    rows.sort(key=lambda h: (h.pinned, h.recorded_at, h.rowid), reverse=True)  # a list's order, once
    with _lock:
        _kept[(id(store), store.label)] = (mark, rows)
    return rows
