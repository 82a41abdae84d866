"""Where Claude Code keeps what it remembers, and which project each folder belongs to.

* The config folder is ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``; Codex's is
  ``$CODEX_HOME``, else ``~/.codex``.
* Each project has a folder ``<config>/projects/<slug>``: the slug is the
  absolute path with **every character that is not an ASCII letter or digit
  replaced by** ``-`` (``/home/ana/my_app.v2`` → ``-home-ana-my-app-v2``); a
  slug longer than 200 characters is cut to 200 and given a hash suffix. Checked
  against real folders (``tests/recall/interop``): ``danieldemmel.me-next``
  became ``danieldemmel-me-next``.
* Sessions are stored under the slug of the directory they started in; the
  auto-memory folder ``memory/`` lives under the slug of the **git root**, so
  worktrees of one repository share it.
* ``MEMORY.md`` is an index Claude Code loads at session start -- its first 200
  lines, at most 25,000 bytes; topic files beside it are read on demand.
* Standing instructions: ``CLAUDE.md`` (user: ``<config>/CLAUDE.md``; project:
  ``CLAUDE.md``, ``.claude/CLAUDE.md``, ``CLAUDE.local.md``) and ``AGENTS.md``
  (user: ``$CODEX_HOME/AGENTS.md``; project: ``AGENTS.md``).

The slug is lossy (``-``, ``_``, ``.`` and ``/`` all become ``-``), so a folder
is mapped back to its project by evidence, never by guessing: the ``cwd`` its
transcripts record, else a directory on this machine whose slug is the folder's
name (found by walking the file system, bounded); otherwise it stays unknown
and its files are skipped with that reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from korg_bridge._fs.safe_read import read_head
from korg_bridge.config import claude_memory
from korg_bridge.recall.paths import claude_home, codex_home
from korg_bridge.recall.project import project_root

__all__ = [
    "INDEX_MAX_BYTES",
    "INDEX_MAX_LINES",
    "INDEX_NAME",
    "decode_on_disk",
    "folder_matches",
    "instruction_files",
    "may_hold_files",
    "memory_folder",
    "project_folder",
    "projects_dir",
    "resolve_folder",
    "slug",
]

INDEX_NAME = "MEMORY.md"
INDEX_MAX_LINES = 200
INDEX_MAX_BYTES = 25_000
"""What Claude Code loads of ``MEMORY.md`` at session start (its docs: "the first 200 lines or 25KB")."""
MEMORY_DIR = "memory"
SLUG_MAX = 200
"""Claude Code cuts longer slugs to 200 characters and appends a hash of the path."""
TRANSCRIPTS_LOOKED_AT = 3
"""The newest transcripts of a folder read for a ``cwd`` (one usually says it on its first lines)."""
TRANSCRIPT_HEAD_BYTES = 64 * 1024
DECODE_LISTINGS = 256
"""Directories the file-system walk lists at most when mapping a slug back to a path."""
DECODE_ENTRIES = 5000
"""A directory with more entries than this is not walked through (``/usr/lib``, a mail spool)."""

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_CWD = re.compile(rb'"cwd"\s*:\s*"')


def projects_dir(env: Mapping[str, str]) -> Path:
    return claude_home(env) / "projects"


def slug(path: str) -> str:
    """Claude Code's folder name for ``path`` (before the long-path rule)."""
    return _NOT_ALNUM.sub("-", path)


def folder_matches(name: str, path: str) -> bool:
    """Whether the project folder ``name`` is the one Claude Code makes for ``path``."""
    wanted = slug(path)
    if len(wanted) <= SLUG_MAX:
        return name == wanted
    return name.startswith(wanted[:SLUG_MAX] + "-")


def project_folder(env: Mapping[str, str], root: str) -> Path | None:
    """``<config>/projects/<slug of root>``; for a slug over 200 characters, the existing folder
    that matches it (its hash suffix cannot be computed here), else None."""
    base = projects_dir(env)
    wanted = slug(root)
    if len(wanted) <= SLUG_MAX:
        return base / wanted
    try:
        with os.scandir(base) as entries:
            for entry in entries:
                if folder_matches(entry.name, root):
                    return Path(entry.path)
    except OSError:
        return None
    return None


def memory_folder(env: Mapping[str, str], root: str) -> Path | None:
    """The auto-memory folder of the project rooted at ``root`` (it need not exist)."""
    folder = project_folder(env, root)
    return None if folder is None else folder / MEMORY_DIR


def _cwds(transcript: str) -> list[str]:
    """The ``cwd`` values on the first lines of a transcript (at most 64 KB read)."""
    try:
        head = read_head(transcript, TRANSCRIPT_HEAD_BYTES)
    except OSError:  # gone, unreadable, or not a regular file
        return []
    found: list[str] = []
    for line in head.split(b"\n")[:-1] or [head]:
        if not _CWD.search(line):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        cwd = value.get("cwd") if isinstance(value, dict) else None
        if isinstance(cwd, str) and cwd and cwd not in found:
            found.append(cwd)
    return found


def _transcripts(folder: Path) -> list[str]:
    """The newest ``*.jsonl`` files directly in ``folder``."""
    found: list[tuple[int, str]] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".jsonl") and entry.is_file():
                    found.append((entry.stat().st_mtime_ns, entry.path))
    except OSError:
        return []
    return [path for _, path in sorted(found, reverse=True)[:TRANSCRIPTS_LOOKED_AT]]


def decode_on_disk(name: str, *, start: str = "/") -> str | None:
    """The one existing directory whose slug is ``name``, found by walking from ``start``
    (bounded by :data:`DECODE_LISTINGS`); None when there is none, or more than one."""
    if not name.startswith("-"):
        return None
    found: list[str] = []
    budget = [DECODE_LISTINGS]

    def walk(base: str, rest: str) -> None:
        if budget[0] <= 0 or len(found) > 1:
            return
        budget[0] -= 1
        try:
            with os.scandir(base) as listing:
                entries = [entry for _, entry in zip(range(DECODE_ENTRIES + 1), listing, strict=False)]
        except OSError:
            return
        if len(entries) > DECODE_ENTRIES:
            return
        for entry in sorted(entries, key=lambda e: e.name):
            part = slug(entry.name)
            if not rest[1:].startswith(part) or (len(rest) > 1 + len(part) and rest[1 + len(part)] != "-"):
                continue
            try:
                if not entry.is_dir():
                    continue
            except OSError:
                continue
            remaining = rest[1 + len(part) :]
            if remaining:
                walk(entry.path, remaining)
            elif entry.path not in found:
                found.append(entry.path)

    walk(start, name)
    return found[0] if len(found) == 1 else None


def resolve_folder(folder: Path) -> tuple[str | None, str]:
    """The project root of a folder under ``<config>/projects``, and how it was found:
    ``transcript`` (a session there names a directory whose slug is the folder's),
    ``file system`` (one directory on this machine has that slug), or ``unresolved``."""
    name = folder.name
    for transcript in _transcripts(folder):
        for cwd in _cwds(transcript):
            for candidate in (project_root(cwd), cwd):
                if folder_matches(name, candidate):
                    return project_root(candidate), "transcript"
    found = decode_on_disk(name) if len(name) <= SLUG_MAX else None
    if found is not None:
        return project_root(found), "file system"
    return None, "unresolved"


def instruction_files(env: Mapping[str, str], roots: list[str]) -> list[tuple[Path, str, str]]:
    """``(file, scope, folder)`` of every instructions file to look at: the user's (``CLAUDE.md`` in
    the config folder, Codex's ``AGENTS.md``) and those at each project root in ``roots``."""
    out: list[tuple[Path, str, str]] = [
        (claude_home(env) / "CLAUDE.md", "user", str(claude_home(env))),
        (codex_home(env) / "AGENTS.md", "user", str(codex_home(env))),
    ]
    for root in roots:
        for rel in ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md", "AGENTS.md"):
            out.append((Path(root) / rel, f"project:{root}", root))
    return out


def may_hold_files(env: Mapping[str, str], scopes: Sequence[str]) -> bool:
    """A first look, before a read loads the memory machinery (the store itself is looked at by
    :func:`~korg_bridge.recall.memory.sources.may_hold_memories`): False only when there is
    nothing of Claude Code's or Codex's to take in (most ``recall`` calls of someone who never
    remembered anything). True whenever the full look (``claude_scan``) might find something.
    """
    if not claude_memory(env):
        return False
    try:
        with os.scandir(projects_dir(env)) as projects:
            for project in projects:
                with (
                    contextlib.suppress(OSError),
                    os.scandir(os.path.join(project.path, MEMORY_DIR)) as files,
                ):
                    if any(f.name.endswith(".md") and not f.name.startswith(".") for f in files):
                        return True
    except OSError:
        pass  # no config folder: nothing there
    roots = [scope[len("project:") :] for scope in scopes if scope.startswith("project:")]
    return any(path.exists() or path.is_symlink() for path, _, _ in instruction_files(env, roots))
