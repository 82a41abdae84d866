"""Mirror files as text: the YAML front matter korg-recall writes, and reading it back.

Only the subset of YAML these files need -- ``key: value`` lines with plain or quoted
scalars, flow (``[a, b]``) or block (``- a``) lists -- so korg-recall needs no YAML
library on its cold path. Values are written plain only when that reads back as the
same string; anything else is JSON-quoted (a JSON string is a YAML double-quoted scalar).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from korg_bridge.recall.memory.records import Version
from korg_bridge.recall.memory.scopes import mirror_dir_of

__all__ = ["FrontMatterError", "Parsed", "file_name", "parse", "rel_path", "render"]

_SLUG = re.compile(r"[^a-z0-9]+")
_PLAIN = re.compile(r"^[A-Za-z0-9_./@+-][A-Za-z0-9 _./@+()-]*$")
_NUMERIC = re.compile(r"^[-+]?(?:\d[\d_]*)?\.?\d*(?:[eE][-+]?\d+)?$")
_SPECIAL = frozenset({"true", "false", "null", "yes", "no", "on", "off", "~"})
_KEY_LINE = re.compile(r"^([A-Za-z_][\w-]*)\s*:(?:\s+(.*))?$")
_LIST_ITEM = re.compile(r"^\s*-\s+(.*)$")
_FLOW_ITEM = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|[^,]*)\s*(?:,|$)')


class FrontMatterError(ValueError):
    """A mirror file whose front matter cannot be read; it is reported, never touched."""


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


def parse(text: str) -> Parsed:
    """Read a mirror file: ``---`` front matter of ``key: value`` lines (flow or block lists,
    quoted or plain scalars -- the subset of YAML these files use), then the body.

    Raises:
        FrontMatterError: the front matter is not closed or a line cannot be read.
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return Parsed({}, text.strip("\n"), False)
    lines = text[4:].split("\n")
    meta: dict[str, Any] = {}
    last_key: str | None = None
    for number, line in enumerate(lines):
        if line.strip() in ("---", "..."):
            body = "\n".join(lines[number + 1 :])
            return Parsed(meta, body.strip("\n"), True)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = _LIST_ITEM.match(line)
        if item and last_key is not None and (meta[last_key] is None or isinstance(meta[last_key], list)):
            meta[last_key] = [*(meta[last_key] or []), _value(item.group(1))]
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            raise FrontMatterError(f"line {number + 2} is not 'key: value': {line[:40]!r}")
        last_key = match.group(1)
        meta[last_key] = _value(match.group(2) or "")
    raise FrontMatterError("the front matter has no closing '---' line")
