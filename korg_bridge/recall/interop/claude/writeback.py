"""Write-back (opt-in): our project memories also in that project's Claude Code memory folder.

With ``KORG_RECALL_CLAUDE_WRITEBACK=1``, every write to a memory of a project
scope (remember, revise, forget, restore, approve) is followed by bringing
Claude Code's memory folder of that project in line with it:

* a live, trusted, unexpired memory is a **topic file** ``<type>_<slug>.md``
  in Claude Code's current shape (``name``, ``description``, a ``metadata:``
  block with ``node_type: memory``, ``type`` -- our ``note`` is written as
  ``project`` -- and ``modified``), named once and kept under that name; when
  it is rewritten, only korg-recall's own lines change (those values and the
  body): a shape Claude Code gave the file meanwhile (the flat ``type:``, keys
  such as ``originSessionId``) stays byte for byte;
* ``MEMORY.md`` gets a **block** between ``<!-- korg-recall:begin -->`` and
  ``<!-- korg-recall:end -->`` with one index line per such memory (pinned
  first, then newest), holding only as many lines as keep the whole file within
  what Claude Code loads (200 lines, 25,000 bytes); the rest of the file is
  never touched, and the block is appended at its end the first time;
* retiring, expiring or flagging a memory untrusted **moves its file** to
  ``.korg-recall-archive/`` in that folder (never deleted); purging it deletes
  the file korg-recall wrote (its text must go).

Claude's files are not ours, so every step is refused rather than forced:
only regular files directly in the folder are written, never through a
symlink -- a ``MEMORY.md`` that is a link is refused, a name taken
by anything (a dangling link, a FIFO) is another name's turn; a topic file of
the same name that korg-recall did not write is never overwritten (another
name is chosen); a title cannot close korg-recall's block early (``<!--`` and
``-->`` in a line are written as entities); a file of ours edited since korg-recall
wrote it is left as it is (the next read takes the edit in as a version); a
block edited by hand, damaged markers, a ``MEMORY.md`` already over Claude
Code's limits or changed while being written (:mod:`korg_bridge.recall.interop.guarded_write`)
leave ``MEMORY.md`` unchanged -- each is a line in the write's ``checks``. A
topic file of ours that Claude Code deleted is not written again. Nothing of
Claude Code's settings is ever changed. Untrusted memories are never written
back: Claude Code loads ``MEMORY.md`` into every session.

It runs as a projection of each committed write (:func:`project`, after the log and the
mirror: :mod:`korg_bridge.recall.memory.projections`), which korg-recall's composition root
registers (:mod:`korg_bridge.recall.cli.wiring`); the memory package never calls in here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError
from korg_bridge.recall.interop.claude import records
from korg_bridge.recall.interop.claude.files import BLOCK_BEGIN, BLOCK_END, CLAUDE_TYPES, outside_block
from korg_bridge.recall.interop.claude.paths import (
    INDEX_MAX_BYTES,
    INDEX_MAX_LINES,
    INDEX_NAME,
    memory_folder,
)
from korg_bridge.recall.interop.claude.records import WRITEBACK, FileRow
from korg_bridge.recall.memory.backend.protocols import Store, Tx
from korg_bridge.recall.memory.mirror.frontmatter import FrontMatterError, parse, set_values
from korg_bridge.recall.memory.records import Version, is_derived, iso
from korg_bridge.recall.memory.rows import head
from korg_bridge.recall.memory.scopes import Context

if TYPE_CHECKING:
    from korg_bridge.recall.memory.committed import CommittedChange

__all__ = [
    "ARCHIVE",
    "after_write",
    "enabled",
    "project",
    "render_topic",
    "rewrite_topic",
    "topic_name",
]

ARCHIVE = ".korg-recall-archive"
LOCK_NAME = "claude-writeback.lock"
INDEX_CAP = 1024 * 1024
"""A MEMORY.md larger than this is not read for write-back (it is far over what Claude Code loads)."""
TOPIC_CAP = 256 * 1024
"""A topic file larger than this is not korg-recall's (it writes a memory of at most 8 KB)."""
DESCRIPTION_CHARS = 150
NAMES_TRIED = 100

_SLUG = re.compile(r"[^a-z0-9]+")


def enabled(ctx: Context) -> bool:
    """``KORG_RECALL_CLAUDE_WRITEBACK`` is on (default off).

    Raises:
        ConfigError: a value that is not yes/no.
    """
    from korg_bridge.config import claude_writeback

    return claude_writeback(ctx.env)


def _description(version: Version) -> str:
    first = " ".join(version.body.strip().split("\n\n", 1)[0].split())
    if first.lower().startswith(version.title.lower().rstrip("…")) and "\n\n" in version.body.strip():
        first = " ".join(version.body.strip().split("\n\n", 1)[1].split())
    return first if len(first) <= DESCRIPTION_CHARS else first[: DESCRIPTION_CHARS - 1].rstrip() + "…"


def _claude_type(version: Version) -> str:
    return version.type if version.type in CLAUDE_TYPES else "project"


def _modified(version: Version) -> str:
    """``recorded_at`` as Claude Code writes ``modified``: milliseconds, ``Z``."""
    return version.recorded_at[:23] + "Z" if len(version.recorded_at) >= 23 else version.recorded_at


def render_topic(version: Version) -> str:
    """A topic file as Claude Code writes them today: ``name``, ``description``, a ``metadata:``
    block (``node_type``, ``type``, ``modified``), then the memory."""
    return (
        "---\n"
        f"name: {json.dumps(version.title, ensure_ascii=False)}\n"
        f"description: {json.dumps(_description(version), ensure_ascii=False)}\n"
        "metadata:\n"
        "  node_type: memory\n"
        f"  type: {_claude_type(version)}\n"
        f"  modified: {_modified(version)}\n"
        "---\n" + version.body.rstrip("\n") + "\n"
    )


def rewrite_topic(text: str, version: Version) -> str | None:
    """``text`` -- a topic file of ours, maybe reshaped by Claude Code since -- with korg-recall's
    own lines set to ``version``: ``name``, ``description``, the type (``metadata.type`` and/or a
    flat ``type``), ``metadata.modified`` when the file has one, and the body. Every other byte
    stays. None when the file is not in a shape this can edit (it is then left as it is).
    """
    try:
        meta = parse(text).meta
    except FrontMatterError:
        return None
    nested = meta.get("metadata")
    values: dict[tuple[str, ...], str] = {
        ("name",): json.dumps(version.title, ensure_ascii=False),
        ("description",): json.dumps(_description(version), ensure_ascii=False),
    }
    if isinstance(nested, dict):
        values[("metadata", "type")] = _claude_type(version)
        if "modified" in nested:
            values[("metadata", "modified")] = _modified(version)
    if "type" in meta or not isinstance(nested, dict):
        values[("type",)] = _claude_type(version)
    try:
        return set_values(text, values, version.body)
    except FrontMatterError:  # pragma: no cover - parsed above
        return None


def topic_name(version: Version, attempt: int = 1) -> str:
    """``<type>_<slug>.md`` (``_2``, ``_3`` … when a name is taken)."""
    slug = _SLUG.sub("_", version.title.lower()).strip("_")[:40].strip("_") or "memory"
    suffix = "" if attempt == 1 else f"_{attempt}"
    return f"{_claude_type(version)}_{slug}{suffix}.md"


def _taken(path: Path) -> bool:
    """Whether anything is at ``path`` -- a dangling symlink included."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def _no_markers(line: str) -> str:
    """``line`` unable to open or close an HTML comment -- and so a korg-recall block marker."""
    return line.replace("<!--", "&lt;!--").replace("-->", "--&gt;")


def _sha(data: bytes | None) -> str:
    return hashlib.sha256(data or b"").hexdigest()


def _wanted(version: Version | None, now: str) -> bool:
    """Whether a memory belongs in Claude Code's folder: live, trusted, unexpired, of a project."""
    return (
        version is not None
        and version.state == "live"
        and version.trust == "trusted"
        and version.scope.startswith("project:")
        and (version.expires_at is None or version.expires_at > now)
        and not is_derived(version)
    )


def project(store: Store, change: CommittedChange) -> dict[str, Any]:
    """The write-back's projection of a committed write: ``checks.claude_writeback`` when it is
    on and the write touched a memory (nothing otherwise).

    Raises:
        ConfigError: ``KORG_RECALL_CLAUDE_WRITEBACK`` is not a yes/no value.
    """
    if not (change.ids or change.purged) or not enabled(change.ctx):
        return {}
    return {"claude_writeback": after_write(store, change.ctx, change.ids, change.purged)}


def after_write(
    store: Store, ctx: Context, ids: Sequence[str], purged: Sequence[str] = ()
) -> list[str] | str:
    """Bring Claude Code's memory folders in line with the memories ``ids`` (and delete the files of
    ``purged``); return what was refused or left out, or ``"up to date"``.

    Never raises for a file: a problem is a line of the result, and the write it follows stands.
    """
    if store.folder is None:
        return "off: a team store is not one person's Claude Code folders"
    problems: list[str] = []
    lock = store.folder / LOCK_NAME
    touched: set[str] = set()
    now = iso(ctx.now)
    try:
        with store.write() as conn:
            for memory_id in dict.fromkeys(ids):
                current = head(conn, memory_id)
                if current is None or is_derived(current):
                    continue
                rows = records.rows_for_ids(conn, [memory_id], WRITEBACK)
                if _wanted(current, now):
                    problems += _write_topic(conn, ctx, current, rows[0] if rows else None, lock)
                    touched.add(current.scope)
                for row in rows:
                    if not _wanted(current, now) and row.status == "ours":
                        problems += _archive(conn, row, lock)
                        touched.add(row.scope)
            for row in records.rows_for_ids(conn, list(purged), WRITEBACK):
                problems += _delete(conn, row, lock)
                touched.add(row.scope)
            for scope in sorted(touched):
                problems += _block(conn, ctx, scope, lock)
    except KorgError as exc:
        problems.append(exc.message)
    return problems or "up to date"


def _write_topic(conn: Tx, ctx: Context, version: Version, row: FileRow | None, lock: Path) -> list[str]:
    from korg_bridge.recall.interop.guarded_write import Changed, replace, take

    if row is not None and row.status == "gone":
        return []  # Claude Code (or a person) deleted our file: respected, not written again
    root = version.scope.removeprefix("project:")
    # By the path the reader lists (not resolved: a config folder reached through a dotfiles link must
    # stay that path, or our own files would look like Claude's); links are refused file by file.
    folder = memory_folder(ctx.env, root)
    if folder is None:
        return [
            f"{version.id}: no Claude Code folder for {root} (a path this long needs one Claude Code made)"
        ]
    data = render_topic(version).encode("utf-8")
    path = Path(row.path) if row is not None and row.status in ("ours", "archived") else None
    if path is not None and row is not None and row.status == "archived" and _taken(path):
        path = None  # its old name was taken meanwhile
    for attempt in range(1, NAMES_TRIED + 1):
        candidate = path or folder / topic_name(version, attempt)
        mine = row is not None and str(candidate) == row.path
        try:
            snapshot = take(candidate, TOPIC_CAP, follow=False)
        except KorgError as exc:  # a symlink, a FIFO, a folder … at that name
            if mine or path is not None:
                return [f"{exc.message} It was left as it is."]
            continue  # not korg-recall's: another name
        if snapshot.data is not None and not mine:
            if path is not None:
                return [f"{candidate} is not korg-recall's file any more; left as it is"]
            continue  # a file of that name that korg-recall did not write: never overwritten
        if mine and row is not None and row.status == "ours" and snapshot.data is None:
            # Deleted since korg-recall wrote it (Claude Code consolidating): not written again.
            records.put_file(
                conn, _replace(row, status="gone", reason="deleted from Claude Code's memory folder")
            )
            return []
        if mine and row is not None and row.status == "ours" and snapshot.data is not None:
            edited = _edit_of_ours(candidate, snapshot.data, row, version)
            if isinstance(edited, list):
                return edited
            data = edited
            if snapshot.data == data:
                return []
        try:
            replace(snapshot, data, lock=lock)
        except Changed as exc:
            return [exc.message]
        _record_written(conn, version, row, candidate, folder, data)
        return []
    return [f"{version.id}: {NAMES_TRIED} names for its topic file are taken in {folder}"]


def _edit_of_ours(candidate: Path, current: bytes, row: FileRow, version: Version) -> bytes | list[str]:
    """The new bytes of a topic file korg-recall wrote and still finds as it left it (its front
    matter rewritten, the body kept), or why it is left alone: edited since, or not in a shape we edit."""
    if _sha(current) != row.sha256:
        return [f"{candidate} was edited since korg-recall wrote it; left as it is (the edit is read next)"]
    try:
        kept = rewrite_topic(current.decode("utf-8"), version)
    except UnicodeDecodeError:
        kept = None
    if kept is None:
        return [f"{candidate}'s front matter is not in a shape korg-recall edits; left as it is"]
    return kept.encode("utf-8")


def _record_written(
    conn: Tx, version: Version, row: FileRow | None, candidate: Path, folder: Path, data: bytes
) -> None:
    """Record the topic file just written as ours (and its folder's project, when korg-recall made it)."""
    info = os.stat(candidate)
    if (
        records.folder_row(conn, str(folder.parent)) is None
    ):  # a folder korg-recall made: its project is known
        root = version.scope.removeprefix("project:")
        records.put_folder(conn, records.FolderRow(str(folder.parent), root, "writeback", 0))
    records.put_file(
        conn,
        FileRow(str(candidate), WRITEBACK, version.scope, str(folder), "ours", [version.id], [], info.st_size,
                info.st_mtime_ns, _sha(data)),
    )  # fmt: skip
    if row is not None and row.path != str(candidate):
        records.drop_file(conn, row.path)


def _archive(conn: Tx, row: FileRow, lock: Path) -> list[str]:
    """Move a topic file of ours into ``.korg-recall-archive/`` (only while it is what we wrote)."""
    from korg_bridge._fs.durable import fsync_folder, reserve
    from korg_bridge.recall.interop.guarded_write import locked, read_capped

    path = Path(row.path)
    archive = path.parent / ARCHIVE
    try:
        with locked(lock):
            data = read_capped(path, TOPIC_CAP, follow=False)
            if data is None:
                records.put_file(conn, _replace(row, status="archived", reason="already gone"))
                return []
            if _sha(data) != row.sha256:
                return [f"{path} was edited since korg-recall wrote it; not archived"]
            with contextlib.suppress(FileExistsError):
                archive.mkdir()
            if not stat.S_ISDIR(os.lstat(archive).st_mode):  # a link out of the folder is never followed
                return [f"{archive} is not a folder (a symlink?); {path} was not archived"]
            target = reserve(archive / path.name, mode=0o644)
            os.replace(path, target)  # over our own empty reservation, in the same folder tree
        fsync_folder(path.parent)
    except KorgError as exc:
        return [f"{exc.message} It was not archived."]
    except OSError as exc:
        return [f"cannot archive {path}: {exc.strerror or exc}"]
    records.put_file(conn, _replace(row, status="archived", reason=f"moved to {target}"))
    return []


def _delete(conn: Tx, row: FileRow, lock: Path) -> list[str]:
    """A purged memory's topic file: deleted when it is still what korg-recall wrote."""
    from korg_bridge.recall.interop.guarded_write import Changed, read_capped, remove, take

    path = Path(row.path)
    if row.status == "ours":
        try:
            snapshot = take(path, TOPIC_CAP, follow=False)
        except KorgError as exc:
            return [f"{exc.message} It was not deleted."]
        if snapshot.data is not None:
            if _sha(snapshot.data) != row.sha256:
                return [f"{path} was edited since korg-recall wrote it; not deleted (delete it yourself)"]
            try:
                remove(snapshot, lock=lock)
            except (Changed, KorgError) as exc:
                return [exc.message]
    elif row.status == "archived" and row.reason and row.reason.startswith("moved to "):
        with contextlib.suppress(OSError, KorgError):
            archived = Path(row.reason.removeprefix("moved to "))
            if _sha(read_capped(archived, TOPIC_CAP, follow=False)) == row.sha256:
                archived.unlink()
    records.drop_file(conn, row.path)
    return []


def _replace(row: FileRow, **changes: Any) -> FileRow:
    import dataclasses

    return dataclasses.replace(row, **changes)


def _lines(conn: Tx, scope: str) -> list[str]:
    """The block's index lines: our topic files of ``scope`` whose memory is live; pinned, then newest."""
    entries: list[tuple[bool, str, str]] = []
    for row in records.file_rows(conn, kind=WRITEBACK).values():
        if row.scope != scope or row.status != "ours" or not row.ids:
            continue
        current = head(conn, row.ids[0])
        if current is None or current.state != "live":
            continue
        title = " ".join(current.title.replace("[", "(").replace("]", ")").split())
        line = _no_markers(f"- [{title}]({Path(row.path).name}) — {_description(current)}")
        entries.append((current.pinned, current.recorded_at, line))
    entries.sort(key=lambda entry: entry[1], reverse=True)  # newest first …
    entries.sort(key=lambda entry: not entry[0])  # … pinned before the rest (a stable sort)
    return [line for _, _, line in entries]


def _block(conn: Tx, ctx: Context, scope: str, lock: Path) -> list[str]:
    """Rewrite the korg-recall block of the project's ``MEMORY.md``; nothing outside it changes."""
    from korg_bridge.recall.interop.claude.files import index_over_limits
    from korg_bridge.recall.interop.guarded_write import remove, replace, take

    folder = memory_folder(ctx.env, scope.removeprefix("project:"))
    if folder is None:
        return []
    path = folder / INDEX_NAME
    try:
        snapshot = take(path, INDEX_CAP, follow=False)
        text = (snapshot.data or b"").decode("utf-8")
    except (KorgError, UnicodeDecodeError) as exc:
        reason = exc.message if isinstance(exc, KorgError) else "not UTF-8 text"
        return [f"{path}: {reason}; its block was not written"]
    begins, ends = text.count(BLOCK_BEGIN), text.count(BLOCK_END)
    start, end = text.find(BLOCK_BEGIN), text.find(BLOCK_END)
    if begins > 1 or ends > 1 or begins != ends or (begins and end < start):
        return [
            f"{path}: korg-recall's block markers are damaged; left as it is (fix or delete them by hand)"
        ]
    present = text[start : end + len(BLOCK_END)] if begins else None
    recorded = records.block_sha(conn, str(snapshot.path))
    created = snapshot.data is None or (recorded is not None and recorded[1])
    if present is not None and recorded is not None and _sha(present.encode()) != recorded[0]:
        return [
            f"{path}: korg-recall's block was edited by hand; left as it is (delete the block to have it rewritten)"
        ]
    rest = outside_block(text)
    over = index_over_limits(rest)
    if over:
        return [f"{path} is {over}; korg-recall's block would not be loaded, so it was not written"]
    lines = _lines(conn, scope)
    lines_room = INDEX_MAX_LINES - rest.count("\n") - (0 if rest.endswith("\n") or not rest else 1) - 2
    bytes_room = INDEX_MAX_BYTES - len(rest.encode()) - len(BLOCK_BEGIN) - len(BLOCK_END) - 4
    kept: list[str] = []
    for line in lines:
        size = len(line.encode()) + 1
        if len(kept) + 1 > lines_room or size > bytes_room:
            break
        kept.append(line)
        bytes_room -= size
    block = "\n".join([BLOCK_BEGIN, *kept, BLOCK_END]) if kept else None
    if present is not None:
        after = text[end + len(BLOCK_END) :]
        new = text[:start] + block + after if block else text[:start] + after.removeprefix("\n")
    elif block is not None:
        new = text + ("" if text.endswith("\n") or not text else "\n") + block + "\n"
    else:
        new = text
    problems = (
        [f"{len(lines) - len(kept)} memories left out of {path}'s block: Claude Code loads only its first "
         f"{INDEX_MAX_LINES} lines and {INDEX_MAX_BYTES} bytes (their topic files are there)"]
        if len(kept) < len(lines) else []
    )  # fmt: skip
    try:
        if not new and created and snapshot.data is not None:
            remove(snapshot, lock=lock)  # the MEMORY.md korg-recall made held nothing but its block
        elif new != text:
            replace(snapshot, new.encode("utf-8"), lock=lock)
    except KorgError as exc:
        return [*problems, exc.message]
    records.put_block(
        conn, str(snapshot.path), scope, _sha(block.encode()) if block else None, created=created
    )
    return problems
