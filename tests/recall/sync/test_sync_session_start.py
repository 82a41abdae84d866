"""The session-start hook syncs in the background once sync is set up, and prints nothing more."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.helpers.cli import BOUND
from tests.recall.sync.conftest import Machine, _machine

WAIT_S = 90.0
"""Bound on a background sync in a test (a sync takes a second or two; the machine is shared)."""


def _hook_argv(machine: Machine) -> list[str]:
    """The exact command ``hooks install`` puts in this machine's Claude Code settings."""
    machine.ok("hooks", "install")
    settings = json.loads((machine.home / ".claude" / "settings.json").read_text("utf-8"))
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert "context --hook claude" in command
    return shlex.split(command)


def _run_hook(machine: Machine, argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    """The hook as the agent runs it: no shell, stdin closed, output captured, bounded."""
    return subprocess.run(
        argv,
        cwd=machine.cwd,
        env={**os.environ, **machine.env, "KORG_RECALL_BACKGROUND": "1", **extra},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )


def _record(machine: Machine) -> Path:
    return machine.data / "sync" / "background.json"


def _wait_background(machine: Machine) -> dict[str, Any]:
    """The record of the background sync the hook started, once it finished."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            value: dict[str, Any] = json.loads(_record(machine).read_text("utf-8"))
        except (OSError, ValueError):
            value = {}
        if value.get("finished_at"):
            return value
        time.sleep(0.1)
    raise AssertionError(f"no background sync finished on {machine.name} within {WAIT_S:g} s")


def test_the_session_start_hook_brings_another_machines_memory_through_a_background_sync(
    pair: tuple[Machine, Machine],
) -> None:
    a, b = pair
    memory_id = a.remember("the release notes live in docs/releases/")
    started = _run_hook(a, _hook_argv(a))
    assert started.returncode == 0, started.stderr
    done = _wait_background(a)
    assert (done["outcome"], done["sent"]) == ("synced", 1)
    hook_b = _run_hook(b, _hook_argv(b))
    assert hook_b.returncode == 0, hook_b.stderr
    assert memory_id not in hook_b.stdout  # the brief is the store as it was; the sync comes after it
    assert _wait_background(b)["applied"] == 1
    assert b.read(memory_id)["body"] == "the release notes live in docs/releases/"
    status = b.ok("sync", "status")
    assert status["on_session_start"] is True and status["last_background_sync"]["outcome"] == "synced"


def test_the_hook_prints_the_same_brief_whether_or_not_it_starts_a_sync(
    pair: tuple[Machine, Machine],
) -> None:
    a, _b = pair
    a.remember("the staging database is reset every Sunday")
    argv = _hook_argv(a)
    assert a.ok("sync", "config", "--on-session-start", "off")["on_session_start"] is False
    quiet = _run_hook(a, argv)
    assert not _record(a).exists()
    assert a.ok("sync", "config", "--on-session-start", "on")["on_session_start"] is True
    syncing = _run_hook(a, argv)
    _wait_background(a)
    assert quiet.returncode == syncing.returncode == 0
    assert "the staging database" in syncing.stdout
    assert (syncing.stdout, syncing.stderr) == (quiet.stdout, quiet.stderr)


def test_the_hook_of_a_machine_that_does_not_sync_starts_nothing(tmp_path: Path) -> None:
    solo = _machine(tmp_path, "solo")
    solo.remember("the lab printer is on the third floor")
    argv = _hook_argv(solo)
    with_background = _run_hook(solo, argv)
    without = _run_hook(solo, argv, KORG_RECALL_BACKGROUND="0")
    assert with_background.returncode == 0, with_background.stderr
    assert (with_background.stdout, with_background.stderr) == (without.stdout, without.stderr)
    assert not (solo.data / "sync").exists()


def test_the_hook_starts_no_sync_when_switched_off_or_when_one_runs(pair: tuple[Machine, Machine]) -> None:
    from korg_bridge.recall.sync.background import on_session_start
    from korg_bridge.recall.sync.state import locked

    a, _b = pair
    env = {**a.env, "KORG_RECALL_BACKGROUND": "0"}
    assert on_session_start(env) == "off"  # KORG_RECALL_BACKGROUND=0 stops every background process
    env["KORG_RECALL_BACKGROUND"] = "1"
    a.ok("sync", "config", "--on-session-start", "off")
    assert on_session_start(env) == "off"
    a.ok("sync", "config", "--on-session-start", "on")
    with locked(env):  # a sync of this machine is under way: it does the work
        assert on_session_start(env) == "running"
    assert not _record(a).exists()
