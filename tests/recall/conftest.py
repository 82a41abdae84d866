"""Fixtures shared by korg-recall's tests: files that are not regular files, which every reader of
a path the model may pick (ledgers, sources, verify) must refuse without blocking."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe: opening it for reading blocks until a writer comes."""
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock.jsonl"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        yield path
    finally:
        server.close()


@pytest.fixture
def dev_zero() -> Path:
    """A device that never ends."""
    return Path("/dev/zero")
