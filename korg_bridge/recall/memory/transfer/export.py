"""``korg-recall export``: the store as a lossless JSONL file, or its live memories as a Markdown tree.

**JSONL** (``korg-recall-memory@v1``) is the backup and the way to move a store:
a header line, then one line per version with every column (tombstones of
purged memories and proposals awaiting approval included), then one line per
link. Importing it into an empty store reproduces every id, version, timestamp,
actor, state, provenance and link (:mod:`.importer`). The header carries the
counts, so an export cut short (a full disk, a killed process) is refused on
import instead of restoring half a store. Vectors are not exported: they belong
to a model and are computed again.

**Markdown** writes the live heads in the mirror's layout (front matter and
body, ``<scope folder>/<type>_<slug>--<id>.md``) into a folder that must be
absent or empty: an export never overwrites a file.

Exporting never creates a store: without one, the export is empty (and says so
on stderr).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from korg_bridge._fs.durable import publish
from korg_bridge._version import __version__
from korg_bridge.errors import ConfigError, UsageError
from korg_bridge.recall.memory.mirror.frontmatter import rel_path, render
from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.rows import select_versions

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx

__all__ = ["EXPORT_FORMAT", "FORMATS", "export_jsonl", "export_markdown", "jsonl_lines"]

EXPORT_FORMAT = "korg-recall-memory@v1"
"""The first line's ``format``: an importer refuses any other (a newer one names itself here)."""
FORMATS = ("jsonl", "markdown")


def _scope_clause(scope: str | None) -> tuple[str, tuple[object, ...]]:
    return ("scope = ?", (scope,)) if scope is not None else ("1 = 1", ())


def jsonl_lines(conn: Tx, *, scope: str | None, now: float) -> Iterator[str]:
    """The export of ``conn``'s memories (of ``scope``, else all) as lines, header first.

    Run it inside one read transaction: the counts of the header and the lines that follow
    must describe the same snapshot.
    """
    where, params = _scope_clause(scope)
    count = int(conn.execute(f"SELECT count(*) FROM memory WHERE {where}", params).fetchone()[0])
    ids = {row[0] for row in conn.execute(f"SELECT DISTINCT id FROM memory WHERE {where}", params)}
    links = [
        {"record": "link", "src": src, "dst": dst, "kind": kind, "created_at": created}
        for src, dst, kind, created in conn.execute(
            "SELECT src, dst, kind, created_at FROM memory_links ORDER BY rowid"
        )
        if src in ids and dst in ids
    ]
    header = {
        "format": EXPORT_FORMAT,
        "exported_at": iso(now),
        "korg_recall": __version__,
        "scope": scope,
        "versions": count,
        "links": len(links),
    }
    yield json.dumps(header, ensure_ascii=False)
    # Oldest row first: an import inserts in this order, so superseded marks always point at
    # versions that exist by the time the whole file is in.
    for version in select_versions(conn, f"{where} ORDER BY rowid", params):
        yield json.dumps({"record": "version", **version.to_dict()}, ensure_ascii=False, sort_keys=True)
    for link in links:
        yield json.dumps(link, ensure_ascii=False)


def _write_lines(sink: IO[str], lines: Iterator[str]) -> int:
    written = 0
    for line in lines:
        sink.write(line + "\n")
        written += 1
    return written


def _claim(path: Path) -> tuple[int, Path]:
    """A temp file beside ``path`` for the export (created exclusively: never someone's file).

    Raises:
        UsageError: ``path`` exists already, or its folder does not.
        ConfigError: the folder cannot be written.
    """
    if os.path.lexists(path):
        raise UsageError(f"{path} exists; an export never overwrites a file. Pass a new --output path.")
    if not path.parent.is_dir():
        raise UsageError(f"the folder of {path} does not exist. Create it, or pass another --output path.")
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        raise ConfigError(
            f"cannot write {tmp}: {exc.strerror or exc}. Check the folder's permissions."
        ) from exc
    return fd, tmp


def _publish(tmp: Path, path: Path) -> None:
    """Give the finished temp file its name without ever replacing a file that appeared meanwhile.

    Raises:
        UsageError: ``path`` appeared while the export was written.
        ConfigError: the file system refuses both a hard link and a rename.
    """
    try:
        publish(tmp, path, replace=False)  # a link: fails if path exists, no check-then-rename race
    except FileExistsError:
        raise UsageError(
            f"{path} appeared while exporting; it was left as it is. Pass a new --output path."
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}.") from exc


def export_jsonl(
    store: Store | None, *, scope: str | None, output: Path | None, now: float
) -> dict[str, Any]:
    """Write the JSONL export to ``output`` (else stdout); return what was written.

    Raises:
        UsageError: ``output`` exists or its folder does not.
        ConfigError: ``output`` cannot be written.
        KorgError: the store fails (see :meth:`.backend.Store.reading`).
    """

    def lines() -> Generator[str, None, None]:
        if store is None:
            yield from _empty_lines(scope, now)
            return
        with store.reading() as conn:
            yield from jsonl_lines(conn, scope=scope, now=now)

    if output is None:
        # Closed here, on a closed pipe too (`| head`): its read transaction ends while the store is open.
        with contextlib.closing(lines()) as produced:
            count = _write_lines(sys.stdout, produced)
            sys.stdout.flush()
        return {"lines": count}
    fd, tmp = _claim(output)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            count = _write_lines(handle, lines())
            handle.flush()
            os.fsync(handle.fileno())
        _publish(tmp, output)
    except OSError as exc:
        raise ConfigError(f"cannot write {output}: {exc.strerror or exc}. Check free space.") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # ours: made exclusively above
    return {"output": str(output), "lines": count}


def _empty_lines(scope: str | None, now: float) -> Iterator[str]:
    header = {
        "format": EXPORT_FORMAT,
        "exported_at": iso(now),
        "korg_recall": __version__,
        "scope": scope,
        "versions": 0,
        "links": 0,
    }
    yield json.dumps(header, ensure_ascii=False)


def _live_heads(conn: Tx, scope: str | None) -> list[Version]:
    where, params = _scope_clause(scope)
    return select_versions(
        conn, f"{where} AND superseded_by IS NULL AND state = 'live' ORDER BY scope, id", params
    )


def check_markdown_target(folder: Path) -> None:
    """Raises:
    UsageError: ``folder`` is a file, or a folder that holds anything (an export never
        writes among someone's files)."""
    if not os.path.lexists(folder):
        return
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder. Pass an absent or empty folder as --output.")
    try:
        with os.scandir(folder) as entries:
            empty = next(entries, None) is None
    except OSError as exc:
        raise ConfigError(f"cannot read {folder}: {exc.strerror or exc}.") from exc
    if not empty:
        raise UsageError(
            f"{folder} is not empty; an export never writes among other files. Pass an absent or empty folder."
        )


def export_markdown(store: Store | None, *, scope: str | None, folder: Path) -> dict[str, Any]:
    """Write the live heads as Markdown files under ``folder`` (absent or empty).

    Files are created exclusively; if anything fails, the files written so far are
    removed again (they are this call's) and the error is raised.

    Raises:
        UsageError: ``folder`` is a file or not empty.
        ConfigError: a file cannot be written.
    """
    check_markdown_target(folder)
    heads: Sequence[Version] = []
    if store is not None:
        with store.reading() as conn:
            heads = _live_heads(conn, scope)
    made_folder = not os.path.lexists(folder)
    written: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for head in heads:
            target = folder / rel_path(head)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = render(head).encode("utf-8")
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            written.append(target)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
    except OSError as exc:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        _remove_empty_folders(folder, keep_root=not made_folder)
        raise ConfigError(
            f"cannot write the export under {folder}: {exc.strerror or exc}. Check free space and permissions."
        ) from exc
    return {"output": str(folder), "files": len(written)}


def _remove_empty_folders(root: Path, *, keep_root: bool) -> None:
    """Remove the (now empty) folders an interrupted Markdown export made, deepest first."""
    for folder, _dirs, _files in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        if keep_root and Path(folder) == root:
            continue
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only succeeds on an empty folder
