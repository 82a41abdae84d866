"""Values both stores can hold: strict JSON, whatever an import file carries.

Python's ``json`` is laxer than the JSON the stores read back. It reads and writes
``NaN`` and ``Infinity``, which SQLite's JSON functions and PostgreSQL's ``jsonb``
refuse, so one imported ``{"score": NaN}`` in a memory's ``source`` made every
later listing, brief, export and import fail ("malformed JSON"), and on a team
store the whole tenant. It also decodes ``"\\ud800"`` to a lone surrogate that no
UTF-8 column can bind, and ``"\\u0000"`` to a NUL that PostgreSQL's text and
``jsonb`` refuse. So every JSON value a store keeps is made strict here, once:

==========================================  =========================================
what a file or a caller may carry           what is stored
==========================================  =========================================
``NaN``, ``Infinity``, ``-Infinity``,       the number's text, as a string (``"NaN"``,
a literal too big for a double (``1e999``)  ``"1e999"``): the value is kept, readably
an integer beyond 64 bits                   its digits, as a string (Python refuses to
                                            read back more than 4,300 of them)
a lone UTF-16 surrogate, a NUL              U+FFFD, as the history index does
                                            (:func:`korg_bridge.recall.history.ingest.rows.bindable`)
nesting deeper than :data:`MAX_DEPTH`       refused where it is read, naming the file
                                            and the item (:func:`check`)
==========================================  =========================================

:func:`dumps` is the one encoder of the stores' JSON columns (``tags``, ``source``,
``provenance``: :meth:`.records.Version.to_row`), so nothing else can store a
non-strict value either; :func:`loads` is the one decoder, of those columns and of
import files, and reads back what an older korg-recall may have stored.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_SOURCE_BYTES",
    "MAX_STORED_DEPTH",
    "check",
    "depth",
    "dumps",
    "fit",
    "loads",
    "text",
]

MAX_DEPTH = 32
"""Levels of nesting a stored JSON value may have. Far above any metadata (mem0's is flat), far
below what breaks a reader: Python's JSON codec recurses once per level (the interpreter stops at
about 1,000, minus the depth of the caller), SQLite's JSON functions stop at 1,000."""
MAX_STORED_DEPTH = MAX_DEPTH + 3
"""Levels a stored column may nest: a provenance entry (a list of objects) holds a ``source`` that
holds the metadata an import kept. An export's columns are checked against this."""
MAX_SOURCE_BYTES = 8 * 1024
"""A foreign memory's metadata kept in its ``source`` (and once more in its provenance) is cut to
this, as a body is: it says where a memory came from, it is not the memory."""

_INT64 = 2**63
_DIGITS_MAX = 19
"""Digits of the longest integer that can fit 64 bits: longer ones are not converted at all (the
conversion itself is quadratic in the number of digits)."""
_FIX = re.compile("[\x00\ud800-\udfff]")
_ESCAPES = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
"""In JSON text, the escapes that decode to a NUL or a surrogate: without one, no string of the
decoded value needs repair (a UTF-8 text holds no surrogate, and a raw NUL is not valid JSON)."""
_BIG_INT = re.compile(r"[:\[,]\s*-?[0-9]{19}")
"""An integer of 19 digits or more where JSON puts a value inside an object or array (after ``:``,
``[`` or ``,``): one that may not fit 64 bits. Inside a string it is rare and costs only a repair
pass that changes nothing."""


def text(value: str) -> str:
    """``value`` with lone surrogates and NULs replaced by U+FFFD (both stores can bind it).

    The history index's :func:`~korg_bridge.recall.history.ingest.rows.bindable` does the first half; it is not
    imported here, where every memory call's cold start would pay for the index's modules.
    """
    if value.isascii() and "\x00" not in value:
        return value
    return _FIX.sub("\ufffd", value)


def _number(raw: str) -> float | str:
    number = float(raw)
    return number if math.isfinite(number) else raw


def _non_finite(number: float) -> str:
    """The JSON text a non-finite number is written as by Python (what the file held)."""
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


def _integer(raw: str) -> int | str:
    if len(raw.lstrip("-")) > _DIGITS_MAX:
        return raw
    number = int(raw)
    return number if -_INT64 <= number < _INT64 else raw


_DECODER = json.JSONDecoder(parse_constant=str, parse_float=_number, parse_int=_integer)


def _repair(value: Any) -> Any:
    """``value`` with every string (keys included) :func:`text`, and every number one a store can
    read back; iterative, so a value nested as deep as a decoder allows does not recurse."""
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, slot, item = stack.pop()
        if isinstance(item, str):
            parent[slot] = text(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            parent[slot] = item if math.isfinite(item) else _non_finite(item)
        elif isinstance(item, int):
            parent[slot] = item if -_INT64 <= item < _INT64 else str(item)
        elif isinstance(item, dict):
            fresh: dict[str, Any] = {text(str(key)): entry for key, entry in item.items()}
            parent[slot] = fresh
            stack.extend((fresh, key, entry) for key, entry in fresh.items())
        elif isinstance(item, list | tuple):
            items = list(item)
            parent[slot] = items
            stack.extend((items, index, entry) for index, entry in enumerate(items))
        else:  # not JSON at all (a set, an object): its text, rather than a failed write
            parent[slot] = text(str(item))
    return root[0]


def loads(raw: str) -> Any:
    """Decode JSON text into values :func:`dumps` stores unchanged (see the module docstring).

    Raises:
        ValueError: not JSON (a :class:`json.JSONDecodeError`, with ``msg`` and ``lineno``), or
            nested too deeply for the decoder.
    """
    try:
        value = _DECODER.decode(raw)
    except RecursionError:
        raise ValueError(f"nested too deeply to read (more than {MAX_DEPTH} levels are refused)") from None
    return _repair(value) if _ESCAPES.search(raw) else value


def depth(value: Any) -> int:
    """How many levels of objects and arrays ``value`` nests (0 for a scalar); iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            stack.extend((entry, level + 1) for entry in item.values())
        elif isinstance(item, list):
            stack.extend((entry, level + 1) for entry in item)
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
    return deepest


def check(value: Any, what: str, fail: Callable[[str], Exception], limit: int = MAX_DEPTH) -> Any:
    """``value`` when it nests at most ``limit`` levels.

    Raises:
        Exception: ``fail(reason)`` -- the caller's error, naming the file and the item.
    """
    levels = depth(value)
    if levels > limit:
        raise fail(
            f"{what} is nested {levels} levels deep; korg-recall keeps at most {limit}. "
            "Flatten it, or leave it out"
        )
    return value


def fit(value: Any, limit: int = MAX_SOURCE_BYTES) -> Any:
    """``value``, or a copy whose long strings are cut (each with a marker saying how much was
    dropped) so that its JSON takes at most about ``limit`` bytes."""
    from korg_bridge.recall.history.ingest.rows import dump_json

    encoded = dumps(value)
    if len(encoded.encode("utf-8")) <= limit:
        return value
    return loads(dump_json(json.loads(encoded), limit) or "null")


def dumps(value: Any) -> str:
    """``value`` as strict JSON text (keys sorted, UTF-8 kept), repaired where needed."""
    try:
        encoded = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except ValueError:  # a non-finite number
        return json.dumps(_repair(value), ensure_ascii=False, sort_keys=True, allow_nan=False)
    if "\\u0000" in encoded or _BIG_INT.search(encoded) or _big_scalar(encoded) or not _encodable(encoded):
        return json.dumps(_repair(value), ensure_ascii=False, sort_keys=True, allow_nan=False)
    return encoded


def _big_scalar(encoded: str) -> bool:
    """A bare integer of 19 digits or more (the whole value is one)."""
    return encoded[:1] in "-0123456789" and len(encoded) >= 19 and encoded.lstrip("-").isdigit()


def _encodable(encoded: str) -> bool:
    if encoded.isascii():
        return True
    return _FIX.search(encoded) is None
