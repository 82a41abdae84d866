"""``run_process`` on real executables: caps, concurrent pipes, bad bytes,
timeouts and cancellation that end the whole process group, daemons that
hold the pipes, stdin from /dev/null, and the child's own session."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from korg_bridge.bridge.process import ProcessResult, run_process, signal_group
from tests.helpers.bridge_client import BROKEN, THUMP, is_dead, read_pid, wait_dead, wait_for_file
from tests.helpers.cli import python_env

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
BOUND = 30.0
"""No test here should come near this; it only turns a hang into a failure."""


async def _thump(*args: str, timeout: float = BOUND, **kwargs: object) -> ProcessResult:
    with anyio.fail_after(BOUND + 10):
        return await run_process([str(THUMP), *args], timeout=timeout, env=python_env(), **kwargs)  # type: ignore[arg-type]


async def _python(code: str, *, timeout: float = BOUND, **kwargs: object) -> ProcessResult:
    with anyio.fail_after(BOUND + 10):
        return await run_process([sys.executable, "-c", code], timeout=timeout, **kwargs)  # type: ignore[arg-type]


async def test_output_beyond_the_cap_is_counted_not_kept() -> None:
    result = await _thump("flood", "--mb", "3", stdout_cap=MIB)
    assert result.returncode == 0
    assert len(result.stdout) == MIB
    assert result.stdout_dropped == 2 * MIB
    assert result.stdout.startswith(b"x" * 1023 + b"\n")


async def test_each_stream_has_its_own_cap() -> None:
    result = await _thump("flood", "--mb", "2", "--stream", "both", stdout_cap=MIB, stderr_cap=MIB // 2)
    assert result.returncode == 0
    assert (len(result.stdout), result.stdout_dropped) == (MIB, MIB)
    assert (len(result.stderr), result.stderr_dropped) == (MIB // 2, 3 * MIB // 2)


async def test_a_zero_cap_keeps_nothing_and_counts_everything() -> None:
    result = await _thump("say", "--text", "hello", stdout_cap=0)
    assert result.stdout == b""
    assert result.stdout_dropped == len(b"hello\n")


async def test_a_child_filling_stderr_while_stdout_is_quiet_does_not_deadlock() -> None:
    # 4 MiB is far beyond a pipe buffer: unless stderr is read while we wait
    # for stdout, the child blocks on write and never exits.
    code = "import sys; sys.stderr.buffer.write(b'e' * (4 << 20)); sys.stderr.flush(); print('done')"
    result = await _python(code)
    assert not result.timed_out
    assert result.returncode == 0
    assert result.stdout == b"done\n"
    assert len(result.stderr) == 4 * MIB and result.stderr_dropped == 0


async def test_non_utf8_bytes_come_back_untouched() -> None:
    result = await _thump("binary")
    assert result.stdout == b"caf\xc3\xa9 ok \xff\xfe bad \x80 end\n"
    assert result.stderr == b"err \xff\n"


async def test_every_chunk_reaches_the_stdout_callback() -> None:
    chunks: list[bytes] = []

    async def collect(chunk: bytes) -> None:
        chunks.append(chunk)

    result = await _thump("say", "--text", "line", "--repeat", "5000", on_stdout=collect)
    assert b"".join(chunks) == result.stdout == b"line\n" * 5000


async def test_exit_status_and_stderr_are_reported() -> None:
    result = await _thump("say", "--text", "out", "--stderr", "err", "--exit-code", "3")
    assert (result.returncode, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
    assert not result.timed_out and not result.lingered


async def test_death_by_signal_is_a_negative_return_code() -> None:
    result = await _python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert result.returncode == -signal.SIGKILL
    assert not result.timed_out


async def test_the_child_leads_its_own_session_and_process_group() -> None:
    result = await _thump("echo", "--query", "ids")
    echoed = json.loads(result.stdout)
    assert echoed["pid"] == echoed["pgid"] == echoed["sid"]
    assert echoed["pgid"] != os.getpgid(0)


async def test_stdin_is_dev_null() -> None:
    result = await _thump("stdin")
    assert result.returncode == 0, result.stderr
    assert b"stdin: 0 bytes" in result.stdout
    assert b"stdin-is-devnull: true" in result.stdout


async def test_env_and_cwd_reach_the_child(tmp_path: Path) -> None:
    env = {**python_env(), "KORG_TEST_VALUE": "from the test"}
    with anyio.fail_after(BOUND):
        value = await run_process([str(THUMP), "env", "--name", "KORG_TEST_VALUE"], timeout=BOUND, env=env)
        where = await run_process(
            [str(THUMP), "echo", "--query", "x"], timeout=BOUND, env=env, cwd=str(tmp_path)
        )
    assert json.loads(value.stdout) == {"value": "from the test"}
    assert json.loads(where.stdout)["cwd"] == str(tmp_path)


async def test_a_timeout_terminates_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    result = await _thump("sleep", "--seconds", "30", "--pid-file", str(pid_file), timeout=0.5)
    assert result.timed_out
    assert result.returncode == -signal.SIGTERM
    await wait_dead([read_pid(pid_file), read_pid(Path(f"{pid_file}.grandchild"))])


async def test_a_group_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    env = {**python_env(), "KORG_FIXTURE_PIDFILE": str(pid_file), "KORG_FIXTURE_IGNORE_TERM": "1"}
    with anyio.fail_after(BOUND):
        result = await run_process([str(BROKEN / "hang")], timeout=0.5, env=env)
    assert result.timed_out
    assert result.returncode == -signal.SIGKILL
    await wait_dead([read_pid(pid_file), read_pid(Path(f"{pid_file}.parent"))])


async def test_a_grandchild_holding_the_pipes_is_detected_and_ended(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    # The grandchild would hold stdout for 60 s; the call must end long before.
    with anyio.fail_after(20):
        result = await _thump("daemon", "--pid-file", str(pid_file), "--seconds", "60")
    assert result.returncode == 0
    assert result.lingered and not result.timed_out
    assert result.stdout == b"daemon started\n"
    await wait_dead([read_pid(pid_file)])


async def test_cancelling_the_caller_terminates_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    finished: list[ProcessResult] = []

    async def call(scope: anyio.CancelScope) -> None:
        with scope:
            finished.append(await _thump("sleep", "--seconds", "30", "--pid-file", str(pid_file)))

    scope = anyio.CancelScope()
    with anyio.fail_after(BOUND):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, scope)
            await wait_for_file(pid_file)
            pids = [read_pid(pid_file), read_pid(Path(f"{pid_file}.grandchild"))]
            assert not any(is_dead(pid) for pid in pids)
            scope.cancel()
    assert finished == []
    await wait_dead(pids)


async def test_an_executable_that_cannot_start_raises_os_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await run_process([str(tmp_path / "missing")], timeout=5)
    with pytest.raises(PermissionError):
        await run_process([str(BROKEN / "not-executable")], timeout=5)


def test_signalling_a_group_that_no_longer_exists_reports_false() -> None:
    # A pid far above pid_max cannot lead any group.
    assert signal_group(2**22 + 12345, signal.SIGTERM) is False
    assert signal_group(os.getpgid(0), 0) is True  # probe only: 0 sends nothing
