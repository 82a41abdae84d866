"""``--since`` / ``--until`` values and event timestamps, as epoch seconds.

Filters compare numbers, not text: the index stores each event's timestamp
both as ISO text (for people) and as epoch seconds (for ``WHERE ts >= ?``), and
this module is the one place that turns either form into a number. A value
is an ISO-8601 date or date-time (``2026-05-27``, ``2026-05-27T10:00:00Z``,
``…+02:00``; naive values are UTC, the ecosystem's convention), or a duration
back from now: a whole number and a unit, ``s`` ``m`` ``h`` ``d`` ``w``
(``30m``, ``12h``, ``7d``, ``2w``), at most :data:`MAX_DURATION_S` (about 100
years): the values come from people and models, and a 400-digit number must
be a clear usage error, not an overflow deep in a query.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

from korg_bridge.errors import UsageError

__all__ = ["iso_to_epoch", "parse_time"]

_DURATION = re.compile(r"([0-9]+)\s*([smhdw])")
"""ASCII digits: ``\\d`` also matches the digits of other scripts (Arabic-Indic, Devanagari, …)."""
MAX_DURATION_S = 36_525 * 86_400
"""A hundred years back: further than any agent history goes."""
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_time(value: str, *, now: float | None = None, end_of_day: bool = False) -> float:
    """Return ``value`` (ISO-8601 or a duration such as ``7d``) as epoch seconds.

    A duration counts back from ``now`` (default: the current time). A bare
    date means its midnight UTC, or with ``end_of_day`` the last instant of that
    day, so ``--until 2026-05-27`` includes the whole day.

    Raises:
        UsageError: the value is neither a date-time nor a duration.
    """
    text = value.strip()
    match = _DURATION.fullmatch(text.lower())
    if match:
        digits = match.group(1).lstrip("0") or "0"
        # Judged on the digits first: int() of thousands of digits is itself refused by Python.
        amount = int(digits) * _UNIT_SECONDS[match.group(2)] if len(digits) <= 12 else MAX_DURATION_S + 1
        if amount > MAX_DURATION_S:
            shown = value if len(value) <= 24 else value[:21] + "..."
            raise UsageError(
                f"duration {shown!r} is too large: at most {MAX_DURATION_S // 86_400}d (about 100 years). "
                "Use a smaller number, or an ISO-8601 date such as 2020-01-01."
            )
        return (time.time() if now is None else now) - amount
    try:
        moment = datetime.fromisoformat(text) if text.isascii() else None
    except ValueError:
        moment = None
    if moment is None or not text:
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise UsageError(
            f"invalid time {shown!r}: expected an ISO-8601 date-time such as 2026-05-27T10:00:00Z "
            "or a duration such as 30m, 12h, 7d, 2w."
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if end_of_day and _DATE_ONLY.fullmatch(text):
        moment = min(moment + timedelta(days=1, microseconds=-1), datetime.max.replace(tzinfo=UTC))
    return moment.timestamp()


def iso_to_epoch(value: str | None) -> float | None:
    """Return an event's ISO timestamp as epoch seconds, or None when absent or unparseable.

    Called once per indexed event, so it never raises: an odd timestamp only
    means the event escapes ``since``/``until`` filters.
    """
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None
