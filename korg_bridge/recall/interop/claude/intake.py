"""Claude Code's memory folders and instructions files, taken into the store before every read.

Run before ``memories``, ``recall`` over memories and the session-start brief
(:func:`refresh`), like the mirror scan: what changed on disk since the last
call becomes new versions, so a topic file Claude Code edited a moment ago is
what the next query finds. A settled folder costs a ``stat`` per file and one
listing per folder; only a file whose size or mtime moved is read.

What is looked at:

* every ``<config>/projects/*/memory/*.md`` (``$CLAUDE_CONFIG_DIR`` honoured), in
  the project scope of the folder's project (:func:`~.claude_paths.resolve_folder`
  maps the slug back; worktrees of one repository share their scope);
* ``CLAUDE.md``/``AGENTS.md`` of the user (scope ``user``) and of the projects
  the call reads (their project scope), as ``feedback`` memories.

Each file becomes one lineage per part (:mod:`.claude_files`), written by actor
``claude`` with ``source.kind`` ``claude-auto-memory`` or ``instructions``: a
*derived* memory, never merged with ours, never revised through korg-recall,
not copied into our mirror. A version is dated when the file says it was
written (``metadata.modified``), else by the file's mtime -- never by when
korg-recall happened to read it -- so its age is the memory's.

Under ``KORG_RECALL_WRITES=confirm`` every new text read from these files is a
**proposal** (pending, not recalled until a person runs ``memories --approve``):
Claude Code writes its memory folder as the agent, and an agent can edit an
instructions file too; korg-recall cannot tell a person's edit from an agent's,
so none skips the approval confirm promises. A deletion still retires at once
(kept, restorable): a copy must not outlive the file Claude Code removed. A changed file is a new version; a deleted file
retires its memories with the reason (kept, restorable: Claude Code's own
consolidation must not destroy the record); a file that comes back brings them
back. ``[[wiki-links]]`` between topic files of one folder are ``wiki`` links.
A file that cannot be read (a symlink out of its folder, a binary, over
256 KB, malformed front matter, a ``MEMORY.md`` over what Claude Code loads) is
recorded with its reason -- ``stats`` lists them -- and whatever it said before
stays as it was. Topic files korg-recall wrote itself (write-back) are not
read as Claude's; an edit made to one becomes a version of our memory.

Nothing here ever writes to those files. ``KORG_RECALL_CLAUDE_MEMORY=0`` turns
the reading off; under ``KORG_RECALL_WRITES=off`` nothing is taken in either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge.config import ENV_RECALL_WRITES
from korg_bridge.errors import UsageError
from korg_bridge.recall.interop.claude import records
from korg_bridge.recall.interop.claude.files import Read, Skip, read_file, read_parts
from korg_bridge.recall.interop.claude.records import WRITEBACK, FileRow, FolderRow
from korg_bridge.recall.interop.claude.scan import (
    Place,
    anything_to_read,
    instruction_places,
    memory_places,
    open_for_reading,
    reading_on,
)
from korg_bridge.recall.memory.backend.protocols import Store, Tx
from korg_bridge.recall.memory.records import AUTO_MEMORY, Version, iso, new_id, parse_iso
from korg_bridge.recall.memory.rows import (
    head,
    insert_version,
    pending_proposal,
    select_versions,
    supersede,
    update_head,
)
from korg_bridge.recall.memory.scopes import Context

__all__ = ["READER", "anything_to_read", "open_for_reading", "reading_on", "refresh"]

logger = logging.getLogger(__name__)

READER = "claude"
"""The actor of every version read from Claude Code's files."""
UNKNOWN_PROJECT = (
    "cannot tell which project this folder belongs to: no transcript beside it names a directory of "
    "that name, and no directory on this machine has it"
)


@dataclass(slots=True)
class _Pass:
    """What one refresh did, for the log entry and the warnings."""

    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    linked: set[str] = field(default_factory=set)
    """Memory folders whose wiki links must be worked out again."""

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n


def refresh(store: Store, ctx: Context, scopes: Sequence[str]) -> list[str]:
    """Take in what changed in Claude Code's memory folders and the instructions files of the
    user and of the projects in ``scopes``; return one line per file newly skipped.

    Raises:
        ConfigError: ``KORG_RECALL_CLAUDE_MEMORY`` has a bad value.
        KorgError: the store fails.
    """
    if not reading_on(ctx) or store.kind != "sqlite":  # a team store is not one person's folders
        return []
    updates: list[FolderRow] = []
    with store.reading() as tx:
        places = memory_places(tx, ctx, updates)
    for update in updates:  # a folder just mapped to its project: its files are read in this pass
        for place in places:
            if place.folder == str(Path(update.path) / "memory") and update.root:
                place.scope = f"project:{update.root}"
    places += instruction_places(ctx, scopes)
    with store.reading() as tx:
        recorded = records.file_rows(tx, folders=[place.folder for place in places])
    work, gone = _changes(places, recorded)
    if not work and not gone and not updates:
        return []
    reader = dataclasses.replace(ctx, actor=READER, is_agent=False)
    done = _Pass()
    with store.write() as conn:
        for update in updates:
            records.put_folder(conn, update)
        for place, path, label, _ in work:
            _one(conn, reader, place, path, label, done)
        for vanished in gone:
            _gone(conn, reader, vanished, done)
        for folder in done.linked:
            _link(conn, folder, iso(ctx.now))
        if done.counts:
            from korg_bridge.recall.memory import oplog

            oplog.record(
                conn, actor=READER, op="claude_read", status="read", args=dict(done.counts), now=ctx.now
            )
    if done.counts:
        store.flush_log(ctx.env)
    for problem in done.problems:
        logger.info("claude code memory: %s", problem)
    return done.problems


def _changes(
    places: Sequence[Place], recorded: Mapping[str, FileRow]
) -> tuple[list[tuple[Place, Path, str, FileRow | None]], list[FileRow]]:
    """The files to take in (new, or their ``stat`` moved) and the recorded ones no longer there
    (only of a place whose listing is complete: a partial listing proves nothing gone)."""
    work: list[tuple[Place, Path, str, FileRow | None]] = []
    gone: list[FileRow] = []
    for place in places:
        seen: set[str] = set()
        for path, label in place.files:
            seen.add(str(path))
            row = recorded.get(str(path))
            if row is not None and _settled(path, row):
                continue
            work.append((place, path, label, row))
        if place.complete:
            gone += [
                row
                for key, row in recorded.items()
                if row.folder == place.folder and key not in seen and row.status not in ("gone", "archived")
            ]
    return work, gone


def _settled(path: Path, row: FileRow) -> bool:
    """Whether a recorded file is as it was (its ``stat`` did not move)."""
    if row.status == "gone":
        return False
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_size == row.size and info.st_mtime_ns == row.mtime_ns


def _one(conn: Tx, ctx: Context, place: Place, path: Path, label: str, done: _Pass) -> None:
    """Take in one file found changed (inside the pass's transaction)."""
    row = records.file_row(conn, str(path))  # as it is now: another process may have taken it in
    if row is not None and row.kind == WRITEBACK:
        _our_file_edited(conn, ctx, place, path, row, done)
        return
    if place.scope is None:
        _skip(conn, place, path, row, Skip(UNKNOWN_PROJECT), done)
        return
    read = read_file(path, place.base)
    if read is None:
        if row is not None:
            _gone(conn, ctx, row, done)
        return
    if isinstance(read, Skip):
        _skip(conn, place, path, row, read, done)
        return
    if row is not None and row.status == "taken" and row.sha256 == read.sha256:
        records.put_file(conn, dataclasses.replace(row, size=read.size, mtime_ns=read.mtime_ns))
        return
    parts = read_parts(read, path, place.kind, label=label)
    if isinstance(parts, Skip):
        _skip(conn, place, path, row, parts, done, read)
        return
    try:
        ids = _apply_parts(conn, ctx, place, path, parts, row, done, read.mtime_ns)
    except UsageError as exc:  # a part the caps refuse even after splitting
        _skip(conn, place, path, row, Skip(exc.message), done, read)
        return
    links = sorted({link for part in parts for link in part.links})
    records.put_file(
        conn,
        FileRow(str(path), place.kind, place.scope, place.folder, "taken", ids, links, read.size, read.mtime_ns,
                read.sha256),
    )  # fmt: skip
    if place.kind == AUTO_MEMORY:
        done.linked.add(place.folder)


def _skip(
    conn: Tx,
    place: Place,
    path: Path,
    row: FileRow | None,
    skip: Skip,
    done: _Pass,
    read: Read | None = None,
) -> None:
    """Record why a file was not read; whatever it said before stays as it was."""
    try:
        info = os.stat(path)
        size, mtime = info.st_size, info.st_mtime_ns
    except OSError:
        size, mtime = 0, 0
    records.put_file(
        conn,
        FileRow(str(path), place.kind, place.scope or "", place.folder, "skipped", row.ids if row else [],
                row.links if row else [], size, mtime, read.sha256 if read else "", skip.reason),
    )  # fmt: skip
    if row is None or row.status != "skipped" or row.reason != skip.reason:  # news once, not every call
        done.count("skipped")
        done.problems.append(f"{path}: {skip.reason}; skipped")


def _source(place: Place, path: Path, number: int, total: int) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": place.kind, "file": str(path)}
    if total > 1:
        source["part"] = f"{number}/{total}"
    return source


def _written_at(modified: str | None, mtime_ns: int, now: float, after: str | None = None) -> float:
    """When a file's text was written: what it says (``metadata.modified``), else its mtime; never
    in the future, and never before the version it follows (``after``), so a lineage stays in order."""
    when = mtime_ns / 1e9
    if modified is not None:
        with contextlib.suppress(ValueError, OverflowError, OSError):
            when = parse_iso(modified)
    when = min(when, now)
    if after is not None:
        with contextlib.suppress(ValueError, OverflowError, OSError):
            when = max(when, parse_iso(after))
    return when


def _author(ctx: Context, when: float) -> Context:
    """The reader writing text dated ``when``: under ``confirm`` an agent, whose writes are proposals."""
    return dataclasses.replace(ctx, now=when, is_agent=ctx.writes == "confirm")


def _held(path: Path, version: Version, done: _Pass) -> None:
    done.count("proposed")
    done.problems.append(
        f"{path}: held for approval ({ENV_RECALL_WRITES}=confirm); approve it with "
        f"`korg-recall memories --approve {version.id}`"
    )


def _apply_parts(
    conn: Tx,
    ctx: Context,
    place: Place,
    path: Path,
    parts: Sequence[Any],
    row: FileRow | None,
    done: _Pass,
    mtime_ns: int,
) -> list[str]:
    """New lineages or versions for the parts of a changed file; retire parts it no longer has.

    Raises:
        UsageError: a part is empty or over the body cap.
    """
    from korg_bridge.recall.memory.drafts import prepare_text
    from korg_bridge.recall.memory.writes import add_version

    assert place.scope is not None
    previous = row.ids if row is not None else []
    back = row is not None and row.status == "gone"
    what = "Claude Code's memory folder" if place.kind == AUTO_MEMORY else "an instructions file"
    ids: list[str] = []
    for number, part in enumerate(parts, 1):
        text = prepare_text(
            part.body, part.title, allow_secrets=ctx.allow_secrets, what=f"the text of {path}"
        )
        source = _source(place, path, number, len(parts))
        fields = {"title": text.title, "body": text.body, "type": part.type}
        current = head(conn, previous[number - 1]) if number <= len(previous) else None
        if current is None or current.state == "purged" or current.scope != place.scope:
            author = _author(ctx, _written_at(part.modified, mtime_ns, ctx.now))
            at = iso(author.now)
            version = insert_version(
                conn,
                Version(
                    id=new_id(), version=1, scope=place.scope, type=part.type, title=text.title, body=text.body,
                    content_hash=text.content_hash, actor=READER, recorded_at=at, trust=text.trust, source=source,
                    provenance=[{"actor": READER, "at": at, "source": {"file": str(path)}}],
                    reason=f"read from {what}", state="pending" if author.holds_for_approval else "live",
                ),
            )  # fmt: skip
            done.count("created")
            if author.holds_for_approval:
                _held(path, version, done)
            ids.append(version.id)
            continue
        proposal = pending_proposal(conn, current.id)
        same = all(getattr(current, name) == value for name, value in fields.items())
        if proposal is not None and all(getattr(proposal, name) == value for name, value in fields.items()):
            version = proposal  # already waiting for approval
        elif same and not (back and current.state == "retired"):
            if proposal is not None and proposal.version != current.version:
                # The file went back to what is live: the proposal it no longer says is withdrawn.
                supersede(conn, current.id, current.version, iso(ctx.now), pending_only=True)
            version = current
        else:
            author = _author(ctx, _written_at(part.modified, mtime_ns, ctx.now, current.recorded_at))
            reason = f"back in {what}" if back else f"changed in {what}"
            version = add_version(
                conn, author, current, **fields, content_hash=text.content_hash, trust=text.trust, source=source,
                reason=reason,
            )  # fmt: skip
            done.count("revised")
            if author.holds_for_approval:
                _held(path, version, done)
        ids.append(version.id)
    for stale in previous[len(parts) :]:
        _retire(conn, ctx, stale, f"no longer in {path} (the file became shorter)", done)
    return ids


def _retire(conn: Tx, ctx: Context, memory_id: str, reason: str, done: _Pass) -> None:
    """A new version of ``memory_id`` by the reader, retired, with ``reason`` (kept, restorable)."""
    from korg_bridge.recall.memory.writes import add_version

    current = head(conn, memory_id)
    if current is None or current.state != "live":
        return
    version = add_version(conn, ctx, current, reason=reason[:500])
    update_head(conn, version, state="retired", retired_at=iso(ctx.now))
    done.count("retired")


def _gone(conn: Tx, ctx: Context, row: FileRow, done: _Pass) -> None:
    """A recorded file that is no longer there."""
    if row.kind == WRITEBACK:
        # Claude Code (or a person) deleted a topic file korg-recall wrote: our memory stays, and
        # the file is not written again (see writeback.py).
        records.put_file(
            conn, dataclasses.replace(row, status="gone", reason="deleted from Claude Code's memory folder")
        )
        done.count("writeback_deleted")
        return
    where = "Claude Code's memory folder" if row.kind == AUTO_MEMORY else "its place"
    for memory_id in row.ids:
        _retire(conn, ctx, memory_id, f"{row.path} was deleted from {where}", done)
    records.put_file(conn, dataclasses.replace(row, status="gone", reason=None))
    if row.kind == AUTO_MEMORY:
        done.linked.add(row.folder)


def _our_file_edited(conn: Tx, ctx: Context, place: Place, path: Path, row: FileRow, done: _Pass) -> None:
    """A topic file korg-recall wrote changed on disk: the edit becomes a version of our memory."""
    from korg_bridge.recall.memory.drafts import prepare_text
    from korg_bridge.recall.memory.writes import add_version

    read = read_file(path, place.base)
    if read is None:
        _gone(conn, ctx, row, done)
        return
    if isinstance(read, Skip) or read.sha256 == row.sha256:
        size, mtime = (read.size, read.mtime_ns) if isinstance(read, Read) else (row.size, row.mtime_ns)
        records.put_file(conn, dataclasses.replace(row, size=size, mtime_ns=mtime))
        return
    parts = read_parts(read, path, AUTO_MEMORY)
    current = head(conn, row.ids[0]) if row.ids else None
    if isinstance(parts, Skip) or len(parts) != 1 or current is None or current.state != "live":
        reason = (
            parts.reason if isinstance(parts, Skip) else "edited in Claude Code's memory folder; not taken in"
        )
        records.put_file(
            conn,
            dataclasses.replace(
                row, size=read.size, mtime_ns=read.mtime_ns, sha256=read.sha256, reason=reason
            ),
        )
        done.problems.append(f"{path}: {reason}")
        return
    part = parts[0]
    try:
        text = prepare_text(
            part.body, part.title, allow_secrets=ctx.allow_secrets, what=f"the text of {path}"
        )
    except UsageError as exc:
        records.put_file(
            conn,
            dataclasses.replace(
                row, size=read.size, mtime_ns=read.mtime_ns, sha256=read.sha256, reason=exc.message
            ),
        )
        return
    if (current.title, current.body) != (text.title, text.body):
        kind = part.type if part.type != "note" else current.type
        author = _author(ctx, _written_at(part.modified, read.mtime_ns, ctx.now, current.recorded_at))
        version = add_version(
            conn, author, current, title=text.title, body=text.body, content_hash=text.content_hash,
            trust=text.trust, type=kind, reason="edited in Claude Code's memory folder",
        )  # fmt: skip
        done.count("writeback_edited")
        if author.holds_for_approval:
            _held(path, version, done)
    records.put_file(
        conn,
        dataclasses.replace(row, size=read.size, mtime_ns=read.mtime_ns, sha256=read.sha256, reason=None),
    )


def _link(conn: Tx, folder: str, at: str) -> None:
    """Work out the ``wiki`` links among the topic files of one memory folder again."""
    rows = [row for row in records.file_rows(conn, folders=[folder]).values() if row.kind == AUTO_MEMORY]
    taken = [row for row in rows if row.status in ("taken", "skipped") and row.ids]
    firsts = [row.ids[0] for row in taken]
    titles: dict[str, str] = {}
    if firsts:
        marks = ", ".join("?" * len(firsts))
        for version in select_versions(conn, f"id IN ({marks}) AND superseded_by IS NULL", firsts):
            titles[version.id] = version.title
    names: dict[str, str] = {}
    for row in taken:
        stem = Path(row.path).stem.lower()
        for name in (stem, stem.partition("_")[2], titles.get(row.ids[0], "").lower()):
            if name:
                names.setdefault(name, row.ids[0])
    links: list[tuple[str, str]] = []
    for row in rows:
        if row.status != "taken" or not row.ids:
            continue
        for target in row.links:
            key = target.strip().lower().removesuffix(".md")
            dst = names.get(key) or names.get(key.replace(" ", "_")) or names.get(key.replace(" ", "-"))
            if dst is not None:
                links.append((row.ids[0], dst))
    records.replace_wiki_links(conn, [memory_id for row in rows for memory_id in row.ids], links, at)
