"""The memory store's health and figures, for ``korg-recall stats`` and ``memories --stats``.

:func:`memory_stats` never creates a store (on a machine with none it says so)
and never writes one. The counts are the same query on both backends; what a
store says about itself comes from :meth:`~.backend.Store.describe` (a SQLite
store runs ``PRAGMA integrity_check`` and names its log and newest backup; a team
store walks the tenant's operation-log chain), and a SQLite store's mirror folder
is walked to find files that cannot be read back.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory import sources
from korg_bridge.recall.memory.backend.factory import open_store, store_exists
from korg_bridge.recall.memory.mirror import files as mirror
from korg_bridge.recall.memory.write_policy import SCOPE_SOFT_CAP
from korg_bridge.recall.paths import MIRROR_NAME, store_location

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["LISTED", "has_scope", "memory_stats"]

LISTED = 20
"""Paths a list of problems names (the rest counted): ``stats`` is a summary, through the bridge too."""


def _first(items: list[str], keep: int = LISTED) -> list[str]:
    return items if len(items) <= keep else [*items[:keep], f"… and {len(items) - keep:,} more"]


def _grouped(conn: Tx, column: str, where: str) -> dict[str, int]:
    rows = conn.execute(
        f"SELECT {column}, count(*) FROM memory WHERE {where} GROUP BY {column} ORDER BY {column}"
    )
    return {str(key): int(count) for key, count in rows}


def _unparseable(conn: Tx, root: Path) -> list[str]:
    """Mirror files that cannot be read back: recorded as such, or new and failing to parse."""
    known = {path: origin for path, origin in conn.execute("SELECT path, origin FROM mirror_files")}
    bad = [str(root / path) for path, origin in known.items() if origin == "unparseable"]
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if not name.endswith(".md") or name.startswith("."):
                continue
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if rel in known:
                continue
            found = mirror.read_file(path)
            if found is None:
                continue
            data, state = found
            try:
                if state.size > mirror.MAX_FILE_BYTES:
                    raise mirror.FrontMatterError("too big")
                mirror.parse(data.decode("utf-8"))
            except (UnicodeDecodeError, mirror.FrontMatterError):
                bad.append(str(path))
    return sorted(bad)


def _figures(conn: Tx) -> dict[str, Any]:
    current = "superseded_by IS NULL AND state != 'pending'"
    by_scope = _grouped(conn, "scope", f"{current} AND state = 'live'")
    return {
        "memories": sum(by_scope.values()),
        "versions": conn.execute("SELECT count(*) FROM memory").fetchone()[0],
        "by_scope": by_scope,
        "by_type": _grouped(conn, "type", f"{current} AND state = 'live'"),
        "by_state": _grouped(conn, "state", "superseded_by IS NULL"),
        "untrusted": conn.execute(
            f"SELECT count(*) FROM memory WHERE {current} AND trust = 'untrusted' AND state = 'live'"
        ).fetchone()[0],
        "pending": conn.execute(
            "SELECT count(*) FROM memory WHERE superseded_by IS NULL AND state = 'pending'"
        ).fetchone()[0],
        "conflicts": conn.execute(
            f"SELECT count(*) FROM memory WHERE {current} AND conflict = 1 AND state = 'live'"
        ).fetchone()[0],
    }


def has_scope(env: Mapping[str, str], scope: str) -> bool:
    """Whether the memory store holds any memory of ``scope`` (never creating a store).

    Raises:
        ConfigError: the store cannot be used.
        NetworkError: a team store's server cannot be reached.
    """
    if not store_exists(env):
        return False
    with open_store(env) as store, store.reading() as conn:
        return conn.execute("SELECT 1 FROM memory WHERE scope = ? LIMIT 1", (scope,)).fetchone() is not None


def memory_stats(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Integrity, counts per scope/type/state, the soft cap, untrusted/pending/conflict counts,
    unparseable mirror files, the operation log and the newest backup (SQLite); for a team store,
    the tenant's counts, its operation log and the schema.

    Raises:
        ConfigError: the store cannot be used (see :mod:`.store`, :mod:`.pg.store`).
        NetworkError: a team store's server cannot be reached.
    """
    env = os.environ if env is None else env
    where = store_location(env)
    if not store_exists(env):
        return {"store": where.label, "exists": False, "memories": 0}
    with open_store(env) as store:
        own = store.describe()  # first: a SQLite store's integrity check before anything else
        with store.reading() as conn:
            figures = _figures(conn)
            unparseable = _unparseable(conn, store.folder / MIRROR_NAME) if store.folder is not None else None
            outside = sources.describe(store, conn)  # Claude Code's folders, when they are read
        from korg_bridge.recall.memory.backfill import vector_stats

        vectors = vector_stats(store, env)  # with a model on disk: how many live memories have a vector
    over = {scope: count for scope, count in figures["by_scope"].items() if count > SCOPE_SOFT_CAP}
    result: dict[str, Any] = {"store": store.label, "exists": True, **own, **figures}
    result["soft_cap"] = {"per_scope": SCOPE_SOFT_CAP, "over": over}
    if store.folder is not None:
        result["mirror"] = {
            "folder": str(store.folder / MIRROR_NAME),
            "unparseable": _first(unparseable or []),
        }
    for name, section in outside.items():
        result[name] = {
            key: _first(value) if isinstance(value, list) else value for key, value in section.items()
        }
    if vectors is not None:
        result["vectors"] = vectors
    return result
