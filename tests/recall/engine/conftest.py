"""Fixtures of the engine tests: a history and an environment to call korg-recall in, and an
engine for that environment's index, stopped when the test ends."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.helpers.cli import python_env
from tests.helpers.engine import Running, korg_recall, start

BOUND = 120.0
"""Seconds one korg-recall call may take on a loaded machine."""


def event(seq: int, command: str, output: str = "ok") -> dict[str, object]:
    return {
        "seq": seq,
        "source_agent": "agent:test",
        "tool_name": "Bash",
        "args": {"command": command},
        "result": {"output": output},
        "success": True,
    }


def append(ledger: Path, *events: dict[str, object]) -> None:
    with ledger.open("a", encoding="utf-8") as out:
        for item in events:
            out.write(json.dumps(item) + "\n")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledgers" / "main.jsonl"
    path.parent.mkdir(parents=True)
    append(
        path,
        event(1, "make deploy", "deployed with blue green"),
        event(2, "pytest -q", "42 passed"),
        event(3, "git push origin walrus", "pushed the walrus branch"),
    )
    return path


@pytest.fixture
def env(tmp_path: Path, ledger: Path) -> dict[str, str]:
    """The environment of the calls: this test's home, its ledger, no background indexer."""
    values = python_env()
    values.update(KORG_RECALL_LEDGER=str(ledger.parent), KORG_RECALL_BACKGROUND="0")
    values.pop("KORG_RECALL_ENGINE", None)
    return values


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def engine(env: Mapping[str, str]) -> Iterator[Running]:
    """An engine for ``env``'s index, running for the test."""
    running = start(env)
    try:
        yield running
    finally:
        running.stop()


def run(
    env: Mapping[str, str],
    *args: str,
    cwd: Path,
    stdin: str | None = None,
    timeout: float = BOUND,
    command: Sequence[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``korg-recall ARGS`` (or ``command ARGS``) as the bridge runs it: a fresh process, pipes,
    stdin /dev/null."""
    return subprocess.run(
        [*(command or korg_recall()), *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=dict(env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def off(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the engine switched off: the call runs in its own process."""
    return {**env, "KORG_RECALL_ENGINE": "off"}


def answered(env: Mapping[str, str], cwd: Path, command: Sequence[str] | None = None) -> bool:
    """Whether an engine answered a ``stats`` call in ``env``."""
    done = run(env, "stats", "--json", cwd=cwd, command=command)
    assert done.returncode == 0, done.stderr
    value: bool = json.loads(done.stdout)["engine"]["answered"]
    return value


def wait_for(predicate: object, timeout: float = 30.0) -> bool:
    """Whether ``predicate()`` came true within ``timeout`` seconds (looked at every 20 ms)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wreck_schema(path: Path) -> None:
    """Overwrite the schema page after the file's header in place, as a disk's damage might."""
    with open(path, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\xff" * 3000)
