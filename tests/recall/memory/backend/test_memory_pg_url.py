"""A connection string as korg-recall shows it: never with its password, wherever the password sits
-- and the shared SQL reaching psycopg only with its placeholders translated."""

from __future__ import annotations

import pytest

from korg_bridge.recall.memory.backend.pg.errors import connect_error
from korg_bridge.recall.memory.backend.pg.store import placeholders
from korg_bridge.recall.memory.backend.pg.url import safe_url, scrub
from korg_bridge.recall.paths import store_location

pytestmark = pytest.mark.no_store


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/korg", "postgresql://app:***@db:5432/korg"),
        ("postgres://app:p%40ss%3Aword@db/korg", "postgres://app:***@db/korg"),
        (
            "postgresql://app@db/korg?password=s3cret&sslmode=require",
            "postgresql://app@db/korg?password=%2A%2A%2A&sslmode=require",
        ),
        ("postgresql://db/korg", "postgresql://db/korg"),
        (
            "postgresql://app:s3cret@/korg?host=/run/postgresql",
            "postgresql://app:***@/korg?host=/run/postgresql",
        ),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert safe_url(url) == shown
    assert "s3cret" not in safe_url(url) and "p@ss" not in safe_url(url)
    assert store_location({"KORG_RECALL_STORE": url}).label == shown


def test_a_driver_message_quoting_the_password_is_scrubbed() -> None:
    url = "postgresql://app:p%40ss%3Aword@db/korg?sslpassword=keyphrase"
    message = (
        "could not connect: user app password p@ss:word, key keyphrase, postgresql://app:p%40ss%3Aword@db/x"
    )
    cleaned = scrub(message, url)
    for secret in ("p@ss:word", "p%40ss%3Aword", "keyphrase"):
        assert secret not in cleaned
    error = connect_error(OSError(message), url)
    assert error.exit_code == 5 and "p@ss" not in error.message and "keyphrase" not in error.message


def test_the_shared_sql_reaches_psycopg_with_its_placeholders_translated() -> None:
    assert placeholders("SELECT id FROM memory WHERE scope = ? AND id IN (?, ?)") == (
        "SELECT id FROM memory WHERE scope = %s AND id IN (%s, %s)"
    )
    with pytest.raises(ValueError, match="must not contain '%'"):
        placeholders("SELECT 1 WHERE body LIKE '%x'")
