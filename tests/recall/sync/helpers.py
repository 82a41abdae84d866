"""What the sync tests read of a machine's store directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
from korg_bridge.recall.sync.canonical import canonical_export


def canonical(store: Path) -> list[dict[str, Any]]:
    with SqliteStore(store) as opened, opened.reading() as tx:
        return canonical_export(tx)
