"""Children die with the bridge: a bridge killed with SIGKILL runs no cleanup,
so its reaper (a separate process reading a pipe only the bridge holds) ends
the process groups of the calls that were running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from korg_bridge.bridge.process import KILL_GRACE
from korg_bridge.bridge.reaper import Reaper
from tests.helpers.bridge_client import (
    BROKEN,
    THUMP,
    is_dead,
    open_bridge,
    read_pid,
    wait_dead,
    wait_for_file,
)
from tests.helpers.cli import python_env
from tests.helpers.paths import REPO

pytestmark = pytest.mark.anyio

BOUND = 30.0
"""Seconds any one wait here may take before the test fails instead of hanging."""

REGISTER_S = 1.0
"""Time for a host to write ``+PGID`` after its spawn returned, on a loaded machine."""
DEATH_BOUND = KILL_GRACE + 10.0
"""The reaper sends SIGTERM at once and SIGKILL after KILL_GRACE; the rest is slack
for a loaded machine and for PID 1 reaping the orphans."""


async def test_sigkilling_the_bridge_ends_a_running_call_and_its_grandchild(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleep.pid"
    outcome: list[BaseException] = []
    async with open_bridge(THUMP, "--timeout", "600") as bridge:

        async def call() -> None:
            try:
                await bridge.client.call_tool("thump_sleep", {"seconds": 600, "pid_file": str(pid_file)})
            except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await wait_for_file(pid_file)
            pids = [read_pid(pid_file), read_pid(Path(f"{pid_file}.grandchild"))]
            assert not any(is_dead(pid) for pid in pids)
            await anyio.sleep(REGISTER_S)  # the bridge registers the call's group right after the spawn
            os.kill(bridge.pid(), signal.SIGKILL)
            await wait_dead(pids, timeout=DEATH_BOUND)
            with anyio.fail_after(BOUND):
                while not outcome:
                    await anyio.sleep(0.05)


KILLED_HOST = """
import sys, anyio
from korg_bridge.bridge.process import run_process
anyio.run(lambda: run_process([sys.argv[1]], timeout=600))
"""
"""A library user (an HTTP bridge, say) running one child; the test SIGKILLs it."""


async def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    pid_file = tmp_path / "hang.pid"
    env = {
        **python_env(),
        "KORG_FIXTURE_PIDFILE": str(pid_file),
        "KORG_FIXTURE_IGNORE_TERM": "1",
        "PYTHONPATH": str(REPO),
    }
    host = subprocess.Popen([sys.executable, "-c", KILLED_HOST, str(BROKEN / "hang")], env=env)
    try:
        await wait_for_file(pid_file)
        pids = [read_pid(pid_file), read_pid(Path(f"{pid_file}.parent"))]
        # The host registers the group with its reaper right after the spawn returns: on a loaded
        # machine the child can write its pid file first (the gap reaper.py documents).
        await anyio.sleep(REGISTER_S)
        started = anyio.current_time()
        host.kill()
        await wait_dead(pids, timeout=DEATH_BOUND)
    finally:
        host.kill()
        host.wait(BOUND)
    assert anyio.current_time() - started >= KILL_GRACE * 0.9  # SIGTERM was ignored: it took the SIGKILL


# --- the reaper on its own ------------------------------------------------------------------


def sleeper() -> subprocess.Popen[bytes]:
    """A process leading its own group, as every bridged child does."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)


async def finished(process: subprocess.Popen[bytes]) -> int:
    with anyio.fail_after(DEATH_BOUND):
        while (code := process.poll()) is None:
            await anyio.sleep(0.05)
    return code


async def reaped(pid: int) -> None:
    with anyio.fail_after(DEATH_BOUND):
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            await anyio.sleep(0.05)


async def test_closing_the_pipe_ends_the_groups_still_listed_but_not_released_ones() -> None:
    reaper = Reaper(grace=1.0)
    running, released = sleeper(), sleeper()
    try:
        reaper.watch(running.pid)
        reaper.watch(released.pid)
        reaper.release(released.pid)
        pid = reaper.close()
        assert pid is not None
        assert await finished(running) == -signal.SIGTERM
        await reaped(pid)
        assert released.poll() is None
    finally:
        for process in (running, released):
            process.kill()
            process.wait(BOUND)


async def test_a_reaper_that_was_killed_is_replaced_and_told_every_running_group() -> None:
    reaper = Reaper(grace=1.0)
    first, second = sleeper(), sleeper()
    try:
        reaper.watch(first.pid)
        old = reaper.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        await reaped(old)
        reaper.watch(second.pid)  # finds the pipe broken, starts another reaper
        new = reaper.close()
        assert new is not None and new != old
        assert await finished(first) == -signal.SIGTERM
        assert await finished(second) == -signal.SIGTERM
        await reaped(new)
    finally:
        for process in (first, second):
            process.kill()
            process.wait(BOUND)


def test_the_reaper_never_signals_its_own_or_inits_group() -> None:
    from korg_bridge.bridge.reaper import signal_group

    assert signal_group(0, 0) is False
    assert signal_group(1, 0) is False


async def test_the_reaper_program_ignores_garbled_lines_and_ends_what_it_was_told_at_eof() -> None:
    from korg_bridge.bridge.reaper import serve

    running, released = sleeper(), sleeper()
    read_end, write_end = os.pipe()
    try:
        lines = f"+{running.pid}\nnonsense\n+x1\n-\n{'9' * 200}\n+{released.pid}\n-{released.pid}\n+"
        os.write(write_end, lines.encode())
        os.close(write_end)
        with anyio.fail_after(BOUND):
            await anyio.to_thread.run_sync(serve, read_end, 1.0)
        assert await finished(running) == -signal.SIGTERM
        assert released.poll() is None
    finally:
        os.close(read_end)
        for process in (running, released):
            process.kill()
            process.wait(BOUND)
