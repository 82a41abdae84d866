"""Fixtures every korg-recall test may share: a fresh recall index and a folder of ledgers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from korg_bridge.recall.history.index import Index


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    """An empty recall index in the test's folder, closed after the test."""
    with Index(tmp_path / "index.sqlite") as opened:
        yield opened


@pytest.fixture
def ledgers(tmp_path: Path) -> Path:
    """An empty folder to write ledgers into."""
    folder = tmp_path / "ledgers"
    folder.mkdir()
    return folder
