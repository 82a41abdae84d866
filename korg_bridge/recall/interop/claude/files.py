"""Reading one of Claude Code's files safely, and what it says as memories.

Every file is someone else's and may be anything: a symlink out of its folder,
a FIFO, a binary, megabytes of text, front matter no parser of ours reads. So a
file is opened without following it blindly (a symlink must resolve inside the
folder it sits in), must be regular, is read up to :data:`MAX_FILE_BYTES`, must
be UTF-8 text without NUL bytes -- and anything else is a :class:`Skip` with a
one-line reason that ``stats`` shows. Nothing here writes.

What a file says:

* a **topic file** (``<type>_<name>.md``): front matter ``name`` (the title),
  ``description`` (the first paragraph, unless the body holds it) and the type
  (``user``/``feedback``/``project``/``reference``; anything else: ``note``) --
  in Claude Code's current shape under a ``metadata:`` block with ``node_type``,
  ``type`` and ``modified`` (when the memory was written: its age), in the
  older one a flat ``type:`` line -- then the body; ``[[wiki-links]]`` in it
  (``[[name]]``, ``[[name|label]]``, ``[[name#heading]]``) name other topic files;
* ``MEMORY.md``, the index: its lines linking topic files are left to those
  files, and korg-recall's own block is skipped; whatever else it holds (older
  folders kept facts there) is one memory, "MEMORY.md notes";
* an **instructions file** (``CLAUDE.md``, ``AGENTS.md``): a ``feedback``
  memory holding the whole text.

A text over a memory's 8 KB is split at paragraphs into parts titled "(1/3)" …,
each a lineage of its own (the same split as ``korg-recall import``).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from korg_bridge._fs.safe_read import NotRegular, read_regular
from korg_bridge.recall.interop.claude.paths import INDEX_MAX_BYTES, INDEX_MAX_LINES, INDEX_NAME
from korg_bridge.recall.memory.mirror.frontmatter import FrontMatterError, declared_type, parse
from korg_bridge.recall.memory.records import iso, parse_iso

__all__ = [
    "BLOCK_BEGIN",
    "BLOCK_END",
    "CLAUDE_TYPES",
    "MAX_FILE_BYTES",
    "Part",
    "Read",
    "Skip",
    "read_file",
    "read_parts",
    "wiki_links",
]

MAX_FILE_BYTES = 256 * 1024
"""Larger files are skipped: a topic file is a few hundred bytes, a long CLAUDE.md tens of KB."""
CLAUDE_TYPES = ("user", "feedback", "project", "reference")
SPLIT_BELOW = 1024
"""Characters below which a text is one part for certain (parts are split at 7.5 KB of UTF-8)."""
BLOCK_BEGIN = "<!-- korg-recall:begin -->"
BLOCK_END = "<!-- korg-recall:end -->"

_WIKI = re.compile(r"\[\[([^\[\]\n|#]{1,200})(?:[#|][^\[\]\n]{0,200})?\]\]")
_INDEX_LINE = re.compile(r"^\s*(?:[-*+]|\d+\.)\s*\[[^\]\n]*\]\([^)\n]*\.md\)")
WIKI_MAX = 50
"""Links one file may name (more are not recorded)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Why a file was not read (one line, for ``stats``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Read:
    """A file's bytes as decoded text, with the ``stat`` and hash they had."""

    text: str
    size: int
    mtime_ns: int
    sha256: str


@dataclass(slots=True)
class Part:
    """One memory a file holds (a long file holds several)."""

    title: str
    body: str
    type: str
    links: list[str] = field(default_factory=list)
    modified: str | None = None
    """When the file says it was written (``metadata.modified``), in the store's form; None: unsaid."""


def _inside(path: Path, folder: Path) -> bool:
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == os.path.realpath(
            folder
        )
    except ValueError:
        return False


def read_file(path: Path, folder: Path) -> Read | Skip | None:
    """The text of ``path`` (None: it is gone), or why it cannot be read as a memory file.

    ``folder`` is where it was found: a symlink must resolve inside it.
    """
    try:
        if path.is_symlink() and not _inside(path, folder):
            return Skip(f"a symlink pointing outside {folder}")
        got = read_regular(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None
    except NotRegular:
        return Skip("not a regular file")
    except OSError as exc:
        return Skip(f"cannot be read ({exc.strerror or exc})")
    info, data = got.info, got.data
    if info.st_size > MAX_FILE_BYTES:
        return Skip(f"{info.st_size} bytes, larger than the {MAX_FILE_BYTES // 1024} KB read")
    if got.over:  # it grew while read
        return Skip(f"larger than the {MAX_FILE_BYTES // 1024} KB read")
    if b"\0" in data:
        return Skip("binary (it holds NUL bytes)")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        return Skip(f"not UTF-8 text (byte {exc.start})")
    return Read(text, info.st_size, info.st_mtime_ns, hashlib.sha256(data).hexdigest())


def wiki_links(text: str) -> list[str]:
    """The targets of ``[[wiki-links]]`` in ``text``, in order, once each."""
    found: list[str] = []
    for match in _WIKI.finditer(text):
        target = match.group(1).strip()
        if target and target not in found:
            found.append(target)
            if len(found) >= WIKI_MAX:
                break
    return found


def _parts(title: str, body: str, kind: str, links: list[str], modified: str | None = None) -> list[Part]:
    if len(body) <= SPLIT_BELOW:  # the common case, without importing the importer's splitter
        return [Part(title, body, kind, links, modified)]
    from korg_bridge.recall.memory.transfer.formats import split_body

    pieces = split_body(body)
    if len(pieces) == 1:
        return [Part(title, body, kind, links, modified)]
    return [
        Part(f"{title} ({n}/{len(pieces)})", piece, kind, wiki_links(piece), modified)
        for n, piece in enumerate(pieces, 1)
    ]


def _modified(meta: dict[str, object]) -> str | None:
    """``metadata.modified`` (or a flat ``modified``) in the store's form; None when absent or not a time."""
    nested = meta.get("metadata")
    raw = nested.get("modified") if isinstance(nested, dict) else None
    raw = raw if raw is not None else meta.get("modified")
    if not isinstance(raw, str):
        return None
    try:
        return iso(parse_iso(raw.strip()))
    except (ValueError, OverflowError, OSError):
        return None


def _topic(text: str, path: Path) -> list[Part] | Skip:
    try:
        parsed = parse(text)
    except FrontMatterError as exc:
        return Skip(f"unreadable front matter ({exc})")
    meta = parsed.meta
    raw_name, raw_description = meta.get("name"), meta.get("description")
    name = raw_name if isinstance(raw_name, str) else ""
    description = raw_description if isinstance(raw_description, str) else ""
    body = parsed.body.strip()
    if description.strip() and description.strip() not in body:
        body = f"{description.strip()}\n\n{body}".strip()
    if not body:
        return Skip("empty")
    title = name.strip() or description.strip() or body.splitlines()[0].strip("# ").strip() or path.stem
    declared = declared_type(meta)
    kind = declared if declared in CLAUDE_TYPES else "note"
    return _parts(title, body, str(kind), wiki_links(body), _modified(meta))


def index_over_limits(text: str) -> str | None:
    """Why Claude Code would not load all of a ``MEMORY.md`` (None: it loads it whole)."""
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    size = len(text.encode("utf-8"))
    if lines > INDEX_MAX_LINES or size > INDEX_MAX_BYTES:
        return (
            f"{lines} lines, {size} bytes: over what Claude Code loads of MEMORY.md "
            f"({INDEX_MAX_LINES} lines, {INDEX_MAX_BYTES} bytes)"
        )
    return None


def outside_block(text: str) -> str:
    """``text`` without korg-recall's block (markers included, and the line end after it)."""
    start = text.find(BLOCK_BEGIN)
    end = text.find(BLOCK_END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return text
    return text[:start] + text[end + len(BLOCK_END) :].removeprefix("\n")


def _index(text: str) -> list[Part] | Skip:
    over = index_over_limits(text)
    if over:
        return Skip(over)
    kept = [
        line
        for line in outside_block(text).splitlines()
        if line.strip() and not _INDEX_LINE.match(line) and not line.lstrip().startswith(("#", "<!--"))
    ]
    if not kept:
        return []
    return _parts("MEMORY.md notes", "\n".join(kept).strip(), "project", wiki_links("\n".join(kept)))


def _instructions(text: str, label: str) -> list[Part] | Skip:
    body = text.strip()
    if not body:
        return Skip("empty")
    return _parts(f"Standing instructions: {label}", body, "feedback", [])


def read_parts(read: Read, path: Path, kind: str, *, label: str = "") -> list[Part] | Skip:
    """The memories a file holds: ``kind`` is ``claude-auto-memory`` or ``instructions`` (then
    ``label`` names the file in the title, e.g. ``.claude/CLAUDE.md``)."""
    if kind == "instructions":
        return _instructions(read.text, label or path.name)
    if path.name == INDEX_NAME:
        return _index(read.text)
    return _topic(read.text, path)
