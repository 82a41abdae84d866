"""What the store knows of Claude Code's files: the one place with SQL for the interop tables.

korg-recall reads Claude Code's memory folders and instructions files into the
store as *derived* memories (their ``source.kind`` is ``claude-auto-memory`` or
``instructions``), and, with write-back on, writes topic files of its own into
those folders. Three tables (migration ``m005_claude_interop``) remember what it
saw and wrote:

* ``claude_files`` -- one row per file: where, which scope, the lineages it
  became (one per part of a long file), the ``[[wiki-links]]`` it names, its
  ``stat`` and SHA-256 when last read or written, and a status (``taken``,
  ``skipped`` with the reason, ``gone``; ``ours``/``archived`` for files
  korg-recall wrote);
* ``claude_folders`` -- each project folder under ``<config>/projects`` and the
  project root it belongs to, so a folder's slug is mapped back once;
* ``claude_blocks`` -- the korg-recall block of each ``MEMORY.md`` as last
  written, so a block edited by hand is noticed and left alone.

Derived memories are copies of files a person or Claude Code owns: the write
policy never merges into them, ``revise`` refuses them, and the Markdown mirror
does not copy them (see :func:`~korg_bridge.recall.memory.records.is_derived`, where a
memory's source kinds are named).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.records import AUTO_MEMORY

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "WRITEBACK",
    "FileRow",
    "FolderRow",
    "block_sha",
    "drop_file",
    "file_row",
    "file_rows",
    "folder_row",
    "folder_rows",
    "put_block",
    "put_file",
    "put_folder",
    "replace_wiki_links",
    "rows_for_ids",
    "summary",
]

WRITEBACK = "writeback"
"""A topic file korg-recall wrote into a Claude Code memory folder (write-back)."""

SKIPPED_SHOWN = 50
"""Skipped files ``stats`` names (the first ones, by path)."""


@dataclass(slots=True)
class FileRow:
    """One row of ``claude_files``."""

    path: str
    kind: str
    scope: str
    folder: str
    status: str
    ids: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    size: int = 0
    mtime_ns: int = 0
    sha256: str = ""
    reason: str | None = None


_FILE_COLUMNS = "path, kind, scope, folder, status, ids, links, size, mtime_ns, sha256, reason"


def _file(row: Sequence[Any]) -> FileRow:
    path, kind, scope, folder, status, ids, links, size, mtime_ns, sha256, reason = row
    return FileRow(
        str(path), str(kind), str(scope), str(folder), str(status), json.loads(ids or "[]"),
        json.loads(links or "[]"), int(size), int(mtime_ns), str(sha256), reason,
    )  # fmt: skip


def file_rows(
    conn: Tx, *, folders: Iterable[str] | None = None, kind: str | None = None
) -> dict[str, FileRow]:
    """Rows by path: all, or those found in ``folders`` (and of one ``kind``)."""
    clauses: list[str] = []
    params: list[Any] = []
    if folders is not None:
        wanted = list(folders)
        if not wanted:
            return {}
        clauses.append(f"folder IN ({', '.join('?' * len(wanted))})")
        params.extend(wanted)
    if kind is not None:
        clauses.append("kind = ?")
        params.append(kind)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(f"SELECT {_FILE_COLUMNS} FROM claude_files{where}", params)
    return {found.path: found for found in map(_file, rows)}


def file_row(conn: Tx, path: str) -> FileRow | None:
    row = conn.execute(f"SELECT {_FILE_COLUMNS} FROM claude_files WHERE path = ?", (path,)).fetchone()
    return None if row is None else _file(row)


def rows_for_ids(conn: Tx, ids: Sequence[str], kind: str) -> list[FileRow]:
    """Rows of ``kind`` whose lineages include one of ``ids``."""
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT {_FILE_COLUMNS} FROM claude_files WHERE kind = ? AND EXISTS "
        f"(SELECT 1 FROM json_each(claude_files.ids) WHERE json_each.value IN ({marks}))",
        (kind, *ids),
    )
    return [_file(row) for row in rows]


def put_file(conn: Tx, row: FileRow) -> None:
    """Record a file's state (inside the caller's transaction)."""
    conn.execute(
        f"INSERT OR REPLACE INTO claude_files ({_FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            row.path, row.kind, row.scope, row.folder, row.status, json.dumps(row.ids), json.dumps(row.links),
            row.size, row.mtime_ns, row.sha256, row.reason,
        ),
    )  # fmt: skip


def drop_file(conn: Tx, path: str) -> None:
    conn.execute("DELETE FROM claude_files WHERE path = ?", (path,))


@dataclass(frozen=True, slots=True)
class FolderRow:
    """One row of ``claude_folders``: a project folder and the project root it belongs to."""

    path: str
    root: str | None
    how: str
    mtime_ns: int


def folder_rows(conn: Tx) -> dict[str, FolderRow]:
    return {
        str(path): FolderRow(str(path), root, str(how), int(mtime_ns))
        for path, root, how, mtime_ns in conn.execute("SELECT path, root, how, mtime_ns FROM claude_folders")
    }


def folder_row(conn: Tx, path: str) -> FolderRow | None:
    found = conn.execute(
        "SELECT path, root, how, mtime_ns FROM claude_folders WHERE path = ?", (path,)
    ).fetchone()
    return None if found is None else FolderRow(str(found[0]), found[1], str(found[2]), int(found[3]))


def put_folder(conn: Tx, row: FolderRow) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO claude_folders (path, root, how, mtime_ns) VALUES (?, ?, ?, ?)",
        (row.path, row.root, row.how, row.mtime_ns),
    )
    if row.root is None:
        return
    # Files read while the folder's project was unknown were skipped: read them again.
    conn.execute(
        "DELETE FROM claude_files WHERE folder = ? AND status = 'skipped' AND kind = ?",
        (row.path.rstrip("/") + "/memory", AUTO_MEMORY),
    )


def block_sha(conn: Tx, path: str) -> tuple[str, bool] | None:
    """The SHA-256 of the block korg-recall last wrote into the ``MEMORY.md`` at ``path``, and
    whether korg-recall created that file."""
    row = conn.execute("SELECT sha256, created FROM claude_blocks WHERE path = ?", (path,)).fetchone()
    return None if row is None else (str(row[0]), bool(row[1]))


def put_block(conn: Tx, path: str, scope: str, sha256: str | None, *, created: bool) -> None:
    """Record the block just written (``None``: there is none any more)."""
    if sha256 is None:
        conn.execute("DELETE FROM claude_blocks WHERE path = ?", (path,))
        return
    conn.execute(
        "INSERT OR REPLACE INTO claude_blocks (path, scope, sha256, created) VALUES (?, ?, ?, ?)",
        (path, scope, sha256, int(created)),
    )


def replace_wiki_links(conn: Tx, sources: Sequence[str], links: Iterable[tuple[str, str]], at: str) -> None:
    """Make ``links`` (``src``, ``dst``) the ``wiki`` links going out of ``sources``."""
    if sources:
        marks = ", ".join("?" * len(sources))
        conn.execute(f"DELETE FROM memory_links WHERE kind = 'wiki' AND src IN ({marks})", tuple(sources))
    conn.executemany(
        "INSERT OR IGNORE INTO memory_links (src, dst, kind, created_at) VALUES (?, ?, 'wiki', ?)",
        [(src, dst, at) for src, dst in links if src != dst],
    )


def summary(conn: Tx) -> dict[str, Any]:
    """What ``stats`` says about Claude Code's files: counts, skipped files with why, unknown folders."""
    counts: dict[str, dict[str, int]] = {}
    for kind, status, count in conn.execute(
        "SELECT kind, status, count(*) FROM claude_files GROUP BY kind, status ORDER BY kind, status"
    ):
        counts.setdefault(str(kind), {})[str(status)] = int(count)
    skipped = [
        f"{path}: {reason}"
        for path, reason in conn.execute(
            "SELECT path, reason FROM claude_files WHERE reason IS NOT NULL AND status IN ('skipped', 'taken') "
            "ORDER BY path LIMIT ?",
            (SKIPPED_SHOWN,),
        )
    ]
    unknown = [
        str(path)
        for (path,) in conn.execute("SELECT path FROM claude_folders WHERE root IS NULL ORDER BY path")
    ]
    return {"files": counts, "skipped": skipped, "folders_without_project": unknown}
