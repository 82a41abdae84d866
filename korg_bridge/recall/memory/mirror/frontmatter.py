"""Mirror files as text: the YAML front matter korg-recall writes, and reading it back.

Only the subset of YAML these files need -- ``key: value`` lines with plain or quoted
scalars, flow (``[a, b]``) or block (``- a``) lists, and a key holding an indented block
of such lines (Claude Code's ``metadata:`` with ``node_type``, ``type``, ``modified``) --
so korg-recall needs no YAML library on its cold path. Values are written plain only when
that reads back as the same string; anything else is JSON-quoted (a JSON string is a YAML
double-quoted scalar). :func:`set_values` changes a few values of a file someone else
wrote and keeps every other byte of it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from korg_bridge.errors import FrontMatterError
from korg_bridge.recall.memory.records import Version
from korg_bridge.recall.memory.scopes import mirror_dir_of

__all__ = [
    "FrontMatterError",
    "Parsed",
    "declared_type",
    "file_name",
    "parse",
    "rel_path",
    "render",
    "set_values",
]

_SLUG = re.compile(r"[^a-z0-9]+")
_PLAIN = re.compile(r"^[A-Za-z0-9_./@+-][A-Za-z0-9 _./@+()-]*$")
_NUMERIC = re.compile(r"^[-+]?(?:\d[\d_]*)?\.?\d*(?:[eE][-+]?\d+)?$")
_SPECIAL = frozenset({"true", "false", "null", "yes", "no", "on", "off", "~"})
_KEY_LINE = re.compile(r"^([A-Za-z_][\w-]*)\s*:(?:\s+(.*))?$")
_LIST_ITEM = re.compile(r"^\s*-\s+(.*)$")
_KEY_PREFIX = re.compile(r"^[ ]*[A-Za-z_][\w-]*\s*:")
MAX_DEPTH = 4
"""Blocks nested deeper than this are refused (Claude Code nests one level)."""
_FLOW_ITEM = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|[^,]*)\s*(?:,|$)')


def _scalar(value: object) -> str:
    """A YAML scalar: plain when that reads back as the same string, else JSON-quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = _PLAIN.match(text) is not None and text == text.strip() and text.lower() not in _SPECIAL
    if plain and not _NUMERIC.match(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def render(version: Version) -> str:
    """The mirror file of ``version``: front matter, then the body."""
    updated = version.recorded_at[:19] + "Z" if len(version.recorded_at) >= 19 else version.recorded_at
    lines = [
        "---",
        f"id: {version.id}",
        f"type: {version.type}",
        f"scope: {_scalar(version.scope)}",
        f"version: {version.version}",
        "tags: [" + ", ".join(_scalar(tag) for tag in version.tags) + "]",
        f"updated: {updated}",
        f"title: {_scalar(version.title)}",
    ]
    if version.pinned:
        lines.append("pinned: true")
    return "\n".join(lines) + "\n---\n" + version.body.rstrip("\n") + "\n"


def file_name(version: Version) -> str:
    """``<type>_<slug>--<id>.md``, the slug from the title (ASCII, at most 48 characters)."""
    slug = _SLUG.sub("-", version.title.lower()).strip("-")[:48].strip("-") or "memory"
    return f"{version.type}_{slug}--{version.id}.md"


def rel_path(version: Version) -> str:
    """The file's path relative to the mirror folder."""
    return f"{mirror_dir_of(version.scope)}/{file_name(version)}"


@dataclass(slots=True)
class Parsed:
    """A mirror file read back: its front matter (``{}`` without one) and its body."""

    meta: dict[str, Any]
    body: str
    has_front_matter: bool
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)
    """The line (0: the opening ``---``) of each key, by its path (``("metadata", "type")``)."""
    closing: int = 0
    """The line of the closing ``---`` (0 without front matter)."""


def declared_type(meta: dict[str, Any]) -> Any:
    """The ``type`` a file declares: Claude Code's ``metadata.type`` (its current shape), else
    the flat ``type`` (its older shape and korg-recall's mirror)."""
    nested = meta.get("metadata")
    if isinstance(nested, dict) and nested.get("type") is not None:
        return nested["type"]
    return meta.get("type")


def _value(raw: str) -> Any:
    text = raw.strip()
    if not text:
        return None
    if text.startswith("["):
        if not text.endswith("]"):
            raise FrontMatterError(f"unclosed list {text[:40]!r}")
        inner = text[1:-1].strip()
        items: list[Any] = []
        pos = 0
        while pos < len(inner):
            match = _FLOW_ITEM.match(inner, pos)
            if match is None or match.end() == pos:
                raise FrontMatterError(f"unreadable list {text[:40]!r}")
            if match.group(1).strip():
                items.append(_value(match.group(1)))
            pos = match.end()
        return items
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            raise FrontMatterError(f"unreadable quoted value {text[:40]!r}") from None
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise FrontMatterError(f"unclosed quoted value {text[:40]!r}")
        return text[1:-1].replace("''", "'")
    if " #" in text:
        text = text[: text.index(" #")].rstrip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _block(
    entries: list[tuple[int, str]],
    pos: int,
    indent: int,
    path: tuple[str, ...],
    lines: dict[tuple[str, ...], int],
) -> tuple[dict[str, Any], int]:
    """The mapping whose keys sit at ``indent`` spaces from ``entries[pos]`` on, and where it ends.

    Raises:
        FrontMatterError: a line that is none of ``key: value``, ``- item``, or a nested block.
    """
    meta: dict[str, Any] = {}
    last_key: str | None = None
    while pos < len(entries):
        number, line = entries[pos]
        width = len(line) - len(line.lstrip(" "))
        item = _LIST_ITEM.match(line)
        if item and last_key is not None and (meta[last_key] is None or isinstance(meta[last_key], list)):
            if width < indent:
                break
            meta[last_key] = [*(meta[last_key] or []), _value(item.group(1))]
            pos += 1
            continue
        if width < indent:
            break
        if (
            width > indent
            and last_key is not None
            and meta[last_key] is None
            and _KEY_LINE.match(line[width:])
        ):
            if len(path) + 1 >= MAX_DEPTH:
                raise FrontMatterError(f"line {number + 2} is nested deeper than {MAX_DEPTH} levels")
            meta[last_key], pos = _block(entries, pos, width, (*path, last_key), lines)
            continue
        match = _KEY_LINE.match(line[indent:]) if width == indent else None
        if match is None:
            raise FrontMatterError(f"line {number + 2} is not 'key: value': {line[:40]!r}")
        last_key = match.group(1)
        meta[last_key] = _value(match.group(2) or "")
        lines[(*path, last_key)] = number + 1
        pos += 1
    return meta, pos


def parse(text: str) -> Parsed:
    """Read a mirror file: ``---`` front matter of ``key: value`` lines (flow or block lists,
    quoted or plain scalars, a key holding an indented block of those -- the subset of YAML
    these files use), then the body. The body may start right after the closing ``---``.

    Raises:
        FrontMatterError: the front matter is not closed or a line cannot be read.
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return Parsed({}, text.strip("\n"), False)
    lines = text[4:].split("\n")
    entries: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        if line.strip() in ("---", "..."):
            found: dict[tuple[str, ...], int] = {}
            meta, _ = _block(entries, 0, 0, (), found)
            body = "\n".join(lines[number + 1 :])
            return Parsed(meta, body.strip("\n"), True, found, number + 1)
        if line.strip() and not line.lstrip().startswith("#"):
            entries.append((number, line))
    raise FrontMatterError("the front matter has no closing '---' line")


def set_values(text: str, values: dict[tuple[str, ...], str], body: str) -> str | None:
    """``text`` (a file with front matter) with the scalar at each key path set to its rendered
    value and the body replaced; every other byte as it was (line ends, BOM, unknown keys, the
    blank lines after the closing ``---``). A missing key is added to its block (a top-level one
    before the closing line). None when a value to set is a list or a block, or a missing key's
    block is absent: such a file is not edited.

    Raises:
        FrontMatterError: ``text`` does not parse.
    """
    parsed = parse(text)
    if not parsed.has_front_matter:
        return None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    crlf = "\r\n" in text
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    after = lines[parsed.closing + 1 :]
    blank = 0
    while blank < len(after) and not after[blank].strip() and any(rest.strip() for rest in after[blank:]):
        blank += 1
    head = lines[: parsed.closing]
    inserts: list[tuple[int, str]] = []
    for path, rendered in values.items():
        at = parsed.lines.get(path)
        if at is not None:
            current: Any = parsed.meta
            for key in path:
                current = current[key]
            prefix = _KEY_PREFIX.match(head[at])
            if isinstance(current, list | dict) or prefix is None:
                return None
            head[at] = f"{prefix.group(0)} {rendered}"
            continue
        parent = path[:-1]
        if not parent:
            inserts.append((parsed.closing, f"{path[-1]}: {rendered}"))
            continue
        siblings = [line for key, line in parsed.lines.items() if key[:-1] == parent]
        if not siblings:
            return None
        last = max(siblings)
        indent = head[last][: len(head[last]) - len(head[last].lstrip(" "))]
        inserts.append((last + 1, f"{indent}{path[-1]}: {rendered}"))
    for at, line in sorted(inserts, key=lambda insert: insert[0], reverse=True):
        head.insert(at, line)
    out = "\n".join([*head, lines[parsed.closing], *[""] * blank, body.rstrip("\n"), ""])
    return bom + (out.replace("\n", "\r\n") if crlf else out)
