"""What the index holds, for ``korg-recall stats``, and dropping what the user no longer wants.

Stats answer "is my history all there?": events by shape, agent, kind and
project; per file what was read, what was skipped — with the line number
and the reason, so one bad line is found without reading the file by hand —
and whether the file is gone from disk (its events are kept until
:func:`prune_gone`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from korg_bridge.recall.batches import REPAIRED
from korg_bridge.recall.migrations import MIGRATIONS
from korg_bridge.recall.refresh import delete_source_events

__all__ = ["SKIPPED_SHOWN", "index_stats", "prune_gone"]

SKIPPED_SHOWN = 50
"""Skipped lines listed at the top of ``stats`` (each file keeps its first 100, all are counted)."""


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _grouped(conn: sqlite3.Connection, column: str) -> dict[str, int]:
    rows = conn.execute(
        f"SELECT {column}, count(*) FROM events GROUP BY {column} ORDER BY count(*) DESC, {column}"
    )
    return {"(none)" if key is None else str(key): count for key, count in rows}


def _noted(conn: sqlite3.Connection) -> dict[tuple[int, str], list[dict[str, Any]]]:
    """The noted lines of each file, as ``(source id, "skipped" | "repaired")`` → records."""
    by_source: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for source_id, line_no, reason in conn.execute(
        "SELECT source_id, line_no, reason FROM skipped_lines ORDER BY source_id, line_no"
    ):
        kind = "repaired" if reason.startswith(REPAIRED) else "skipped"
        text = reason.removeprefix(REPAIRED)
        by_source.setdefault((source_id, kind), []).append({"line": line_no, "reason": text})
    return by_source


def index_stats(conn: sqlite3.Connection, path: Path) -> dict[str, Any]:
    """Describe the index at ``path`` (``conn`` is open on it)."""
    noted = _noted(conn)
    sources: list[dict[str, Any]] = []
    for source_id, source, events, offset, size, skipped, ignored, indexed_at, gone_at in conn.execute(
        'SELECT s.id, s.path, (SELECT count(*) FROM events e WHERE e.source_id = s.id), s."offset",'
        " s.size, s.skipped, s.ignored, s.indexed_at, s.gone_at FROM sources s ORDER BY s.path"
    ):
        entry: dict[str, Any] = {
            "path": source,
            "events": events,
            "bytes_indexed": offset,
            "size": size,
            "skipped_lines": skipped,
            "ignored_lines": ignored,
            "indexed_at": _iso(indexed_at),
        }
        if gone_at is not None:
            entry["gone_since"] = _iso(gone_at)
        for kind in ("skipped", "repaired"):
            if (source_id, kind) in noted:
                entry[kind] = noted[source_id, kind]
        sources.append(entry)
    last = conn.execute("SELECT value FROM meta WHERE key = 'last_refresh'").fetchone()
    passed = conn.execute("SELECT value FROM meta WHERE key = 'passed_over'").fetchone()
    size = sum(
        os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}")
    )
    gone = [source for source in sources if "gone_since" in source]
    return {
        "index_path": str(path),
        "index_size_bytes": size,
        "schema": [name for name, _ in MIGRATIONS],
        "last_refresh": _iso(float(last[0])) if last else None,
        "last_refresh_age_s": round(time.time() - float(last[0]), 3) if last else None,
        "events": conn.execute("SELECT count(*) FROM events").fetchone()[0],
        "by_shape": _grouped(conn, "shape"),
        "by_agent": _grouped(conn, "agent"),
        "by_tool": _grouped(conn, "tool"),
        "by_project": _grouped(conn, "project"),
        "skipped_lines": sum(source["skipped_lines"] for source in sources),
        "skipped": [
            {"path": source["path"], **record} for source in sources for record in source.get("skipped", ())
        ][:SKIPPED_SHOWN],
        "repaired": [
            {"path": source["path"], **record} for source in sources for record in source.get("repaired", ())
        ][:SKIPPED_SHOWN],
        "ignored_lines": sum(source["ignored_lines"] for source in sources),
        "pending_results": conn.execute("SELECT count(*) FROM pending_patches").fetchone()[0],
        "gone": {"files": len(gone), "events": sum(source["events"] for source in gone)},
        "passed_over": json.loads(passed[0]) if passed else [],
        "sources": sources,
    }


def prune_gone(conn: sqlite3.Connection) -> dict[str, Any]:
    """Drop every file marked gone, with its events (``conn`` in a write transaction)."""
    gone = conn.execute("SELECT id, path FROM sources WHERE gone_at IS NOT NULL ORDER BY path").fetchall()
    removed = 0
    for source_id, _path in gone:
        removed += delete_source_events(conn, source_id)
        conn.execute("DELETE FROM sources WHERE id = ?", (source_id,))
    return {"files_pruned": len(gone), "events_removed": removed, "paths": [path for _id, path in gone]}
