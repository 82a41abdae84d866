"""Shared test fixtures: isolated state, the peer data, files that are not regular files.

Where things are is :mod:`tests.helpers.paths`; running korg-recall and korg-bridge is
:mod:`tests.helpers.cli`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.engine import TEST_ENGINE, engine_env, sweep
from tests.helpers.paths import PEERS, peers_missing
from tests.helpers.sqlite import close_all

ENGINES = os.environ.get(TEST_ENGINE) == "1"
"""Run the tests' korg-recall processes through resident engines (read before the fixtures strip KORG_*)."""
_ANSWERED: list[int] = []


@pytest.fixture(autouse=True)
def _close_sqlite_connections() -> Iterator[None]:
    """Close what ``_sqlite.connect`` opened: an unclosed connection is a ResourceWarning, an error here."""
    yield
    close_all()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Path]:
    """Point every home/cache/index path at a temp dir and drop inherited KORG_* settings."""
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith(("KORG_", "CLAUDE_", "CODEX_")) and name != "KORG_RECALL_MODEL_DIR":
            monkeypatch.delenv(name, raising=False)
    # No background indexer outlives a test; the tests of the indexer switch it on and wait for it.
    monkeypatch.setenv("KORG_RECALL_BACKGROUND", "0")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    if ENGINES:  # KORG_TEST_ENGINE=1: every korg-recall process hands its call to an engine
        for name, value in engine_env().items():
            monkeypatch.setenv(name, value)
    yield home
    if ENGINES:
        _ANSWERED.append(sweep(home))
        used = (getattr(request.node, "funcargs", None) or {}).get("tmp_path")
        if isinstance(used, Path):
            _ANSWERED.append(sweep(used))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The engines a test's own sweep could not see (started under another temporary folder)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if ENGINES and factory is not None:
        _ANSWERED.append(sweep(factory.getbasetemp()))
    output = getattr(session.config, "workeroutput", None)
    if ENGINES and output is not None:  # an xdist worker: its count goes to the controller
        output["engine_answered"] = sum(_ANSWERED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist's controller: a worker's count of calls engines answered."""
    if ENGINES:
        _ANSWERED.append(int((getattr(node, "workeroutput", None) or {}).get("engine_answered", 0)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if ENGINES:
        terminalreporter.write_line(
            f"KORG_TEST_ENGINE=1: resident engines answered {sum(_ANSWERED)} korg-recall call(s)"
        )


@pytest.fixture
def peers() -> Path:
    if not PEERS.is_dir():
        pytest.skip(peers_missing(PEERS))
    return PEERS


# --- files that are not regular files: every reader of a path a model may pick must refuse them
# without blocking (ledgers, sources, verify) ----------------------------------------------------


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
