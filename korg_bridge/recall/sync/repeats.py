"""Exact repeats across machines: the same text remembered on two machines before they synced.

On one machine a repeat never becomes a second memory: the write policy finds the live memory of
the scope with the same content hash, and the writer joins its provenance (``exists``). Two
machines that have not synced yet cannot see each other's memory, so each stores its own; a sync
that applied another machine's memories makes them one here, by the same rule (a contradiction --
any other text -- is never merged: only equal content hashes are compared):

* **which**: live heads of one scope with the same content hash and the same ``key``, each the
  only row of its lineage (never revised, restored, retired, pending or in conflict) and not a copy
  of someone else's file. A memory revised or retired on either machine before the sync is left
  alone: both stay visible, and a person decides (``forget`` one);
* **kept**: the one whose creating operation comes first in sync's one order
  (``sync_versions.made``), so every machine keeps the same one, whichever synced first;
* **the others** are retired (hidden, restorable; never purged), each keeping its own provenance
  plus an entry naming the kept memory (``source: {"kind": "duplicate", "of": ID}``), so its id
  still resolves (``memories --ids``) and points at the kept one; their provenance entries are
  appended to the kept memory's, each marked ``merged_from``, as a repeat's provenance grows on one
  machine -- every write of the text stays visible, with its machine, actor and session.

All of it changes lineage-level columns only (state, retired_at, provenance), so it travels as
``meta`` records in the same sync (:mod:`.steps` exports again after it). A machine that receives
those records with the other memory sees one live head and does nothing; two machines that found
the same repeat each on its own made the same choice, and the later change in the one order wins
on both. Either way every machine ends with the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.records import Version, is_derived
from korg_bridge.recall.memory.rows import select_versions, update_head

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["DUPLICATE_KIND", "Merged", "merge_repeats"]

DUPLICATE_KIND = "duplicate"
"""``source.kind`` of the provenance entry that retires a repeat: ``of`` names the kept memory."""

_SOLE_LIVE_ROW = (
    "superseded_by IS NULL AND state = 'live' AND conflict = 0 "
    "AND rowid IN (SELECT rowid FROM sync_versions WHERE made <> '') "
    "AND NOT EXISTS (SELECT 1 FROM memory o WHERE o.id = memory.id AND o.rowid <> memory.rowid)"
)
"""A live row that is its lineage's only one, and that sync knows (it has a creating operation)."""


@dataclass(frozen=True, slots=True)
class Merged:
    """One repeat made one: ``retired`` is now a retired duplicate of ``kept``."""

    kept: str
    retired: str

    def to_dict(self) -> dict[str, str]:
        return {"kept": self.kept, "retired": self.retired}


def _made(conn: Tx, rowids: Iterable[int]) -> dict[int, str]:
    wanted = list(rowids)
    marks = ", ".join("?" * len(wanted))
    return {
        int(rowid): str(made)
        for rowid, made in conn.execute(
            f"SELECT rowid, made FROM sync_versions WHERE rowid IN ({marks})", tuple(wanted)
        ).fetchall()
    }


def merge_repeats(conn: Tx, touched: Iterable[str], *, machine: str, actor: str, now: str) -> list[Merged]:
    """Make exact repeats among the memories a sync ``touched`` (and those they repeat) one memory,
    in the caller's transaction (see the module docstring); what was merged."""
    ids = sorted(set(touched))
    groups: set[tuple[str, str]] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        for version in select_versions(conn, f"id IN ({marks}) AND {_SOLE_LIVE_ROW}", tuple(chunk)):
            groups.add((version.scope, version.content_hash))
    if not groups:
        return []
    # One pass over the live heads finds the texts held twice at all: a first sync of thousands of
    # memories then looks closer at those few instead of at every one it brought.
    twice = {
        (str(scope), str(content_hash))
        for scope, content_hash in conn.execute(
            "SELECT scope, content_hash FROM memory WHERE superseded_by IS NULL AND state = 'live' "
            "GROUP BY scope, content_hash HAVING count(*) > 1"
        ).fetchall()
    }
    merged: list[Merged] = []
    for scope, content_hash in sorted(groups & twice):
        found = select_versions(
            conn, f"scope = ? AND content_hash = ? AND {_SOLE_LIVE_ROW}", (scope, content_hash)
        )
        alike: dict[str | None, list[Version]] = {}
        for version in found:
            if not is_derived(version):
                alike.setdefault(version.key, []).append(version)
        for same in alike.values():
            if len(same) < 2:
                continue
            made = _made(conn, (v.rowid for v in same if v.rowid is not None))
            same.sort(key=lambda v: (made.get(v.rowid or 0, ""), v.id))
            kept, *repeats = same
            merged.extend(_merge(conn, kept, repeats, machine=machine, actor=actor, now=now))
    return merged


def _merge(
    conn: Tx, kept: Version, repeats: list[Version], *, machine: str, actor: str, now: str
) -> list[Merged]:
    provenance: list[dict[str, Any]] = list(kept.provenance)
    for repeat in repeats:
        provenance.extend({**entry, "merged_from": repeat.id} for entry in repeat.provenance)
        marker = {
            "actor": actor,
            "at": now,
            "machine": machine,
            "source": {"kind": DUPLICATE_KIND, "of": kept.id},
        }
        update_head(conn, repeat, state="retired", retired_at=now, provenance=[*repeat.provenance, marker])
    update_head(conn, kept, provenance=provenance)
    return [Merged(kept.id, repeat.id) for repeat in repeats]
