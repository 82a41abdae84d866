"""Arguments some MCP clients send as strings, turned back into what the schema asks for.

Some clients (and some models) send ``"top_n": "2"``, ``"json": "true"`` or
``"ref": "e12"`` where the schema says integer, boolean or array of strings.
Refusing those calls teaches nothing; guessing would be worse. So a value is
changed only where exactly one reading exists, looking at each top-level
property's own schema:

* a string holding a plain decimal literal (``-12``, ``0.5``; no exponent, no
  hex, no spaces, no ``NaN``) where the property's ``type`` is ``integer``
  (an integer literal only) or ``number``;
* ``"true"`` / ``"false"`` where the ``type`` is ``boolean``;
* a lone string where the property is an array whose ``items`` are strings:
  a one-element array.

``null`` may also be allowed; any other type (``string`` above all), or a
schema that combines alternatives (``anyOf``, ``$ref``, ``enum`` …), means
the value is left alone and validation has the last word. The coerced value
is what is validated, audited and put in argv.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,99})")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,99})(?:\.[0-9]{1,100})?")
_UNCLEAR = ("anyOf", "oneOf", "allOf", "not", "if", "$ref", "$dynamicRef", "enum", "const")
"""Keywords that make a property's accepted values more than its ``type`` says."""


def _types(schema: Any) -> set[str] | None:
    """The JSON types a property accepts besides ``null``, or ``None`` when unclear."""
    if not isinstance(schema, Mapping) or any(key in schema for key in _UNCLEAR):
        return None
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return {n for n in names if n != "null"}


def coerce_value(schema: Any, value: Any) -> Any:
    """``value`` as the property's schema reads it unambiguously; otherwise unchanged."""
    if not isinstance(value, str):
        return value
    types = _types(schema)
    if types == {"integer"} and _INTEGER.fullmatch(value):
        return int(value)
    if types in ({"number"}, {"number", "integer"}) and _DECIMAL.fullmatch(value):
        return int(value) if _INTEGER.fullmatch(value) else float(value)
    if types == {"boolean"} and value in ("true", "false"):
        return value == "true"
    if types == {"array"} and _types(schema.get("items")) == {"string"}:
        return [value]
    return value


def coerce_arguments(properties: Mapping[str, Any], arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``arguments`` with each declared property's value coerced where unambiguous."""
    out = dict(arguments or {})
    for name, value in out.items():
        if name in properties:
            out[name] = coerce_value(properties[name], value)
    return out
