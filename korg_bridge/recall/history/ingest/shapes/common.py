"""What every shape parser needs: where a line is, canonical timestamps, and small field readers.

Timestamps matter most: sorting and ``--since`` filters compare them as text,
which only works when every shape writes them the same way, so every parser
passes what it finds through :func:`normalize_timestamp`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import PurePath
from typing import Any, NamedTuple, TypeGuard

__all__ = [
    "MAP",
    "State",
    "Where",
    "blocks_text",
    "is_int",
    "normalize_timestamp",
    "record_session",
    "stem",
    "text_of",
]

MAP = (dict, Mapping)
"""``isinstance`` against a Mapping ABC costs ~200 ns; parsed JSON is a dict, matched first."""

State = dict[str, Any]
"""What a parser remembers from earlier lines of the same file (a Codex rollout names its
session and working directory once, at the top). Small, JSON-serializable, and stored with the
file's offset, so a read resuming mid-file starts from what the lines before it said."""


class Where(NamedTuple):
    """Where a line is: the file's absolute path, the byte offset of its start, its 1-based number."""

    source: str
    offset: int
    line_no: int


_EPOCH_MS_THRESHOLD = 100_000_000_000
"""Numbers above this are epoch milliseconds: as seconds they would be past the year 5000."""

_LONG_FRACTION = re.compile(r"(\.\d{6})\d+")
"""Nanosecond timestamps (Rust, Go) have more digits than datetime can hold."""

_UTC_FORM = re.compile(r"([1-9]\d{3}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(?:Z|[+-]00:00)?")
"""An ISO date-time already in UTC (or naive, hence UTC): canonical once the fraction is fixed."""


def normalize_timestamp(value: Any) -> str | None:
    """Return ``value`` as UTC ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``, or as found if unparseable.

    ISO-8601 strings are converted (naive ones are taken as UTC, the
    ecosystem's convention); numbers are epoch seconds, or milliseconds when
    very large. A string that does not parse is kept verbatim rather than
    lost; anything else is None.

    Called once per indexed line, so the forms writers actually use (UTC with
    ``Z``, ``+00:00`` or no offset) are rewritten as text; only other offsets
    go through ``astimezone``.
    """
    if isinstance(value, str):
        match = _UTC_FORM.fullmatch(value)
        if match is not None:
            return _utc_text(value, match)
        return _parse_text(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) > _EPOCH_MS_THRESHOLD else value
        try:
            return _format(datetime.fromtimestamp(seconds, UTC))
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _utc_text(value: str, match: re.Match[str]) -> str:
    """A UTC (or naive) ISO string, canonicalized by text operations once it is known to parse."""
    whole, fraction = match.groups()
    if value[-1] == "Z" and (fraction is None or (len(fraction) == 6 and fraction != "000000")):
        return value  # already canonical: parsing it could only give it back, or keep it as found
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return value
    if fraction is None or not fraction.strip("0"):
        return whole + "Z"
    return f"{whole}.{fraction.ljust(6, '0')}Z"


def _parse_text(value: str) -> str:
    text = _LONG_FRACTION.sub(r"\1", value.strip()) if "." in value else value.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _format(moment.astimezone(UTC))


def _format(moment: datetime) -> str:
    fraction = f".{moment.microsecond:06d}" if moment.microsecond else ""
    if moment.year < 1000:  # strftime does not pad such years; keep its rendering
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
    return (
        f"{moment.year}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{fraction}Z"
    )


def is_int(value: object) -> TypeGuard[int]:
    """True for an int that is not a bool (JSON ``true`` must not read as 1)."""
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def text_of(value: Any) -> str | None:
    """``value`` when it is a string with something in it, else None."""
    return value if isinstance(value, str) and value.strip() else None


@lru_cache(maxsize=256)
def stem(source: str) -> str:
    """The file's stem, the session of lines that name none; every line of a file asks."""
    return PurePath(source).stem


def record_session(*records: Mapping[str, Any]) -> str | None:
    """The first ``session_id``/``sessionId`` string among ``records``, or None."""
    for record in records:
        value = record.get("session_id")
        if isinstance(value, str) and value:
            return value
        value = record.get("sessionId")
        if isinstance(value, str) and value:
            return value
    return None


def blocks_text(content: Any) -> str:
    """Flatten message or result content (a string or a list of blocks) to text.

    Text blocks (``text``, Codex's ``input_text``/``output_text``) give their
    text; other blocks are shown as ``[<type>]`` (an image stays visible as
    ``[image]`` without its base64).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, MAP):
            text = block.get("text")
            if isinstance(text, str) and block.get("type") in ("text", "input_text", "output_text"):
                parts.append(text)
            else:
                parts.append(f"[{block.get('type', 'block')}]")
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)
