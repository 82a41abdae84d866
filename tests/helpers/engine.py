"""Resident engines for tests: start one for an environment's index, stop it, and stop every
engine left under a folder (``KORG_TEST_ENGINE=1`` runs the CLI tests through engines started
by their own first call: :func:`engine_env`, swept by the conftest)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

READY_S = 90.0
"""How long an engine may take to load everything (the model included) on a loaded machine."""
STOP_S = 30.0
"""How long a stopped engine may take to exit."""
TEST_ENGINE = "KORG_TEST_ENGINE"
"""``1``: the tests' korg-recall processes hand their calls to engines (see tests/conftest.py)."""


def korg_recall() -> list[str]:
    """The installed console script (the front half), else the module."""
    found = shutil.which("korg-recall", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "korg_bridge.recall.cli.app"]


def calls(pid: int, *, spares: bool = False) -> list[int]:
    """The engine ``pid``'s children running a call (and, with ``spares``, the one forked ahead
    for the next call)."""
    from korg_bridge.recall.engine.server import CALL_NAME, SPARE_NAME

    return children(pid, CALL_NAME, SPARE_NAME) if spares else children(pid, CALL_NAME)


def spares(pid: int) -> list[int]:
    """The engine ``pid``'s children waiting for the next call, from one look at ``/proc``: two
    looks (calls and spares, less calls) would count a call's child that ended between them."""
    from korg_bridge.recall.engine.server import SPARE_NAME

    return children(pid, SPARE_NAME)


def children(pid: int, *names: str) -> list[int]:
    """``pid``'s children whose process name is one of ``names``, lowest pid first."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                    name, rest = handle.read().split(" (", 1)[1].rsplit(")", 1)
            except (OSError, ValueError, IndexError):
                continue
            if int(rest.split()[1]) == pid and name in names:
                found.append(int(entry))
    return sorted(found)


def engine_dir(env: Mapping[str, str]) -> Path:
    from korg_bridge.recall.engine.protocol import engine_dir as where

    return where(env)


@dataclass
class Running:
    """An engine this test started: its process, folder and the line it printed."""

    proc: subprocess.Popen[bytes]
    folder: Path
    line: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def info(self) -> dict[str, object]:
        value: dict[str, object] = json.loads((self.folder / "engine.json").read_text(encoding="utf-8"))
        return value

    def stop(self) -> int:
        """SIGTERM, then wait (SIGKILL past :data:`STOP_S`); the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(STOP_S)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code


def start(
    env: Mapping[str, str], *extra: str, cwd: Path | None = None, command: Sequence[str] | None = None
) -> Running:
    """``korg-recall engine`` (or ``command engine``) for the index ``env`` names, once it listens."""
    proc = subprocess.Popen(
        [*(command or korg_recall()), "engine", "--idle-exit", "10m", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + READY_S
    seen = b""
    while b"\n" not in seen:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stderr], [], [], max(left, 0))
        if not ready:
            proc.kill()
            proc.wait(STOP_S)
            raise AssertionError(f"the engine did not start within {READY_S} s: {seen!r}")
        chunk = os.read(proc.stderr.fileno(), 4096)
        if not chunk:
            proc.wait(STOP_S)
            raise AssertionError(f"the engine exited ({proc.returncode}): {seen.decode(errors='replace')}")
        seen += chunk
    line = seen.decode().splitlines()[0]
    assert "engine listening on" in line, line
    return Running(proc, engine_dir(env), line)


@contextlib.contextmanager
def running(env: Mapping[str, str], *extra: str) -> Iterator[Running]:
    engine = start(env, *extra)
    try:
        yield engine
    finally:
        engine.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(root: Path) -> int:
    """Stop every engine under ``root`` (by the pid in its engine.json, once it is confirmed as the
    process holding the socket); the calls their logs say they answered."""
    from korg_bridge.recall.engine.command import status, stop

    answered = 0
    for lock in root.rglob("engine/engine.lock"):
        folder = lock.parent
        env = {"KORG_RECALL_INDEX": str(folder.parent / "index.sqlite")}
        deadline = time.monotonic() + STOP_S
        while time.monotonic() < deadline:
            if status(env)["running"]:
                stop(env)
            if not status(env).get("starting_or_stopping"):
                break
            time.sleep(0.05)
        log = folder / "engine.log"
        with contextlib.suppress(OSError):
            for match in re.finditer(r"engine stopped after (\d+) call", log.read_text(encoding="utf-8")):
                answered += int(match.group(1))
    return answered


def engine_env() -> dict[str, str]:
    """What ``KORG_TEST_ENGINE=1`` adds to every test's environment: the first korg-recall call of
    an index starts its engine and waits for it; every later call hands over."""
    return {
        "KORG_RECALL_ENGINE": "auto",
        "KORG_RECALL_ENGINE_WAIT": "30",
        "KORG_RECALL_ENGINE_IDLE": "5m",
    }
