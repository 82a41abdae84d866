"""Where Claude Code's files are, for the reader (:mod:`.claude_sync`): one pass of looking.

A *place* is a folder looked at in one refresh and the files found in it: each
memory folder under ``<config>/projects`` (with the project it belongs to, mapped
once and remembered in ``claude_folders``; see :func:`~.claude_paths.resolve_folder`),
the config folders holding the user's ``CLAUDE.md``/``AGENTS.md``, and the root of
each project the call reads. Nothing here reads a file's content or writes one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from korg_bridge.config import ENV_RECALL_CLAUDE_MEMORY, claude_memory
from korg_bridge.recall.interop.claude import records
from korg_bridge.recall.interop.claude.paths import instruction_files, projects_dir, resolve_folder
from korg_bridge.recall.interop.claude.records import FolderRow
from korg_bridge.recall.memory.backend.protocols import Store, Tx
from korg_bridge.recall.memory.records import AUTO_MEMORY, INSTRUCTIONS
from korg_bridge.recall.memory.scopes import Context

__all__ = [
    "ENV_RECALL_CLAUDE_MEMORY",
    "Place",
    "anything_to_read",
    "instruction_places",
    "memory_places",
    "open_for_reading",
    "reading_on",
]


def reading_on(ctx: Context) -> bool:
    """Whether Claude Code's files are taken in: on unless ``KORG_RECALL_CLAUDE_MEMORY=0``, and
    never under ``KORG_RECALL_WRITES=off`` (taking a change in is a write) nor for a caller
    walled into its tenant (:func:`~korg_bridge.recall.tenancy.walled`).

    Raises:
        ConfigError: ``KORG_RECALL_CLAUDE_MEMORY`` is not a yes/no value.
    """
    if not claude_memory(ctx.env) or ctx.writes == "off":
        return False
    from korg_bridge.recall.tenancy import walled

    # A caller walled into its tenant (over HTTP) is not this machine's user: Claude Code's
    # folders here, and a CLAUDE.md at any path it names, are not its to read.
    return not walled(ctx.env)


@dataclass(slots=True)
class Place:
    """A folder looked at in this pass and the files found in it."""

    folder: str
    """The ``folder`` key of its rows (a memory folder, a project root, a config folder)."""
    kind: str
    scope: str | None
    """None: the folder's project is unknown, so its files are skipped."""
    base: Path
    """Symlinks must resolve inside this folder."""
    files: list[tuple[Path, str]] = field(default_factory=list)
    """``(path, label)``: the label names an instructions file in its memory's title."""
    complete: bool = True
    """False when the folder could not be listed: nothing in it counts as gone."""


def _md_files(folder: Path) -> list[Path] | None:
    """The ``*.md`` entries of ``folder`` (not hidden), or None when it cannot be listed."""
    try:
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path) for e in entries if e.name.endswith(".md") and not e.name.startswith(".")
            )
    except OSError:
        return None


def memory_places(conn: Tx | None, ctx: Context, updates: list[FolderRow]) -> list[Place]:
    """Every memory folder under ``<config>/projects``, with the project each belongs to."""
    try:
        with os.scandir(projects_dir(ctx.env)) as entries:
            folders = sorted(e.path for e in entries if not e.name.startswith(".") and e.is_dir())
    except OSError:
        return []  # no config folder (or not mounted): nothing is read, nothing counts as gone
    known = records.folder_rows(conn) if conn is not None else {}
    places: list[Place] = []
    for folder in folders:
        memory = Path(folder) / "memory"
        files = _md_files(memory)
        recorded = known.get(folder)
        if files is None:
            if recorded is not None:  # the memory folder went away: its files are gone
                scope = f"project:{recorded.root}" if recorded.root else None
                places.append(Place(str(memory), AUTO_MEMORY, scope, memory))
            continue
        root = recorded.root if recorded is not None else None
        if conn is not None and root is None:
            try:
                mtime = os.stat(folder).st_mtime_ns
            except OSError:
                continue
            if recorded is None or recorded.mtime_ns != mtime:
                root, how = resolve_folder(Path(folder))
                updates.append(FolderRow(folder, root, how, mtime))
        places.append(
            Place(
                str(memory),
                AUTO_MEMORY,
                f"project:{root}" if root else None,
                memory,
                [(p, "") for p in files],
            )
        )
    return places


def instruction_places(ctx: Context, scopes: Iterable[str]) -> list[Place]:
    roots = sorted({scope[len("project:") :] for scope in scopes if scope.startswith("project:")})
    by_folder: dict[str, Place] = {}
    seen: set[str] = set()
    for path, scope, folder in instruction_files(ctx.env, roots):
        place = by_folder.get(folder)
        if place is None:
            place = by_folder[folder] = Place(folder, INSTRUCTIONS, scope, Path(folder))
            place.complete = os.path.isdir(folder)
        real = os.path.realpath(path)
        if (path.exists() or path.is_symlink()) and real not in seen:  # CLAUDE.md -> AGENTS.md: read once
            seen.add(real)
            owner = "Claude Code" if path.name == "CLAUDE.md" else "Codex"
            label = os.path.relpath(path, folder) if scope != "user" else f"{path.name} ({owner}, user)"
            place.files.append((path, label))
    return list(by_folder.values())


def anything_to_read(ctx: Context, scopes: Sequence[str]) -> bool:
    """Whether Claude Code's folders or an instructions file hold anything (a store is worth creating)."""
    if not reading_on(ctx):
        return False
    places = memory_places(None, ctx, []) + instruction_places(ctx, scopes)
    return any(place.files for place in places)


def open_for_reading(ctx: Context, scopes: Sequence[str]) -> Store | None:
    """The memory store for a read: the existing one; a new one only when Claude Code's files hold
    something to take in (else None: reading never creates an empty store).

    Raises:
        ConfigError: the store path cannot be used (see :mod:`.store`), or a bad switch value.
    """
    from korg_bridge.recall.memory.sources import open_store_for_reading

    return open_store_for_reading(ctx, lambda: anything_to_read(ctx, scopes))
