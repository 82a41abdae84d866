"""The Markdown mirror: each live memory as a file people can read, grep, edit and version.

Layout: ``memories/<scope folder>/<type>_<slug>--<id>.md`` beside the store (the slug
follows the title: a retitled memory's file is renamed), YAML front matter (``id, type,
scope, version, tags, updated, title``) and the body. Files are read and written by
:mod:`.mirror_io` (no link followed, no FIFO opened blocking, every write atomic).

Who owns a file is column ``origin`` of ``mirror_files``:

* ``ours`` -- korg-recall wrote it. It rewrites, renames or removes it, but only while the
  file's bytes are what it last wrote there (the recorded SHA-256);
* ``user`` -- a file a person made, which became a memory: never rewritten or deleted, and
  no second file is written for its memory;
* ``copy`` -- a file korg-recall did not write that names a memory under another name than
  korg-recall's for it (a copy, a file moved to another folder): its edits are taken in, the
  file is never touched (a file under korg-recall's name in the right folder is ``ours``,
  whoever saved it: a crash leftover, an editor saving a name the memory had before);
* ``unparseable`` -- not readable back, or not a regular file: reported, left alone.

**A file is a hand edit only when its bytes differ from what korg-recall last wrote there,
never because of timing.** :func:`detect` finds candidates outside any lock (one listing per
scope folder, a size and mtime compare); :func:`look` decides under the store's write lock,
which korg-recall also holds for every write of its own into the folder (:func:`reconcile`,
a purge's :func:`erase`) -- so a rewrite under way is never seen half done, and what the
file holds is compared with the hash its last writer committed. What a change means is
decided by :mod:`.sync`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge._fs.durable import fsync_folder
from korg_bridge.recall.memory.mirror import watched
from korg_bridge.recall.memory.mirror.frontmatter import (
    FrontMatterError,
    Parsed,
    file_name,
    parse,
    rel_path,
    render,
)
from korg_bridge.recall.memory.mirror.safe_io import (
    MAX_FILE_BYTES,
    TMP_NAME,
    FileState,
    Read,
    clean_tmp,
    drop_tmp,
    is_listed,
    listing,
    read_at,
    read_file,
    remove_at,
    write_atomic,
)
from korg_bridge.recall.memory.records import Version, is_derived
from korg_bridge.recall.memory.scopes import mirror_dir_of
from korg_bridge.recall.paths import MIRROR_NAME

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "MAX_FILE_BYTES",
    "MIRROR_NAME",
    "TMP_NAME",
    "Change",
    "FileState",
    "FrontMatterError",
    "Parsed",
    "Row",
    "clean_tmp",
    "detect",
    "erase",
    "file_name",
    "look",
    "parse",
    "read_file",
    "reconcile",
    "render",
]

WRITE_BATCH = 64
"""Memories whose files one call writes or removes at most (a few ms each, fsync included)."""


# --- what korg-recall remembers of each file ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """A row of ``mirror_files``: a path, the memory it mirrors, the version korg-recall last
    wrote there (None: to be rewritten), who owns it, and the file's state when last seen."""

    path: str
    scope: str
    id: str | None
    version: int | None
    origin: str
    size: int
    mtime_ns: int
    sha256: str


_ROW = "SELECT path, scope, id, version, origin, size, mtime_ns, sha256 FROM mirror_files"


def rows_where(conn: Tx | sqlite3.Connection, where: str, params: Sequence[object]) -> list[Row]:
    return [Row(*row) for row in conn.execute(f"{_ROW} WHERE {where}", tuple(params))]


def row_at(conn: Tx, path: str) -> Row | None:
    found = rows_where(conn, "path = ?", (path,))
    return found[0] if found else None


def record(
    conn: Tx,
    path: str,
    scope: str,
    memory_id: str | None,
    version: int | None,
    origin: str,
    state: FileState,
) -> None:
    """Remember a mirror file's state (inside the caller's transaction)."""
    conn.execute(
        "INSERT OR REPLACE INTO mirror_files (path, scope, id, version, origin, size, mtime_ns, sha256) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (path, scope, memory_id, version, origin, state.size, state.mtime_ns, state.sha256),
    )


def forget_path(conn: Tx, path: str) -> None:
    conn.execute("DELETE FROM mirror_files WHERE path = ?", (path,))


def look_again_later(conn: Tx, path: str) -> None:
    """Make the next :func:`detect` of the file's folder read it, whatever its size and mtime
    (an edit korg-recall met while about to write: it is taken in, not overwritten)."""
    conn.execute("UPDATE mirror_files SET mtime_ns = -1 WHERE path = ?", (path,))


# --- what changed on disk ----------------------------------------------------------------------


@dataclass(slots=True)
class Change:
    """What is at a mirror path now, against what ``mirror_files`` remembers of it.

    ``kind``: ``gone`` (nothing there, nothing recorded), ``vanished`` (a recorded file is
    gone), ``touched`` (stat moved, bytes did not), ``edited`` (a recorded file's bytes
    changed), ``new`` (a file with no record), ``refused`` (not a regular file, or a link).
    """

    kind: str
    path: str
    scope: str
    row: Row | None
    read: Read
    parsed: Parsed | None = None
    error: str | None = None


def _parsed(data: bytes, state: FileState) -> tuple[Parsed | None, str | None]:
    if state.size > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // 1024} KB"
    try:
        return parse(data.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except FrontMatterError as exc:
        return None, str(exc)


def detect(
    conn: sqlite3.Connection, root: Path, scopes: Iterable[str]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The paths (with their scope) in the folders of ``scopes`` that may have changed since
    ``mirror_files`` last saw them, and the folders that cannot be read.

    Lock-free and cheap: one listing per folder and a compare with the recorded size and
    mtime; only :func:`look`, under the write lock, reads a file.
    """
    candidates: list[tuple[str, str]] = []
    problems: list[str] = []
    for scope in scopes:
        sub = mirror_dir_of(scope)
        # A resident engine's watch: nothing happened since a clean scan (skip the folder), or only
        # to these files (look at them alone, as the listing would).
        named = watched.changed(root / sub)
        if named is not None and not named:
            continue
        if named is None:
            known = {
                path: (size, mtime_ns)
                for path, size, mtime_ns in conn.execute(
                    "SELECT path, size, mtime_ns FROM mirror_files WHERE scope = ?", (scope,)
                )
            }
            entries, problem = listing(root, sub)
        else:
            names = sorted(name for name in named if is_listed(name))
            paths = [f"{sub}/{name}" for name in names]
            marks = ", ".join("?" * len(paths))
            known = {
                path: (size, mtime_ns)
                for path, size, mtime_ns in conn.execute(
                    f"SELECT path, size, mtime_ns FROM mirror_files WHERE scope = ? AND path IN ({marks})",
                    (scope, *paths),
                )
            } if paths else {}  # fmt: skip
            entries, problem = listing(root, sub, names)
        if problem is not None:
            problems.append(problem)
            continue
        found = len(candidates)
        for name in sorted(entries):
            path = f"{sub}/{name}"
            if known.pop(path, None) != entries[name]:
                candidates.append((path, scope))
        candidates.extend((path, scope) for path in sorted(known))  # recorded, not listed: gone
        if len(candidates) == found:
            watched.in_line(root / sub)
    return candidates, problems


def look(conn: Tx, root: Path, path: str, scope: str) -> Change:
    """What is at ``path`` against its record -- call it holding the store's write lock."""
    row = row_at(conn, path)
    found = read_at(root, path)
    if found.gone:
        return Change("vanished" if row is not None else "gone", path, scope, row, found)
    if found.refused is not None or found.data is None or found.state is None:
        return Change("refused", path, scope, row, found, error=found.refused)
    if row is not None and found.state.sha256 == row.sha256:
        return Change("touched", path, scope, row, found)
    parsed, error = _parsed(found.data, found.state)
    return Change("edited" if row is not None else "new", path, scope, row, found, parsed, error)


# --- bringing files in line with the store -----------------------------------------------------


def _plan(conn: Tx, ids: Sequence[str]) -> list[tuple[str, Any, list[Row]]]:
    """What :func:`reconcile` does for ``ids``: ``("write", head, stale rows)`` for a live head
    without an up-to-date file at the name its title gives, ``("drop", id, rows)`` for files of
    ours whose memory is no longer live or that a person's file replaces."""
    from korg_bridge.recall.memory.rows import select_versions

    marks = ", ".join("?" * len(ids))
    heads = {
        v.id: v
        for v in select_versions(conn, f"id IN ({marks}) AND superseded_by IS NULL AND state = 'live'", ids)
        if not is_derived(v)  # a copy of Claude Code's file: that file is where it is edited
    }
    ours: dict[str, list[Row]] = {}
    theirs: set[str] = set()
    for row in rows_where(conn, f"id IN ({marks})", ids):
        if row.origin == "ours":
            ours.setdefault(str(row.id), []).append(row)
        elif row.origin == "user":
            theirs.add(str(row.id))
    work: list[tuple[str, Any, list[Row]]] = []
    for mid, head in heads.items():
        rows = ours.pop(mid, [])
        if mid in theirs:  # a file the person made mirrors it: one file per memory
            if rows:
                work.append(("drop", mid, rows))
            continue
        want = rel_path(head)
        stale = [row for row in rows if row.path != want]
        if not any(row.path == want and row.version == head.version for row in rows):
            work.append(("write", head, stale))
        elif stale:
            work.append(("drop", mid, stale))
    work.extend(("drop", mid, rows) for mid, rows in ours.items())
    return work


def waiting(store: Any) -> int:
    """Memories whose mirror file is still to be written or removed."""
    return int(store.conn.execute("SELECT count(*) FROM mirror_dirty").fetchone()[0])


def reconcile(store: Any, *, ids: Sequence[str] | None = None) -> list[str]:
    """Bring the files of ``ids`` (default: the memories queued in ``mirror_dirty``) in line with
    the store: write the file of a live head that lacks an up-to-date one (at the name its
    title gives; the file under an older name goes), remove files of ours whose memory is no
    longer live. Returns problems worth a warning.

    The queue is written by the same transactions that change a memory, so a process killed
    between its commit and its files leaves the work for the next one, and a settled mirror
    costs one indexed read. At most :data:`WRITE_BATCH` queued memories per call: after an
    import of thousands the files appear over the next calls instead of stalling one (and every
    writer waiting on it). Holds the store's write lock only when there is something to do, and
    while it writes: a file met edited by hand is left for :func:`look` to take in, never
    overwritten.
    """
    root: Path = store.folder / MIRROR_NAME
    if ids is None and store.conn.execute("SELECT 1 FROM mirror_dirty LIMIT 1").fetchone() is None:
        return []
    problems: list[str] = []
    folders: set[Path] = set()
    with store.write() as conn:
        if ids is None:
            ids = [row[0] for row in conn.execute("SELECT id FROM mirror_dirty LIMIT ?", (WRITE_BATCH,))]
        for step, target, rows in _plan(conn, ids) if ids else []:
            if step == "write":
                problem = _write_head(conn, root, target)
                folders.add((root / rel_path(target)).parent)
                if problem:
                    problems.append(problem)
                    continue  # the older file stays until the new one is written
            problems.extend(_drop(conn, root, rows))
        # Done, or reported once: a problem left queued would warn on every call until fixed.
        conn.executemany("DELETE FROM mirror_dirty WHERE id = ?", [(mid,) for mid in ids])
    for folder in folders:  # once per folder, not once per file: the new names become durable
        fsync_folder(folder)
    return problems


def _write_head(conn: Tx, root: Path, head: Version) -> str | None:
    want = rel_path(head)
    row = row_at(conn, want)
    if row is not None and row.origin != "ours":
        return f"{root / want} is a file korg-recall did not write; not overwriting it"
    text = render(head)
    found = read_at(root, want)
    if found.refused is not None:
        return f"{root / want} is {found.refused}; not overwriting it"
    if not found.gone and found.state is not None:
        if row is None:
            if found.data == text.encode("utf-8"):
                record(conn, want, head.scope, head.id, head.version, "ours", found.state)
                return None
            return f"{root / want} is a file korg-recall has no record of; it is read on the next call, not overwritten"
        if found.state.sha256 != row.sha256:
            look_again_later(conn, want)
            return f"{root / want} was edited by hand; the edit is taken in on the next call, not overwritten"
    try:
        state = write_atomic(root, want, text)
    except OSError as exc:
        return f"cannot write the mirror file {root / want}: {exc.strerror or exc}"
    record(conn, want, head.scope, head.id, head.version, "ours", state)
    return None


def _drop(conn: Tx, root: Path, rows: Sequence[Row]) -> list[str]:
    """Remove files of ours that are still what korg-recall wrote; an edited one is left for
    :func:`look` to take in."""
    problems: list[str] = []
    for row in rows:
        found = read_at(root, row.path)
        if found.gone or found.refused is not None:
            forget_path(conn, row.path)  # not ours any more: the next scan sees what it is
            continue
        if found.state is not None and found.state.sha256 != row.sha256:
            look_again_later(conn, row.path)
            problems.append(f"{root / row.path} was edited by hand; the edit is taken in on the next call")
            continue
        try:
            remove_at(root, row.path)
        except OSError as exc:
            problems.append(f"cannot remove the mirror file {root / row.path}: {exc.strerror or exc}")
            continue
        forget_path(conn, row.path)
    return problems


def erase(conn: Tx, root: Path, memory_id: str, versions: Sequence[Version]) -> tuple[list[str], list[str]]:
    """A purge's part of the mirror, under the purge's write lock: delete the files of
    ``memory_id`` korg-recall wrote (recorded, or unrecorded but byte for byte a rendering of
    one of its ``versions``: a write whose record a crash lost) and any temp file of them,
    and forget every path of it (a path holds the title's slug).

    Returns the files left: ``(ours edited by hand, files korg-recall did not write)``.
    """
    left: list[str] = []
    theirs: list[str] = []
    renderings = {render(v).encode("utf-8") for v in versions}
    recorded = rows_where(conn, "id = ?", (memory_id,))
    folders = {mirror_dir_of(v.scope) for v in versions} | {mirror_dir_of(row.scope) for row in recorded}
    known = {row.path for row in recorded}
    strays = [
        f"{sub}/{name}"
        for sub in sorted(folders)
        for name in listing(root, sub)[0]
        if name.endswith(f"--{memory_id}.md") and f"{sub}/{name}" not in known
    ]
    for row in recorded:
        found = read_at(root, row.path)
        if row.origin != "ours" or found.refused is not None:
            if not found.gone:
                theirs.append(str(root / row.path))
        elif found.data is not None and found.state is not None:
            ours = found.state.sha256 == row.sha256 or found.data in renderings
            if not (ours and _removed(root, row.path)):
                left.append(str(root / row.path))
    for path in strays:
        found = read_at(root, path)
        if found.data is not None and found.data in renderings:
            if not _removed(root, path):
                left.append(str(root / path))
        elif not found.gone:
            theirs.append(str(root / path))
    conn.execute("DELETE FROM mirror_files WHERE id = ?", (memory_id,))
    drop_tmp(root, memory_id)
    return left, theirs


def _removed(root: Path, path: str) -> bool:
    try:
        remove_at(root, path)
    except OSError:
        return False
    return True
