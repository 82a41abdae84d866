"""SQLite connections tests open by hand, closed after each test.

Warnings are errors in this suite, and an unclosed connection is a
ResourceWarning, so each test's connections are closed by the autouse fixture
in ``tests/conftest.py`` whatever the test's outcome.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

OPENED: list[sqlite3.Connection] = []


def connect(database: str | Path, **options: Any) -> sqlite3.Connection:
    """``sqlite3.connect``, remembered so it is closed when the test ends."""
    conn = sqlite3.connect(database, **options)
    OPENED.append(conn)
    return conn


def close_all() -> None:
    while OPENED:
        OPENED.pop().close()
