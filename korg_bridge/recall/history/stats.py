"""What the index holds, for ``korg-recall stats``, and dropping what the user no longer wants.

Stats answer "is my history all there?": events by shape, agent, kind and
project; files by folder; the files worth a look (skipped lines — with the
line number and the reason, so one bad line is found without reading the file
by hand — or gone from disk, their events kept until :func:`prune_gone`), then
the most recently indexed.

A summary, never a line per session: a year of Claude Code holds thousands of
transcripts (each its own file, each its own agent), and ``stats`` goes to a
terminal and, through the bridge, into a model's context. Every list and
grouping is capped (the rest counted under ``"(N more)"``), so the answer stays
well under 40,000 characters however much history there is.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from korg_bridge.recall.history.ingest.batches import REPAIRED
from korg_bridge.recall.history.ingest.event import KINDS
from korg_bridge.recall.history.ingest.refresh import delete_source_events
from korg_bridge.recall.history.migrations import MIGRATIONS

__all__ = [
    "GROUPS_SHOWN",
    "SKIPPED_SHOWN",
    "SOURCES_SHOWN",
    "capped",
    "has_project",
    "index_stats",
    "prune_gone",
]

SKIPPED_SHOWN = 20
"""Skipped (and repaired) lines listed in ``stats`` (each file keeps its first 100, all are counted)."""
SOURCES_SHOWN = 20
"""Files described one by one: those with skipped lines or gone first, then the newest indexed."""
GROUPS_SHOWN = 30
"""Entries of a grouping (by agent, tool, project, folder) before the rest is one "(N more)" count;
``by_tool`` lists every event kind besides (a fixed vocabulary, what ``tool_filter`` takes)."""


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def capped(groups: dict[str, int], keep: int = GROUPS_SHOWN, always: Collection[str] = ()) -> dict[str, int]:
    """The ``keep`` first entries of ``groups`` (largest first) and those named in ``always``, in their
    order; the rest summed under ``"(N more)"``."""
    if len(groups) <= keep:
        return groups
    kept: dict[str, int] = {}
    rest: list[int] = []
    for rank, (name, count) in enumerate(groups.items()):
        if rank < keep or name in always:
            kept[name] = count
        else:
            rest.append(count)
    return {**kept, f"({len(rest):,} more)": sum(rest)} if rest else kept


def _grouped(conn: sqlite3.Connection, column: str, always: Collection[str] = ()) -> dict[str, int]:
    rows = conn.execute(
        f"SELECT {column}, count(*) FROM events GROUP BY {column} ORDER BY count(*) DESC, {column}"
    )
    return capped({"(none)" if key is None else str(key): count for key, count in rows}, always=always)


def _by_folder(sources: list[dict[str, Any]]) -> dict[str, int]:
    """Indexed files per folder (a Claude Code project folder, a Codex day), most first."""
    counts: dict[str, int] = {}
    for source in sources:
        folder = os.path.dirname(source["path"])
        counts[folder] = counts.get(folder, 0) + 1
    return capped(dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))))


def _worth_a_look(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The files to describe one by one: those with skipped or repaired lines or gone first, then the
    most recently indexed."""
    newest = sorted(sources, key=lambda source: source["indexed_at"] or "", reverse=True)
    trouble = [s for s in newest if s["skipped_lines"] or s.get("repaired_lines") or "gone_since" in s]
    rest = [s for s in newest if not (s["skipped_lines"] or s.get("repaired_lines") or "gone_since" in s)]
    return (trouble + rest)[:SOURCES_SHOWN]


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
            "id": source_id,
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
        if (source_id, "repaired") in noted:
            entry["repaired_lines"] = len(noted[source_id, "repaired"])
        sources.append(entry)
    last = conn.execute("SELECT value FROM meta WHERE key = 'last_refresh'").fetchone()
    passed = conn.execute("SELECT value FROM meta WHERE key = 'passed_over'").fetchone()
    size = sum(
        os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}")
    )
    gone = [source for source in sources if "gone_since" in source]
    shown = _worth_a_look(sources)
    skipped = [
        {"path": source["path"], **record}
        for source in sources
        for record in noted.get((source["id"], "skipped"), ())
    ]
    repaired = [
        {"path": source["path"], **record}
        for source in sources
        for record in noted.get((source["id"], "repaired"), ())
    ]
    return {
        "index_path": str(path),
        "index_size_bytes": size,
        "schema": [name for name, _ in MIGRATIONS],
        "last_refresh": _iso(float(last[0])) if last else None,
        "last_refresh_age_s": round(time.time() - float(last[0]), 3) if last else None,
        "events": conn.execute("SELECT count(*) FROM events").fetchone()[0],
        "by_shape": _grouped(conn, "shape"),
        "by_agent": _grouped(conn, "agent"),
        "by_tool": _grouped(conn, "tool", always=KINDS),
        "by_project": _grouped(conn, "project"),
        "skipped_lines": sum(source["skipped_lines"] for source in sources),
        "skipped": skipped[:SKIPPED_SHOWN],
        "repaired": repaired[:SKIPPED_SHOWN],
        "ignored_lines": sum(source["ignored_lines"] for source in sources),
        "pending_results": conn.execute("SELECT count(*) FROM pending_patches").fetchone()[0],
        "gone": {"files": len(gone), "events": sum(source["events"] for source in gone)},
        "passed_over": json.loads(passed[0]) if passed else [],
        "files": {
            "indexed": len(sources),
            "with_skipped_lines": sum(1 for source in sources if source["skipped_lines"]),
            "gone": len(gone),
            "shown": len(shown),
        },
        "by_folder": _by_folder(sources),
        "sources": [{key: value for key, value in source.items() if key != "id"} for source in shown],
    }


def has_project(conn: sqlite3.Connection, root: str) -> bool:
    """Whether any event ran in the project ``root`` or a folder under it (the ``project`` filter's
    match, :mod:`~korg_bridge.recall.history.query.fts`)."""
    prefix = root.rstrip("/") + "/"
    row = conn.execute(
        "SELECT 1 FROM events WHERE project = ? OR substr(project, 1, ?) = ? LIMIT 1",
        (root, len(prefix), prefix),
    ).fetchone()
    return row is not None


def prune_gone(conn: sqlite3.Connection) -> dict[str, Any]:
    """Drop every file marked gone, with its events (``conn`` in a write transaction)."""
    gone = conn.execute("SELECT id, path FROM sources WHERE gone_at IS NOT NULL ORDER BY path").fetchall()
    removed = 0
    for source_id, _path in gone:
        removed += delete_source_events(conn, source_id)
        conn.execute("DELETE FROM sources WHERE id = ?", (source_id,))
    return {"files_pruned": len(gone), "events_removed": removed, "paths": [path for _id, path in gone]}
