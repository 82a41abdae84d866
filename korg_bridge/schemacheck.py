"""A small JSON Schema checker for toolkit binaries' own arguments.

Why not ``jsonschema``: importing it costs a toolkit binary ~130 ms on every
cold start, and korg-recall runs as a fresh process per tool call. The
bridge already validates with ``jsonschema`` before running anything; this
is the binary's own second line, covering the keywords CLI schemas use:
``type``, ``enum``, ``const``, ``minimum``/``maximum`` (and exclusive),
``minLength``/``maxLength``, ``pattern``, ``items``, ``minItems``/``maxItems``,
``properties``, ``required``, ``additionalProperties: false``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, Any] = {
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


def check_value(schema: Mapping[str, Any], value: Any, path: str = "$") -> list[str]:
    """Every violation of ``schema`` by ``value``, each prefixed with its JSON path."""
    problems: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPES.get(k, lambda v: True)(value) for k in kinds):
            return [f"{path}: {value!r} is not of type {' or '.join(map(repr, kinds))}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: {value!r} must be {schema['const']!r}")
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
    if "minimum" in schema and value < schema["minimum"]:
        out.append(f"{path}: {value!r} is less than the minimum of {schema['minimum']!r}")
    if "maximum" in schema and value > schema["maximum"]:
        out.append(f"{path}: {value!r} is greater than the maximum of {schema['maximum']!r}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        out.append(f"{path}: {value!r} must be greater than {schema['exclusiveMinimum']!r}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        out.append(f"{path}: {value!r} must be less than {schema['exclusiveMaximum']!r}")
    return out


def _check_string(schema: Mapping[str, Any], value: str, path: str) -> list[str]:
    out = []
    if "minLength" in schema and len(value) < schema["minLength"]:
        out.append(f"{path}: {value!r} is shorter than {schema['minLength']} characters")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        out.append(f"{path}: string is longer than {schema['maxLength']} characters")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        out.append(f"{path}: {value!r} does not match {schema['pattern']!r}")
    return out


def _check_array(schema: Mapping[str, Any], value: list[Any], path: str) -> list[str]:
    out = []
    if "minItems" in schema and len(value) < schema["minItems"]:
        out.append(f"{path}: needs at least {schema['minItems']} item(s)")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        out.append(f"{path}: takes at most {schema['maxItems']} item(s)")
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
            out.append(f"{path}: {name!r} is a required property")
    for name, sub in value.items():
        if name in props and isinstance(props[name], dict):
            out.extend(check_value(props[name], sub, f"{path}.{name}"))
        elif name not in props and schema.get("additionalProperties") is False:
            out.append(f"{path}: unexpected property {name!r}")
    return out
