"""What the sync tests read of a machine's store directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
from korg_bridge.recall.sync.canonical import canonical_export


def canonical(store: Path) -> list[dict[str, Any]]:
    with SqliteStore(store) as opened, opened.reading() as tx:
        return canonical_export(tx)


def remember_many(home_env: dict[str, str], store: Path, texts: list[str]) -> list[str]:
    """Remember ``texts`` in one machine's store in this process (real writes, no child per memory)."""
    from korg_bridge.recall.memory.operations import remember
    from korg_bridge.recall.memory.scopes import Context

    ctx = Context.from_env(home_env)
    with SqliteStore(store) as opened:
        return [
            str(remember(opened, ctx, {"content": text, "type": "note", "scope": "user"})["id"])
            for text in texts
        ]
