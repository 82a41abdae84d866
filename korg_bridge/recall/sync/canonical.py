"""The canonical export: what two machines that applied the same operations hold alike.

The lossless export (:func:`korg_bridge.recall.memory.transfer.export.jsonl_lines`), with what is
a machine's own left out: the header (its time), the order of rows (each machine inserted in the
order it learned of them), use counts (recall here is not recall there), ``similar`` links (the
write policy's, made where the memory was written), scopes other than user and project, and the
tombstones of purged memories (a machine that never held one has none). Sorted by id and version.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.transfer.export import jsonl_lines
from korg_bridge.recall.sync.projects import syncs

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["canonical_export"]

_MACHINE_OWN = ("use_count", "last_used_at")


def canonical_export(conn: Tx) -> list[dict[str, Any]]:
    """The canonical export of the store ``conn`` reads (see the module docstring)."""
    rows = [json.loads(line) for line in jsonl_lines(conn, scope=None, now=0.0)][1:]
    versions = [row for row in rows if row.get("record") == "version" and syncs(str(row["scope"]))]
    purged = {row["id"] for row in versions if row["state"] == "purged"}
    kept = [
        {name: value for name, value in row.items() if name not in _MACHINE_OWN}
        for row in versions
        if row["id"] not in purged
    ]
    return sorted(kept, key=lambda row: (row["id"], row["version"]))
