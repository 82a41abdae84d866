"""The open threads of a project's last session: its final typed prompt and the last reply.

What a session-start brief needs from history, read from the recall index by
project (every event carries the git root of its session's ``cwd``), so Claude
Code sessions and Codex rollouts count alike. Before reading, the Claude Code
transcript folders of the project are refreshed -- only those, since a new
session starts right after the last one ended and a full refresh of every
ledger could take seconds; files outside them are left as indexed. An index
that does not exist yet is not built here (that can take a while on a large
history): the brief then says how to build it.

Two indexed reads: the newest ``user_prompt`` of the project (through the
index on ``tool``), then that file's last prompt and reply from its end
(through the index on ``(source_id, offset)``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from korg_bridge.recall.paths import index_path

__all__ = ["LAST_PROMPT_SQL", "Thread", "last_thread", "project_transcript_folders"]

LAST_PROMPT_SQL = (
    "SELECT source_id, session, ts FROM events WHERE tool = 'user_prompt' AND project = ? "
    "AND coalesce(json_extract(extra, '$.sidechain'), 0) = 0 ORDER BY ts DESC, id DESC LIMIT 1"
)
"""The project's newest typed prompt (not a sub-agent's). Params: the project root."""
TAIL_SQL = (
    "SELECT id, tool, text, body, timestamp, ts FROM events WHERE source_id = ? AND session IS ? "
    "AND tool IN ('user_prompt', 'llm_inference') AND coalesce(json_extract(extra, '$.sidechain'), 0) = 0 "
    'ORDER BY "offset" DESC, id DESC LIMIT ?'
)
"""A file's prompts and replies from its end. Params: source id, session, limit."""
TAIL_ROWS = 200
SETTLED_FILES = 500
"""Transcripts a settled-check compares at most before leaving it to a refresh."""


@dataclass(frozen=True, slots=True)
class Said:
    """One prompt or reply: its ref, text and when."""

    ref: str
    text: str
    ts: float | None


@dataclass(frozen=True, slots=True)
class Thread:
    """Where the project's last session left off."""

    session: str | None
    prompt: Said | None
    reply: Said | None


def project_transcript_folders(env: Mapping[str, str], root: str) -> list[Path]:
    """Claude Code's transcript folders that may hold sessions of ``root``: its own, and those of
    directories under it or beside it with its name as prefix (worktrees, subfolders)."""
    from korg_bridge.recall.interop.claude.paths import projects_dir, slug

    base = projects_dir(env)
    own = slug(root)
    try:
        with os.scandir(base) as entries:
            return sorted(
                Path(entry.path)
                for entry in entries
                if (entry.name == own or entry.name.startswith(own + "-")) and entry.is_dir()
            )
    except OSError:
        return []


def _settled(conn: sqlite3.Connection, folders: list[Path]) -> bool:
    """Whether every transcript under ``folders`` is indexed as it is on disk (size and mtime), so a
    refresh would find nothing; a question for the index's ``sources`` table, asked read-only."""
    found: dict[str, tuple[int, int]] = {}
    for folder in folders:
        for where, _dirs, names in os.walk(folder):
            for name in names:
                if name.endswith(".jsonl"):
                    try:
                        info = os.stat(os.path.join(where, name))
                    except OSError:
                        return False
                    found[os.path.join(where, name)] = (info.st_size, info.st_mtime_ns)
            if len(found) > SETTLED_FILES:
                return False  # a big history: let the refresh judge
    if not found:
        return True
    marks = ", ".join("?" * len(found))
    rows = conn.execute(
        f"SELECT path, size, mtime_ns FROM sources WHERE gone_at IS NULL AND path IN ({marks})", tuple(found)
    ).fetchall()
    return len(rows) == len(found) and all(found[str(p)] == (int(sz), int(mt)) for p, sz, mt in rows)


def _said(row: tuple[Any, ...]) -> Said:
    event_id, _tool, text, body, _timestamp, ts = row
    full = " ".join(f"{text or ''} {body or ''}".split())
    return Said(f"e{event_id}", full, float(ts) if ts is not None else None)


def _read(conn: sqlite3.Connection, root: str) -> Thread | None:
    latest = conn.execute(LAST_PROMPT_SQL, (root,)).fetchone()
    if latest is None:
        return None
    source_id, session, _ = latest
    prompt: Said | None = None
    reply: Said | None = None
    for row in conn.execute(TAIL_SQL, (source_id, session, TAIL_ROWS)):
        if row[1] == "llm_inference" and reply is None and prompt is None:
            reply = _said(row)  # the last reply, after the last prompt
        elif row[1] == "user_prompt" and prompt is None:
            prompt = _said(row)
            break
    return Thread(session, prompt, reply)


def last_thread(env: Mapping[str, str], root: str) -> tuple[Thread | None, str | None]:
    """The project's last session as indexed (after refreshing its transcript folders), and a
    note when history could not be read.

    Never raises for the index: a missing or unusable index becomes the note.
    """
    path = index_path(env)
    if not path.exists():
        return None, "no history indexed yet: run `korg-recall index` once to add the last session here"
    from korg_bridge.recall.history.walls import history_of

    walls = history_of(env)
    if walls is not None:  # a tenant's brief: its history as indexed, through the index's walls
        return _walled_thread(path, walls, root)
    folders = project_transcript_folders(env, root)
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5.0)
        try:
            if _settled(conn, folders):  # nothing to refresh: read it without the indexing machinery
                return _read(conn, root), None
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return None, f"history not read: the recall index {path} failed ({exc})"
    from korg_bridge.errors import KorgError
    from korg_bridge.recall.history.index import Index

    try:
        with Index(path) as index:
            index.refresh(folders)
            return index.read(lambda conn: _read(conn, root)), None
    except KorgError as exc:
        return None, f"history not read: {exc.message}"


def _walled_thread(path: Path, walls: Any, root: str) -> tuple[Thread | None, str | None]:
    """The last thread among the events a walled caller may see; nothing is refreshed, since
    this machine's transcript folders are not the caller's (its own are, by ``index``/``recall``)."""
    from korg_bridge.errors import KorgError
    from korg_bridge.recall.history.index import Index

    try:
        with Index(path, walls) as index:
            return index.read(lambda conn: _read(conn, root)), None
    except KorgError as exc:
        return None, f"history not read: {exc.message}"
