"""Schema violations as advice an agent (or a person) can act on.

jsonschema words its messages for the schema's author: ``$.query: 'query' is
a required property``, ``$.top_n: None is not of type 'integer'`` - Python
reprs, JSON paths, the keyword's name. The caller of a tool needs the fix
instead: ``query is required``, ``top_n must be an integer, got null``. So
each violation is re-worded from its keyword and values: paths as
``config.depth`` or ``tags[1]``, values as JSON (``true``, ``null``,
``"text"``), long values cut. Arguments the schema does not declare are
reported in the same message, so one reply lists everything to fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from jsonschema.exceptions import ValidationError, best_match, relevance

from korg_bridge.bridge.validation import dotted

MAX_REPORTED = 20
"""Problems listed in one message; the rest are counted."""

MAX_VALUE = 40
"""Characters of a value quoted in a message."""

MAX_CHOICES = 6
"""Allowed values (``enum``) or known argument names listed before "…"."""

_ARTICLE = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def render(value: Any, limit: int = MAX_VALUE) -> str:
    """A value as JSON, cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _listed(values: Sequence[Any], limit: int = MAX_CHOICES, *, as_json: bool = True) -> str:
    shown = [render(v) if as_json else str(v) for v in values[:limit]]
    return ", ".join(shown) + ("…" if len(values) > limit else "")


def _type_phrase(expected: Any) -> str:
    names = expected if isinstance(expected, list) else [expected]
    return " or ".join(_ARTICLE.get(str(n), str(n)) for n in names)


def _length(value: Any) -> str:
    return f"{len(value)}" if isinstance(value, str | list | dict) else render(value)


def describe(error: ValidationError) -> list[str]:
    """One or more phrases for one violation (``required`` names every missing property)."""
    where = dotted(error.absolute_path)
    kind, got = error.validator, render(error.instance)
    expected: Any = error.validator_value
    if kind == "required":
        missing = [n for n in expected if isinstance(error.instance, dict) and n not in error.instance]
        prefix = "" if where == "arguments" else f"{where}."
        return [f"{prefix}{name} is required" for name in missing] or [f"{where}: {error.message}"]
    simple = {
        "type": f"must be {_type_phrase(expected)}",
        "const": f"must be {render(expected)}",
        "minimum": f"must be at least {render(expected)}",
        "maximum": f"must be at most {render(expected)}",
        "exclusiveMinimum": f"must be greater than {render(expected)}",
        "exclusiveMaximum": f"must be less than {render(expected)}",
        "multipleOf": f"must be a multiple of {render(expected)}",
        "pattern": f"must match the pattern {render(expected, 80)}",
        "format": f"must be a valid {expected}",
    }
    if kind == "enum" and isinstance(expected, list):
        return [f"{where} must be one of {_listed(expected)}, got {got}"]
    if kind in simple:
        return [f"{where} {simple[kind]}, got {got}"]
    counted = {
        "minLength": ("at least", "character"),
        "maxLength": ("at most", "character"),
        "minItems": ("at least", "item"),
        "maxItems": ("at most", "item"),
        "minProperties": ("at least", "key"),
        "maxProperties": ("at most", "key"),
    }
    if kind in counted:
        bound, unit = counted[kind]
        plural = "" if expected == 1 else "s"
        return [f"{where} must have {bound} {expected} {unit}{plural}, got {_length(error.instance)}"]
    if kind == "uniqueItems":
        return [f"{where} must not repeat items"]
    if kind in ("anyOf", "oneOf"):
        if kind == "oneOf" and "is valid under each of" in error.message:
            return [f"{where} matches more than one of the allowed forms; make it match exactly one"]
        closest = best_match(error.context or ())
        hint = f" (closest: {describe(closest)[0]})" if closest is not None else ""
        return [f"{where} does not match any of the allowed forms{hint}"]
    if kind == "not":
        return [f"{where} must not be {got}"]
    if kind is None:  # a `false` subschema; jsonschema does not record its path
        return [
            f"{got} is not allowed here" if where == "arguments" else f"{where} is not allowed, got {got}"
        ]
    return [f"{where}: {error.message}"]


def unknown_arguments(names: Iterable[str], known: Sequence[str]) -> str:
    """``unknown argument "foo" (known: query, top_n, …)``."""
    listed = sorted(names)
    noun = "argument" if len(listed) == 1 else "arguments"
    known_text = _listed(list(known), 8, as_json=False) if known else "none"
    return f"unknown {noun} {', '.join(render(n) for n in listed)} (known: {known_text})"


def report(errors: Sequence[ValidationError], unknown: Iterable[str], known: Sequence[str]) -> list[str]:
    """Every problem as a phrase, the clearest violation first, unknown arguments last.

    The schema's own complaint about undeclared top-level properties
    (``additionalProperties: false``) is left out when the unknown arguments
    are listed anyway.
    """
    unknown = list(unknown)
    # best_match would dig into an anyOf's alternatives; the top-level error itself leads.
    first = max(errors, key=relevance) if errors else None
    ordered = [first, *(e for e in errors if e is not first)] if first is not None else []
    phrases: list[str] = []
    for error in ordered:
        if unknown and not error.absolute_path and error.validator in _UNDECLARED:
            continue
        for phrase in describe(error):
            if phrase not in phrases:
                phrases.append(phrase)
    if unknown:
        phrases.append(unknown_arguments(unknown, known))
    return phrases


_UNDECLARED = ("additionalProperties", "unevaluatedProperties")


def summary(phrases: Sequence[str]) -> str:
    """The phrases joined into one line, at most :data:`MAX_REPORTED` of them."""
    shown = list(phrases[:MAX_REPORTED])
    more = len(phrases) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
