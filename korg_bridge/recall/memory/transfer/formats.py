"""What ``korg-recall import`` was given: which format it is, and the memories it holds.

Formats, detected from the path and the first bytes (never from a flag a user
could get wrong):

* **our export** (``korg-recall-memory@v1`` JSONL): checked by :mod:`.verbatim`,
  written verbatim;
* **a Markdown tree** (a folder, or one ``.md`` file): front matter of ours
  (``id, type, scope, tags, title, pinned``), of Claude Code's memory files
  (``name``, ``description``, ``type``; its ``MEMORY.md`` index is skipped), or
  none (the first line is the title, type ``note``);
* **the MCP reference memory server's** ``memory.jsonl``: one memory per
  entity (its observations as the body's lines, ``entityType`` as a tag);
  each relation is a line of the body of its ``from`` entity ("Ana works_at
  Acme"), of its ``to`` entity when ``from`` is missing, or a note of its own,
  and a ``relation:<type>`` link when both ends are entities;
* **mem0's JSON export** (``{"results": [...]}`` or a list of
  ``{id, memory, hash, metadata, categories, user_id, agent_id, run_id,
  created_at, updated_at}``).

Foreign memories become :class:`Item` s that the importer writes through the
write policy; their foreign ids and timestamps go into ``source``. A body over
8 KB is split at paragraph, then line boundaries into parts titled
"(1/3)" … -- a memory is one fact, but an import should not fail on a long
entity. Every file is regular, capped in size, and read whole before anything
is written: a malformed line is a one-line error naming the file and line.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge._fs.safe_read import NotRegular, RegularFile
from korg_bridge.errors import ConfigError, UsageError
from korg_bridge.recall.memory import storable
from korg_bridge.recall.memory.drafts import BODY_MAX_BYTES, TAG_MAX_CHARS, TAGS_MAX
from korg_bridge.recall.memory.mirror.frontmatter import FrontMatterError, declared_type, parse
from korg_bridge.recall.memory.records import MEMORY_TYPES

__all__ = ["MAX_FILE_BYTES", "MAX_MARKDOWN_FILES", "Batch", "Item", "read_source", "split_body"]

MAX_FILE_BYTES = 128 * 1024 * 1024
"""An import file is read whole before anything is written: 10k memories with their versions
take a few MB, so this is far above any store and below what a laptop notices."""
MAX_MARKDOWN_BYTES = 1024 * 1024
"""One Markdown memory file (a memory is at most 8 KB; a long topic file is split)."""
MAX_MARKDOWN_FILES = 20_000
SPLIT_AT = BODY_MAX_BYTES - 512
"""Parts of a long body stay this far below the cap: redaction may lengthen a part slightly."""
INDEX_NAME = "MEMORY.md"
"""Claude Code's index of its memory files: links to the topic files, not a memory."""


@dataclass(slots=True)
class Item:
    """A foreign memory to write through the write policy."""

    body: str
    title: str | None
    type: str
    where: str
    """``FILE``, ``FILE line N`` or ``FILE item N``: named by errors about it."""
    tags: list[str] = field(default_factory=list)
    scope: str | None = None
    """The scope its file names (our front matter); None: the import's scope."""
    pinned: bool = False
    source: dict[str, Any] = field(default_factory=dict)
    identity: str | None = None
    """A stable foreign name (``mem0:<id>``): a later import of a changed text becomes a new version."""


@dataclass(slots=True)
class Batch:
    """One import: the format, the raw text (ours) or the items (foreign), and the relations."""

    format: str
    path: Path
    sha256: str
    bytes: int
    items: list[Item] = field(default_factory=list)
    lines: list[tuple[int, str]] = field(default_factory=list)
    """Our export's ``(line number, text)``, for :func:`.verbatim.read_exported`."""
    relations: list[tuple[str, str, str]] = field(default_factory=list)
    """``(from identity, to identity, kind)`` links between items."""
    skipped: list[str] = field(default_factory=list)


def _read(path: Path, cap: int) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes.

    Raises:
        UsageError: it is not a regular file, or it is too big.
        ConfigError: it cannot be read.
    """
    file = RegularFile(path)
    try:
        file.open()
    except NotRegular as exc:
        raise UsageError(
            f"{path} is not a regular file (a FIFO, socket or device). Pass a file or a folder."
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}. Check its permissions.") from exc
    with file:
        size = file.stat.st_size
        if size > cap:
            raise UsageError(f"{path} is {size} bytes; an import reads at most {cap} bytes per file.")
        try:
            data, over = file.read(cap)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}.") from exc
    if over:  # it grew while being read
        raise UsageError(f"{path} is over {cap} bytes; an import reads at most that per file.")
    return data


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{where}: not UTF-8 text (byte {exc.start}). Convert it to UTF-8 first.") from None


def split_body(body: str, limit: int = SPLIT_AT) -> list[str]:
    """``body`` in parts of at most ``limit`` UTF-8 bytes: at blank lines, then lines, then characters."""
    if len(body.encode("utf-8")) <= limit:
        return [body]
    pieces: list[str] = []
    for paragraph in body.split("\n\n"):
        for line in paragraph.split("\n") if len(paragraph.encode("utf-8")) > limit else [paragraph]:
            while len(line.encode("utf-8")) > limit:
                cut = limit // 4  # characters of at most 4 bytes each always fit
                pieces.append(line[:cut])
                line = line[cut:]
            pieces.append(line)
        pieces.append("")  # where the paragraph ended
    parts: list[str] = []
    current = ""
    for piece in pieces:
        joined = f"{current}\n{piece}" if current else piece
        if len(joined.encode("utf-8")) > limit:
            parts.append(current.strip("\n"))
            current = piece
        else:
            current = joined
    if current.strip():
        parts.append(current.strip("\n"))
    return [part for part in parts if part.strip()]


def _split(item: Item) -> list[Item]:
    parts = split_body(item.body)
    if len(parts) == 1:
        return [item]
    title = item.title or item.body.strip().splitlines()[0][:60]
    out: list[Item] = []
    for number, part in enumerate(parts, 1):
        identity = f"{item.identity}#{number}" if item.identity else None
        source = {**item.source, "part": f"{number}/{len(parts)}"}
        out.append(
            Item(
                part, f"{title} ({number}/{len(parts)})", item.type, item.where, list(item.tags),
                item.scope, item.pinned, source, identity,
            )
        )  # fmt: skip
    return out


def _tags(values: Any) -> list[str]:
    """Foreign labels as tags: strings only, trimmed to one short line, at most 20."""
    tags: list[str] = []
    for value in values if isinstance(values, list) else [values]:
        if isinstance(value, str) and " ".join(value.split()):
            tag = " ".join(value.split())[:TAG_MAX_CHARS]
            if tag not in tags:
                tags.append(tag)
    return tags[:TAGS_MAX]


# --- Markdown -------------------------------------------------------------------------------------


def _markdown(path: Path, rel: str, batch: Batch) -> None:
    where = str(path)
    text = _text(_read(path, MAX_MARKDOWN_BYTES), where)
    try:
        parsed = parse(text)
    except FrontMatterError as exc:
        raise UsageError(
            f"{where}: unreadable front matter ({exc}). Fix it, or move the file out of the way."
        ) from None
    except ValueError:  # an integer of thousands of digits, which Python refuses to convert
        raise UsageError(
            f"{where}: unreadable front matter (a number too long to read). Fix it, or move the file "
            "out of the way."
        ) from None
    meta = parsed.meta
    if not parsed.body.strip() and not meta.get("description"):
        batch.skipped.append(f"{where}: empty")
        return
    if path.name == INDEX_NAME and not parsed.has_front_matter:
        batch.skipped.append(f"{where}: Claude Code's index of its memory files")
        return
    kind = declared_type(meta) if declared_type(meta) in MEMORY_TYPES else "note"
    source: dict[str, Any] = {"import": "markdown", "file": rel}
    if ("name" in meta or "description" in meta) and "id" not in meta:
        # Claude Code's memory file: name, a one-line description, a type, then the memory.
        raw_name, raw_description = meta.get("name"), meta.get("description")
        name = raw_name.strip() if isinstance(raw_name, str) else ""
        description = raw_description.strip() if isinstance(raw_description, str) else ""
        body = parsed.body.strip()
        if description and description not in body:
            body = f"{description}\n\n{body}".strip()
        source["import"] = "claude-code"
        item = Item(
            body, name or description or None, str(kind), where, source=source, identity=f"claude-code:{rel}"
        )
    else:
        title = meta.get("title") if isinstance(meta.get("title"), str) else None
        scope = meta.get("scope") if isinstance(meta.get("scope"), str) else None
        if isinstance(meta.get("id"), str):
            source["foreign_id"] = meta["id"]
        item = Item(
            parsed.body.strip(), title, str(kind), where, _tags(meta.get("tags") or []), scope,
            meta.get("pinned") is True, source,
        )  # fmt: skip
    batch.items.extend(_split(item))


def _markdown_tree(root: Path, batch: Batch) -> None:
    files: list[tuple[Path, str]] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".md") and not name.startswith("."):
                path = Path(folder) / name
                if path.is_symlink() or not path.is_file():
                    batch.skipped.append(f"{path}: not a regular file")
                    continue
                files.append((path, path.relative_to(root).as_posix()))
                if len(files) > MAX_MARKDOWN_FILES:
                    raise UsageError(
                        f"{root} holds more than {MAX_MARKDOWN_FILES} Markdown files; import its folders one by one."
                    )
    if not files:
        raise UsageError(
            f"{root} holds no Markdown (.md) files. Pass a folder of memory files or an export file."
        )
    digest = hashlib.sha256()
    for path, rel in files:
        digest.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        _markdown(path, rel, batch)
    batch.sha256 = digest.hexdigest()


# --- the MCP reference memory server ------------------------------------------------------------


def _mcp_memory(path: Path, lines: list[tuple[int, str]], batch: Batch) -> None:
    entities: dict[str, dict[str, Any]] = {}
    relations: list[tuple[str, str, str]] = []
    for number, text in lines:
        where = f"{path} line {number}"
        try:
            obj = storable.loads(text)
        except ValueError as exc:
            raise UsageError(
                f"{where}: not JSON ({getattr(exc, 'msg', exc)}). Fix or remove the line."
            ) from None
        kind = obj.get("type") if isinstance(obj, dict) else None
        if kind == "entity":
            name, etype, observations = obj.get("name"), obj.get("entityType"), obj.get("observations")
            if not (isinstance(name, str) and name.strip() and isinstance(etype, str)) or not (
                isinstance(observations, list) and all(isinstance(o, str) for o in observations)
            ):
                raise UsageError(
                    f"{where}: an entity needs name, entityType and observations (a list of strings)."
                )
            entry = entities.setdefault(name, {"type": etype, "observations": [], "where": where})
            entry["observations"] += [o for o in observations if o not in entry["observations"]]
        elif kind == "relation":
            ends = (obj.get("from"), obj.get("to"), obj.get("relationType"))
            if not all(isinstance(end, str) and end.strip() for end in ends):
                raise UsageError(f"{where}: a relation needs from, to and relationType (strings).")
            relations.append((str(ends[0]), str(ends[1]), str(ends[2])))
        else:
            raise UsageError(
                f'{where}: "type" must be "entity" or "relation" in a memory.jsonl of the MCP memory server.'
            )
    extra: dict[str, list[str]] = {name: [] for name in entities}
    for src, dst, rtype in relations:
        sentence = f"{src} {rtype} {dst}"
        if src in entities or dst in entities:
            extra[src if src in entities else dst].append(sentence)
            if src in entities and dst in entities:
                batch.relations.append((f"mcp-memory:{src}", f"mcp-memory:{dst}", f"relation:{rtype}"[:200]))
        else:
            source = {"import": "mcp-memory", "relation": [src, rtype, dst]}
            batch.items.append(
                Item(sentence, None, "note", str(path), source=source, identity=f"mcp-memory:{sentence}")
            )
    for name, entry in entities.items():
        body = "\n".join([*entry["observations"], *extra[name]]) or name
        source = {"import": "mcp-memory", "entity": name, "entityType": entry["type"]}
        item = Item(
            body,
            name,
            "note",
            entry["where"],
            _tags([entry["type"]]),
            source=source,
            identity=f"mcp-memory:{name}",
        )
        batch.items.extend(_split(item))


# --- mem0 ------------------------------------------------------------------------------------------

_MEM0_KEEP = ("id", "hash", "user_id", "agent_id", "run_id", "app_id", "created_at", "updated_at")


def _mem0(path: Path, data: Any, batch: Batch) -> None:
    entries = data.get("results") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise UsageError(f'{path}: a mem0 export is a list of memories or {{"results": [...]}}.')
    for index, entry in enumerate(entries, 1):
        where = f"{path} item {index}"
        text = entry.get("memory") if isinstance(entry, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f'{where}: a mem0 memory needs a "memory" string. Fix or remove it.')
        metadata = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
        kind = metadata.get("type") if metadata.get("type") in MEMORY_TYPES else "note"
        source: dict[str, Any] = {"import": "mem0"}
        for name in _MEM0_KEEP:
            if isinstance(entry.get(name), (str, int)) and not isinstance(entry.get(name), bool):
                source["foreign_id" if name == "id" else name] = entry[name]
        if metadata:
            source["metadata"] = metadata
        identity = f"mem0:{entry['id']}" if isinstance(entry.get("id"), str) and entry["id"] else None
        item = Item(
            text.strip(),
            None,
            str(kind),
            where,
            _tags(entry.get("categories") or []),
            source=source,
            identity=identity,
        )
        batch.items.extend(_split(item))


# --- detection -------------------------------------------------------------------------------------


_UNKNOWN = (
    "not a format korg-recall imports. It reads its own export, a folder or file of Markdown memories, "
    "the MCP memory server's memory.jsonl and mem0's JSON export."
)


def _numbered(text: str) -> list[tuple[int, str]]:
    return [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]


def read_source(raw: str) -> Batch:
    """Read and check what an import was given (a file or a folder); nothing is written.

    Raises:
        UsageError: the path does not exist, the format is not recognised, or the content is
            malformed (naming the file and line), or a memory's metadata is nested too deeply
            (naming the file and item).
        ConfigError: a file cannot be read.
    """
    batch = _detect(raw)
    for item in batch.items:
        _storable(item)
    return batch


def _storable(item: Item) -> None:
    """Make ``item`` hold only what both stores can (see :mod:`.storable`): JSON files were
    decoded by :func:`.storable.loads` already, Markdown may still hold a NUL or, in a quoted
    front-matter value, a lone surrogate; metadata deeper than the stores keep is refused and
    metadata longer than a memory is cut."""
    item.body = storable.text(item.body)
    item.title = None if item.title is None else storable.text(item.title)
    item.tags = [storable.text(tag) for tag in item.tags]
    item.scope = None if item.scope is None else storable.text(item.scope)
    item.identity = None if item.identity is None else storable.text(item.identity)

    def refused(reason: str) -> UsageError:
        return UsageError(f"{item.where}: {reason}.")

    for name, value in item.source.items():
        storable.check(value, f"its {name}", refused)
    item.source = storable.fit(storable.loads(storable.dumps(item.source)))


def _detect(raw: str) -> Batch:
    path = Path(os.path.abspath(os.path.expanduser(raw)))
    if not os.path.lexists(path):
        raise UsageError(
            f"{raw} does not exist. Pass an export file, a memory.jsonl, a mem0 JSON file or a folder of Markdown files."
        )
    if path.is_dir():
        batch = Batch("markdown", path, "", 0)
        _markdown_tree(path, batch)
        return batch
    data = _read(path, MAX_FILE_BYTES)
    batch = Batch("", path, hashlib.sha256(data).hexdigest(), len(data))
    text = _text(data, str(path))
    first = text.lstrip()[:1]
    if path.suffix.lower() in (".md", ".markdown") or text.startswith("---"):
        batch.format = "markdown"
        _markdown(path, path.name, batch)
        return batch
    if first not in ("{", "["):
        raise UsageError(f"{path}: {_UNKNOWN}")
    lines = _numbered(text)
    head: Any = None
    if first == "{":
        try:
            head = storable.loads(lines[0][1])
        except ValueError:
            head = None
    if isinstance(head, dict) and "format" in head:
        batch.format, batch.lines = "korg-recall", lines
    elif isinstance(head, dict) and head.get("type") in ("entity", "relation"):
        batch.format = "mcp-memory"
        _mcp_memory(path, lines, batch)
    else:
        try:
            whole = storable.loads(text)
        except ValueError as exc:
            line = getattr(exc, "lineno", None)
            if line is None:  # readable JSON, but nested beyond what a decoder can follow
                raise UsageError(f"{path}: {exc}. Flatten it before importing.") from None
            raise UsageError(f"{path} line {line}: not JSON; {_UNKNOWN}") from None
        if not isinstance(whole, list) and not (isinstance(whole, dict) and "results" in whole):
            raise UsageError(f"{path}: {_UNKNOWN}")
        batch.format = "mem0"
        _mem0(path, whole, batch)
    return batch
