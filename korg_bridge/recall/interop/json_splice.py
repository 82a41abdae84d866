"""Editing a JSON file as text, so everything not edited stays byte for byte as it was.

``json.loads`` then ``json.dumps`` would reformat a user's whole settings file
(key order survives, but spacing, indentation and escapes do not). Instead,
:func:`parse` finds where each value sits in the text (a small scanner over a
document ``json.loads`` has already accepted), and the edits here insert or cut
text at those places only: a member added to an object, an element appended
to an array, an element or member removed with the comma that joined it. The
inserted JSON follows the file's own indentation (or stays on one line in a
one-line file). Callers check the result parses to the object they meant.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Node", "append_element", "insert_member", "parse", "remove_span"]

_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


@dataclass(slots=True)
class Node:
    """A value and where it sits: ``text[start:end]``. Objects list ``(key, key_start, value)``."""

    kind: str
    start: int
    end: int
    members: list[tuple[str, int, Node]] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def member(self, key: str) -> Node | None:
        for name, _, value in self.members:
            if name == key:
                return value
        return None


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _value(text: str, pos: int) -> Node:
    pos = _skip(text, pos)
    char = text[pos]
    if char == "{":
        node = Node("object", pos, pos)
        pos = _skip(text, pos + 1)
        while text[pos] != "}":
            key_match = _STRING.match(text, pos)
            assert key_match is not None
            key = json.loads(key_match.group(0))
            pos = _skip(text, key_match.end())
            value = _value(text, pos + 1)  # past the colon
            node.members.append((key, key_match.start(), value))
            pos = _skip(text, value.end)
            if text[pos] == ",":
                pos = _skip(text, pos + 1)
        node.end = pos + 1
        return node
    if char == "[":
        node = Node("array", pos, pos)
        pos = _skip(text, pos + 1)
        while text[pos] != "]":
            item = _value(text, pos)
            node.items.append(item)
            pos = _skip(text, item.end)
            if text[pos] == ",":
                pos = _skip(text, pos + 1)
        node.end = pos + 1
        return node
    match = _STRING.match(text, pos) if char == '"' else _SCALAR.match(text, pos)
    assert match is not None
    return Node("scalar", pos, match.end())


def parse(text: str) -> Node:
    """Where every value of ``text`` sits. ``text`` must be JSON that ``json.loads`` accepts."""
    return _value(text, 0)


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    line = text[start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _unit(text: str) -> str:
    """The file's indentation step (two spaces when it has none)."""
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "


def _render(value: Any, indent: str, unit: str, one_line: bool) -> str:
    if one_line:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=unit).replace("\n", "\n" + indent)


def _insert(text: str, node: Node, entries: list[int], piece: str) -> str:
    """Put ``piece`` (already rendered) as the last entry of ``node`` (an object or an array)."""
    one_line = "\n" not in text[node.start : node.end]
    outer = _line_indent(text, node.start)
    inner = outer + _unit(text)
    if entries:
        last = entries[-1]
        glue = ", " if one_line else ",\n" + inner
        return text[:last] + glue + piece + text[last:]
    if one_line:
        return text[: node.start + 1] + piece + text[node.end - 1 :]
    return text[: node.start + 1] + "\n" + inner + piece + "\n" + outer + text[node.end - 1 :]


def insert_member(text: str, node: Node, key: str, value: Any) -> str:
    """``text`` with ``"key": value`` added as the last member of the object ``node``."""
    one_line = "\n" not in text[node.start : node.end]
    inner = _line_indent(text, node.start) + _unit(text)
    piece = json.dumps(key, ensure_ascii=False) + ": " + _render(value, inner, _unit(text), one_line)
    return _insert(text, node, [value_node.end for _, _, value_node in node.members], piece)


def append_element(text: str, node: Node, value: Any) -> str:
    """``text`` with ``value`` appended to the array ``node``."""
    one_line = "\n" not in text[node.start : node.end]
    inner = _line_indent(text, node.start) + _unit(text)
    return _insert(
        text, node, [item.end for item in node.items], _render(value, inner, _unit(text), one_line)
    )


def remove_span(text: str, container: Node, index: int) -> str:
    """``text`` without entry ``index`` of ``container`` (an array element or an object member)
    and the comma that joined it; an emptied container becomes ``[]`` or ``{}``."""
    spans = (
        [(item.start, item.end) for item in container.items]
        if container.kind == "array"
        else [(key_start, value.end) for _, key_start, value in container.members]
    )
    start, end = spans[index]
    if len(spans) == 1:
        return text[: container.start + 1] + text[container.end - 1 :]
    if index + 1 < len(spans):
        return text[:start] + text[spans[index + 1][0] :]
    return text[: spans[index - 1][1]] + text[end:]
