"""The memory store's health and figures, for ``korg-recall stats`` and ``memories --stats``.

:func:`memory_stats` never creates a store (on a machine with none it says so)
and never writes one: it reads the file, runs ``PRAGMA integrity_check``, and
walks the mirror folder to find files that cannot be read back.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from korg_bridge.recall.memory import mirror
from korg_bridge.recall.memory.claude_records import summary as claude_summary
from korg_bridge.recall.memory.oplog import OPLOG_NAME
from korg_bridge.recall.memory.policy import SCOPE_SOFT_CAP
from korg_bridge.recall.memory.schema import MIGRATIONS
from korg_bridge.recall.memory.store import Store, default_store_path, newest_backup

__all__ = ["memory_stats"]

INTEGRITY_LINES = 20
"""Problems ``integrity_check`` reports at most (it can list thousands on a wrecked file)."""


def _grouped(conn: sqlite3.Connection, column: str, where: str) -> dict[str, int]:
    rows = conn.execute(
        f"SELECT {column}, count(*) FROM memory WHERE {where} GROUP BY {column} ORDER BY {column}"
    )
    return {str(key): int(count) for key, count in rows}


def _unparseable(conn: sqlite3.Connection, root: Path) -> list[str]:
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


def memory_stats(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Integrity, counts per scope/type/state, the soft cap, untrusted/pending/conflict counts,
    unparseable mirror files, the queued log entries and the newest backup.

    Raises:
        ConfigError: the store path is unusable or the file is not a store (see :mod:`.store`).
    """
    env = os.environ if env is None else env
    path = default_store_path(env)
    if not path.exists():
        return {"store": str(path), "exists": False, "memories": 0}
    with Store(path) as store:
        conn = store.conn
        try:
            integrity = [row[0] for row in conn.execute("PRAGMA integrity_check").fetchmany(INTEGRITY_LINES)]
            current = "superseded_by IS NULL AND state != 'pending'"
            by_scope = _grouped(conn, "scope", f"{current} AND state = 'live'")
            figures = {
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
                "oplog_queued": conn.execute("SELECT count(*) FROM oplog_pending").fetchone()[0],
            }
            root = store.folder / mirror.MIRROR_NAME
            unparseable = _unparseable(conn, root)
            claude = claude_summary(conn)  # files of Claude Code's read, and those skipped with why
        except sqlite3.Error as exc:
            raise store.translate(exc) from exc
    size = sum(os.path.getsize(f"{path}{s}") for s in ("", "-wal") if os.path.exists(f"{path}{s}"))
    over = {scope: count for scope, count in by_scope.items() if count > SCOPE_SOFT_CAP}
    backup = newest_backup(path)
    return {
        "store": str(path),
        "exists": True,
        "size_bytes": size,
        "schema": [name for name, _ in MIGRATIONS],
        "integrity_check": "ok" if integrity == ["ok"] else integrity,
        **figures,
        "soft_cap": {"per_scope": SCOPE_SOFT_CAP, "over": over},
        "mirror": {"folder": str(root), "unparseable": unparseable},
        "claude": claude,
        "oplog": str(path.parent / OPLOG_NAME),
        "newest_backup": str(backup) if backup else None,
    }
