"""The Markdown mirror: each live memory as a file people can read, grep, edit and version.

Layout: ``memories/<scope folder>/<type>_<slug>--<id>.md`` beside the store,
YAML front matter (``id, type, scope, version, tags, updated, title``) and the
body. This module renders and parses those files, writes them atomically
(temp file in ``memories/.korg-tmp``, fsync, rename), and finds what changed
on disk since korg-recall last looked: :func:`detect` costs one ``stat`` per
known file and one directory listing per scope folder; only a file whose size
or mtime moved is read and hashed.

What a change means is decided by :mod:`.operations` (a hand edit becomes a
version; a new hand-made file a memory). The rule here: korg-recall rewrites
or removes only files it wrote (``origin = 'ours'``) and only while their
content is still what it wrote; a file a person made is never rewritten,
renamed or deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.durable import fsync_folder, write_all
from korg_bridge.recall.memory.frontmatter import FrontMatterError, Parsed, file_name, parse, rel_path, render
from korg_bridge.recall.memory.records import Version
from korg_bridge.recall.memory.scopes import mirror_dir_of

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Tx

__all__ = [
    "MIRROR_NAME",
    "Change",
    "FrontMatterError",
    "Parsed",
    "detect",
    "file_name",
    "parse",
    "reconcile",
    "render",
]

MIRROR_NAME = "memories"
TMP_NAME = ".korg-tmp"
STALE_TMP_S = 600.0
"""A temp file older than this was left by a killed process (a write takes milliseconds)."""
WRITE_BATCH = 64
"""Memories whose files one call writes or removes at most (a few ms each, fsync included)."""
MAX_FILE_BYTES = 64 * 1024
"""Bigger files are not read (a memory is at most 8 KB); they are reported as unparseable."""


# --- files -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileState:
    size: int
    mtime_ns: int
    sha256: str


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_file(path: Path) -> tuple[bytes, FileState] | None:
    """The bytes and state of a mirror file, or None if it is gone, unreadable or too big."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if info.st_size > MAX_FILE_BYTES:
                return b"", FileState(info.st_size, info.st_mtime_ns, "")
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    return data, FileState(info.st_size, info.st_mtime_ns, _sha(data))


def write_atomic(root: Path, rel: str, text: str) -> FileState:
    """Write ``root/rel`` atomically: a temp file in ``root/.korg-tmp``, fsync, rename (the
    caller fsyncs the folder once it has written all its files).

    Raises:
        OSError: the folder cannot be made or the file written.
    """
    data = text.encode("utf-8")
    target = root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = root / TMP_NAME
    tmp_dir.mkdir(exist_ok=True)
    tmp = tmp_dir / f"{target.name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    info = os.stat(target)
    return FileState(info.st_size, info.st_mtime_ns, _sha(data))


def remove_if_unchanged(root: Path, rel: str, sha256: str) -> bool:
    """Delete ``root/rel`` only if its content is still ``sha256`` (what korg-recall wrote)."""
    path = root / rel
    found = read_file(path)
    if found is None:
        return True
    if found[1].sha256 != sha256:
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True


def clean_tmp(root: Path, now: float | None = None) -> None:
    """Remove temp files that killed processes left in ``.korg-tmp`` (the folder is korg-recall's)."""
    folder = root / TMP_NAME
    limit = (time.time() if now is None else now) - STALE_TMP_S
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.name.endswith(".tmp") and entry.stat().st_mtime < limit:
                os.unlink(entry.path)


# --- what changed on disk ----------------------------------------------------------------------


@dataclass(slots=True)
class Change:
    """A difference between a scope folder and what ``mirror_files`` remembers.

    ``kind``: ``edited`` (a known file's content changed), ``new`` (a file korg-recall never
    saw), ``touched`` (stat moved, content did not), ``vanished`` (a known file is gone).
    """

    kind: str
    path: str
    scope: str
    state: FileState | None = None
    origin: str | None = None
    memory_id: str | None = None
    recorded_version: int | None = None
    parsed: Parsed | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _parsed(data: bytes, state: FileState) -> tuple[Parsed | None, str | None]:
    if state.size > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // 1024} KB"
    try:
        return parse(data.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except FrontMatterError as exc:
        return None, str(exc)


def detect(conn: sqlite3.Connection, root: Path, scopes: Iterable[str]) -> list[Change]:
    """Every change in the scope folders of ``scopes`` since ``mirror_files`` was last updated.

    One listing per folder, whose entries give each known file's ``stat`` without building its
    path in Python (10k files: ~25 ms instead of ~65); only a file whose size or mtime moved is
    read (and hashed).
    """
    changes: list[Change] = []
    root_text = str(root)
    for scope in scopes:
        sub = mirror_dir_of(scope)
        known = {
            path: (size, mtime_ns)
            for path, size, mtime_ns in conn.execute(
                "SELECT path, size, mtime_ns FROM mirror_files WHERE scope = ?", (scope,)
            )
        }
        moved: list[str] = []
        new: list[str] = []
        prefix = sub + "/"
        try:
            with os.scandir(os.path.join(root_text, sub)) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.endswith(".md") or name.startswith("."):
                        continue
                    recorded = known.pop(prefix + name, None)
                    if recorded is None:
                        new.append(name)
                        continue
                    try:
                        info = entry.stat()
                    except OSError:
                        moved.append(prefix + name)
                        continue
                    if info.st_size != recorded[0] or info.st_mtime_ns != recorded[1]:
                        moved.append(prefix + name)
        except OSError:
            pass  # no folder yet: every known file of it is looked at below
        moved.extend(known)  # recorded but not listed: gone, or kept under another folder
        for path in moved:
            changes.append(_look_again(conn, root, path, scope))
        for name in sorted(new):
            found = read_file(root / sub / name)
            if found is None:
                continue
            data, state = found
            parsed, error = _parsed(data, state)
            changes.append(Change("new", f"{sub}/{name}", scope, state=state, parsed=parsed, error=error))
    return changes


def _look_again(conn: sqlite3.Connection, root: Path, path: str, scope: str) -> Change:
    """What happened to a known file whose stat moved (or that is gone)."""
    mid, version, origin, sha = conn.execute(
        "SELECT id, version, origin, sha256 FROM mirror_files WHERE path = ?", (path,)
    ).fetchone()
    found = read_file(root / path)
    if found is None:
        return Change("vanished", path, scope, origin=origin, memory_id=mid)
    data, state = found
    if state.sha256 == sha:
        return Change(
            "touched", path, scope, state=state, origin=origin, memory_id=mid, recorded_version=version
        )
    parsed, error = _parsed(data, state)
    return Change(
        "edited",
        path,
        scope,
        state=state,
        origin=origin,
        memory_id=mid,
        recorded_version=version,
        parsed=parsed,
        error=error,
    )


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


# --- bringing files in line with the store -----------------------------------------------------


def _plan(conn: Tx, ids: Sequence[str]) -> list[Any]:
    """What :func:`reconcile` has to do for ``ids``: heads whose file is missing or stale, files
    of our own whose memory is no longer live."""
    from korg_bridge.recall.memory.claude_records import is_derived
    from korg_bridge.recall.memory.rows import select_versions

    where, params = f"id IN ({', '.join('?' * len(ids))})", list(ids)
    heads = {
        v.id: v
        for v in select_versions(conn, f"{where} AND superseded_by IS NULL AND state = 'live'", params)
        if not is_derived(v)  # a copy of Claude Code's file: that file is where it is edited
    }
    ours: dict[str, list[tuple[str, int | None, str]]] = {}
    theirs: set[str] = set()
    for path, mid, version, sha, origin in conn.execute(
        f"SELECT path, id, version, sha256, origin FROM mirror_files WHERE id IS NOT NULL AND {where}", params
    ):
        if origin == "ours":
            ours.setdefault(mid, []).append((path, version, sha))
        elif origin == "user":
            theirs.add(mid)
    work: list[Any] = []
    for mid, head in heads.items():
        if mid in theirs:
            # A file the user made mirrors it: one file per memory, and theirs is never touched.
            if ours.get(mid):
                work.append(("drop", mid, ours[mid]))
            continue
        rows = ours.get(mid, [])
        # A file keeps the name it was first written under: an editor holding it open must find
        # it where it was, and a mirror kept in git should not see renames for retitled memories.
        want = min(path for path, _, _ in rows) if rows else rel_path(head)
        if not any(path == want and version == head.version for path, version, _ in rows):
            work.append(("write", head, want, rows))
        else:
            stale = [row for row in rows if row[0] != want]
            if stale:
                work.append(("drop", mid, stale))
    for mid, rows in ours.items():
        if mid not in heads:
            work.append(("drop", mid, rows))
    return work


def waiting(store: Any) -> int:
    """Memories whose mirror file is still to be written or removed."""
    return int(store.conn.execute("SELECT count(*) FROM mirror_dirty").fetchone()[0])


def reconcile(store: Any, *, ids: Sequence[str] | None = None) -> list[str]:
    """Bring the files of ``ids`` (default: the memories queued in ``mirror_dirty``) in line with
    the store: write the file of a live head that lacks an up-to-date one, remove files of our
    own whose memory is no longer live. Returns problems worth a warning.

    The queue is written by the same transactions that change a memory, so a process killed
    between its commit and its files leaves the work for the next one, and a settled mirror
    costs one indexed read. At most :data:`WRITE_BATCH` queued memories per call: after an
    import of thousands the files appear over the next calls instead of stalling one (and every
    writer waiting on it). Holds the store's write lock only when there is something to do.
    """
    root: Path = store.folder / MIRROR_NAME
    if ids is None and store.conn.execute("SELECT 1 FROM mirror_dirty LIMIT 1").fetchone() is None:
        return []
    problems: list[str] = []
    folders: set[Path] = set()
    with store.write() as conn:
        if ids is None:
            ids = [row[0] for row in conn.execute("SELECT id FROM mirror_dirty LIMIT ?", (WRITE_BATCH,))]
        for step in _plan(conn, ids):
            if step[0] == "write":
                _, head, want, rows = step
                problem = _write_head(conn, root, head, want)
                folders.add((root / want).parent)
                if problem:
                    problems.append(problem)
                    continue
                rows = [row for row in rows if row[0] != want]
            else:
                _, _mid, rows = step
            for path, _version, sha in rows:
                if remove_if_unchanged(root, path, sha):
                    forget_path(conn, path)
                else:
                    problems.append(
                        f"{root / path} was edited by hand after its memory changed; left as it is"
                    )
        # Done, or reported once: a problem left queued would warn on every call until fixed.
        conn.executemany("DELETE FROM mirror_dirty WHERE id = ?", [(mid,) for mid in ids])
    for folder in folders:  # once per folder, not once per file: the new names become durable
        fsync_folder(folder)
    return problems


def _write_head(conn: Tx, root: Path, head: Version, want: str) -> str | None:
    existing = conn.execute("SELECT origin, sha256 FROM mirror_files WHERE path = ?", (want,)).fetchone()
    found = read_file(root / want)
    if found is not None:
        data, state = found
        if existing is not None and existing[0] != "ours":
            return f"{root / want} is a file korg-recall did not write; not overwriting it"
        recorded_sha = existing[1] if existing is not None else None
        if recorded_sha is not None and state.sha256 != recorded_sha:
            return f"{root / want} changed since it was last read; it will be imported on the next call"
        if recorded_sha is None:
            parsed, _ = _parsed(data, state)
            if parsed is None or parsed.meta.get("id") != head.id:
                return f"{root / want} is a file korg-recall did not write; not overwriting it"
    try:
        state = write_atomic(root, want, render(head))
    except OSError as exc:
        return f"cannot write the mirror file {root / want}: {exc.strerror or exc}"
    record(conn, want, head.scope, head.id, head.version, "ours", state)
    return None
