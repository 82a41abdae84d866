"""A small JSON Schema checker for toolkit binaries' own arguments, speaking in flags.

Why not ``jsonschema``: importing it costs a toolkit binary ~130 ms on every
cold start, and korg-recall runs as a fresh process per tool call. The
bridge already validates with ``jsonschema`` before running anything; this
is the binary's own second line, covering the keywords CLI schemas use:
``type``, ``enum``, ``const``, ``minimum``/``maximum`` (and exclusive),
``minLength``/``maxLength``, ``pattern``, ``items``, ``minItems``/``maxItems``,
``properties``, ``required``, ``additionalProperties: false``.

A person reads these messages at a terminal, so they are CLI advice in flag
terms (``--query is required``, ``--top-n must be at least 1, got 0``), values
are shown as JSON (``null``, ``"x"``), never as Python reprs, and every
violation is returned, not just the first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["allows_array", "check_arguments", "check_value", "flag_name", "primary_type", "show"]

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "a JSON object",
    "null": "null",
}

_SHOWN_CHARS = 60
"""Longest value quoted back in a message; a message stays one readable line."""


def flag_name(prop: str) -> str:
    """The command-line flag of a schema property: ``top_n`` → ``--top-n``."""
    return "--" + prop.replace("_", "-")


def show(value: Any) -> str:
    """``value`` as a user typed it in JSON (``"x"``, ``null``, ``[1, 2]``), cut to one short line."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = str(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def primary_type(schema: Mapping[str, Any]) -> str | None:
    """The one JSON type a flag's value is read as: the first that is not ``null``."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        return kinds[0] if kinds else None
    return kind if isinstance(kind, str) else None


def allows_array(schema: Mapping[str, Any]) -> bool:
    """Whether a property may be a list, so its flag may repeat (as the bridge sends a list)."""
    kind = schema.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else show(value)


def check_arguments(
    schema: Mapping[str, Any], args: Mapping[str, Any], *, skip: Collection[str] = ()
) -> list[str]:
    """Every violation of an object ``schema`` by parsed command-line ``args``, named by flag.

    ``skip`` holds properties whose flag was given but could not be
    converted; they were already reported, so they are not "required" too.
    """
    problems: list[str] = []
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in args and name not in skip:
            problems.append(f"{flag_name(str(name))} is required")
    for name, value in args.items():
        sub = props.get(name)
        if isinstance(sub, dict):
            problems.extend(check_value(sub, value, flag_name(name)))
        elif name not in props and schema.get("additionalProperties") is False:
            problems.append(f"unknown option {flag_name(name)}")
    return problems


def check_value(schema: Mapping[str, Any], value: Any, path: str = "the value") -> list[str]:
    """Every violation of ``schema`` by ``value``, each a sentence that starts with ``path``."""
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPES.get(k, lambda v: True)(value) for k in kinds):
            expected = " or ".join(_TYPE_WORDS.get(k, str(k)) for k in kinds)
            return [f"{path} must be {expected}, got {show(value)}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(_plain(choice) for choice in schema["enum"])
        problems.append(f"{path} must be one of {choices}, got {show(value)}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path} must be {show(schema['const'])}, got {show(value)}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        problems.extend(_check_number(schema, value, path))
    if isinstance(value, str):
        problems.extend(_check_string(schema, value, path))
    if isinstance(value, list):
        problems.extend(_check_array(schema, value, path))
    if isinstance(value, dict):
        problems.extend(_check_object(schema, value, path))
    return problems


def _check_number(schema: Mapping[str, Any], value: float, path: str) -> list[str]:
    out = []
    got = show(value)
    if "minimum" in schema and value < schema["minimum"]:
        out.append(f"{path} must be at least {show(schema['minimum'])}, got {got}")
    if "maximum" in schema and value > schema["maximum"]:
        out.append(f"{path} must be at most {show(schema['maximum'])}, got {got}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        out.append(f"{path} must be greater than {show(schema['exclusiveMinimum'])}, got {got}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        out.append(f"{path} must be less than {show(schema['exclusiveMaximum'])}, got {got}")
    return out


def _check_string(schema: Mapping[str, Any], value: str, path: str) -> list[str]:
    out = []
    if "minLength" in schema and len(value) < schema["minLength"]:
        out.append(f"{path} must be at least {schema['minLength']} character(s) long, got {show(value)}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(
            f"{path} is {len(value)} characters long; it may be at most {schema['maxLength']} characters"
        )
    if "pattern" in schema and not re.search(schema["pattern"], value):
        out.append(f"{path} must match the pattern {schema['pattern']}, got {show(value)}")
    return out


def _check_array(schema: Mapping[str, Any], value: list[Any], path: str) -> list[str]:
    out = []
    if "minItems" in schema and len(value) < schema["minItems"]:
        out.append(f"{path} needs at least {schema['minItems']} value(s), got {len(value)}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(f"{path} takes at most {schema['maxItems']} value(s), got {len(value)}")
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            out.extend(check_value(items, item, f"{path}[{i}]"))
    return out


def _check_object(schema: Mapping[str, Any], value: dict[str, Any], path: str) -> list[str]:
    out = []
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            out.append(f'{path} needs the key "{name}"')
    for name, sub in value.items():
        if name in props and isinstance(props[name], dict):
            out.extend(check_value(props[name], sub, f"{path}.{name}"))
        elif name not in props and schema.get("additionalProperties") is False:
            allowed = ", ".join(props) or "none"
            out.append(f'{path} has an unknown key "{name}" (allowed: {allowed})')
    return out
