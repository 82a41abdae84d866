"""``--since``/``--until`` values and stored timestamps become epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from korg_bridge.errors import UsageError
from korg_bridge.recall.history.query.timeparse import iso_to_epoch, parse_time

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7d", 7 * 86_400),
        ("12h", 12 * 3600),
        ("30m", 30 * 60),
        ("2w", 14 * 86_400),
        ("45s", 45),
        ("1D", 86_400),
    ],
)
def test_duration_counts_back_from_now(value: str, seconds: int) -> None:
    assert parse_time(value, now=NOW) == NOW - seconds


def test_iso_with_z_is_utc() -> None:
    expected = datetime(2026, 5, 27, 10, 0, tzinfo=UTC).timestamp()
    assert parse_time("2026-05-27T10:00:00Z") == expected


def test_iso_with_an_offset_is_converted() -> None:
    expected = datetime(2026, 5, 27, 8, 0, tzinfo=UTC).timestamp()
    assert parse_time("2026-05-27T10:00:00+02:00") == expected


def test_naive_iso_is_taken_as_utc() -> None:
    assert parse_time("2026-05-27T10:00:00") == parse_time("2026-05-27T10:00:00Z")


def test_bare_date_is_midnight_or_the_end_of_that_day() -> None:
    midnight = datetime(2026, 5, 27, tzinfo=UTC).timestamp()
    assert parse_time("2026-05-27") == midnight
    assert parse_time("2026-05-27", end_of_day=True) == pytest.approx(midnight + 86_400, abs=1e-3)


@pytest.mark.parametrize("value", ["", "yesterday", "7x", "-3d", "2026-13-45", "d7", "7 days ago"])
def test_bad_value_is_a_usage_error_naming_both_forms(value: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_time(value)
    assert caught.value.exit_code == 2
    assert "ISO-8601" in caught.value.message
    assert "7d" in caught.value.message


def test_stored_timestamps_convert_or_become_none() -> None:
    assert iso_to_epoch("2026-05-27T10:00:00Z") == parse_time("2026-05-27T10:00:00Z")
    assert iso_to_epoch("2026-05-27T10:00:00.250000Z") == pytest.approx(
        parse_time("2026-05-27T10:00:00Z") + 0.25
    )
    assert iso_to_epoch(None) is None
    assert iso_to_epoch("") is None
    assert iso_to_epoch("not a time") is None
