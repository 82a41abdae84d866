"""The ``korg-bridge`` command line: as a real subprocess (what an MCP host
sees when the bridge fails to start) and in process through ``main()``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import jsonschema
import pytest

from korg_bridge import __version__
from korg_bridge.bridge.contract import SIDE_EFFECTS
from tests.helpers.bridge_client import (
    BROKEN,
    INITIALIZE,
    REPO,
    THUMP,
    child_env,
    is_dead,
    read_pid,
    wait_dead,
    wait_for_file,
)
from tests.helpers.cli import call_bridge, korg_bridge, python_env

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ERROR_LINE = re.compile(r"^korg-bridge: error: [^\n]+\n$")

# --- as a subprocess ---------------------------------------------------------

RUN_BOUND = 120.0
SUBPROCESS_RUNS: dict[str, list[str]] = {
    # A representative set; every fixture is also checked in process below.
    "not-executable": [str(BROKEN / "not-executable"), "--list-tools"],
    "notjson": [str(BROKEN / "notjson"), "--list-tools"],
    "crash": [str(BROKEN / "crash"), "--list-tools"],
    "hang": [str(BROKEN / "hang"), "--list-tools", "--discovery-timeout", "1"],
    "clap-exit2": [str(BROKEN / "clap-exit2"), "--list-tools", "--json"],
    "version": ["--version"],
    "zero-timeout": [str(THUMP), "--timeout", "0"],
}
SUBPROCESS_EXIT = {"not-executable": 7, "notjson": 3, "crash": 3, "hang": 4}


@pytest.fixture(scope="module")
def pid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pids")


@pytest.fixture(scope="module")
def runs(pid_dir: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """``python -m korg_bridge ...`` for each entry of SUBPROCESS_RUNS, all at once.

    In parallel because each run pays for a fresh interpreter and the MCP SDK
    import (well over a second); one batch keeps that cost paid once.
    """
    procs: dict[str, subprocess.Popen[str]] = {}
    for name, args in SUBPROCESS_RUNS.items():
        procs[name] = subprocess.Popen(
            [*korg_bridge(), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=child_env({"KORG_FIXTURE_PIDFILE": str(pid_dir / "hang.pid")}),
            cwd=REPO,
        )
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    deadline = time.monotonic() + RUN_BOUND
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.mark.parametrize("fixture", list(SUBPROCESS_EXIT))
def test_a_broken_binary_fails_with_its_exit_code_and_one_error_line(
    fixture: str, runs: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    run = runs[fixture]
    assert run.returncode == SUBPROCESS_EXIT[fixture], run.stderr
    assert run.stdout == ""
    assert ERROR_LINE.match(run.stderr), run.stderr
    assert str(BROKEN / fixture) in run.stderr  # names the binary as typed
    assert "internal error" not in run.stderr
    assert "korg_bridge" not in run.stderr  # no frame of ours, ever


def test_the_crash_error_line_quotes_the_child_and_its_error(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    line = runs["crash"].stderr
    assert "is not a korg:introspect@v1 binary" in line and "exited 1 and printed no JSON" in line
    assert "RuntimeError: crash fixture: boom" in line


def test_a_hanging_binary_is_ended_with_its_grandchild(
    runs: dict[str, subprocess.CompletedProcess[str]], pid_dir: Path
) -> None:
    assert "did not finish within 1 s" in runs["hang"].stderr
    pids = [read_pid(pid_dir / "hang.pid"), read_pid(pid_dir / "hang.pid.parent")]
    deadline = time.monotonic() + 10
    while not all(is_dead(pid) for pid in pids):
        assert time.monotonic() < deadline, f"still alive: {pids}"
        time.sleep(0.05)


def test_a_document_printed_with_exit_status_2_is_served(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    run = runs["clap-exit2"]
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert [(t["command_id"], t["status"]) for t in report["tools"]] == [("clap-exit2.hello", "allowed")]


def test_version_prints_the_package_version(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = runs["version"]
    assert (run.returncode, run.stdout, run.stderr) == (0, f"korg-bridge {__version__}\n", "")


def test_a_usage_error_exits_2_without_a_traceback(runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = runs["zero-timeout"]
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == (
        'korg-bridge: error: --timeout must be a positive number of seconds, got "0". '
        "See 'korg-bridge --help'.\n"
    )
    assert "Traceback" not in run.stderr


def test_a_closed_stdout_pipe_exits_quietly() -> None:
    proc = subprocess.Popen(
        [*korg_bridge(), str(THUMP), "--list-tools"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        cwd=REPO,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # long before the table is written: the write hits EPIPE
    _, err = proc.communicate(timeout=RUN_BOUND)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"BrokenPipeError" not in err


async def _read_line(stream: anyio.abc.ByteReceiveStream, buffer: bytearray) -> bytes:
    while b"\n" not in buffer:
        buffer += await stream.receive()
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line


@pytest.mark.anyio
async def test_ctrl_c_then_eof_exits_6_quietly() -> None:
    # Ctrl-C alone does not end an idle bridge: the SDK reads stdin in a worker
    # thread that cancellation cannot interrupt, so it exits when stdin closes.
    with anyio.fail_after(RUN_BOUND):
        async with await anyio.open_process(
            [*korg_bridge(), str(THUMP)], env=child_env(), cwd=REPO
        ) as process:
            assert process.stdin is not None and process.stdout is not None and process.stderr is not None
            await process.stdin.send(json.dumps(INITIALIZE).encode() + b"\n")
            answer = await _read_line(process.stdout, bytearray())  # it is serving
            process.send_signal(signal.SIGINT)
            await process.stdin.aclose()
            code = await process.wait()
            err = b"".join([chunk async for chunk in process.stderr])
    assert json.loads(answer)["id"] == 1
    assert code == 6  # error.user_interrupt
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err


@pytest.mark.anyio
async def test_sigterm_during_a_call_ends_the_tool_process_group_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "thump_sleep", "arguments": {"seconds": 30, "pid_file": str(pid_file)}},
    }
    pids: list[int] = []
    try:
        with anyio.fail_after(RUN_BOUND):
            async with await anyio.open_process(
                [*korg_bridge(), str(THUMP)], env=child_env(), cwd=REPO, stderr=None
            ) as process:
                assert process.stdin is not None and process.stdout is not None
                await process.stdin.send(json.dumps(INITIALIZE).encode() + b"\n")
                await _read_line(process.stdout, bytearray())
                await process.stdin.send(json.dumps(call).encode() + b"\n")
                await wait_for_file(pid_file)
                pids = [read_pid(pid_file), read_pid(Path(f"{pid_file}.grandchild"))]
                process.terminate()
                await process.wait()
        await wait_dead(pids, timeout=3)
    finally:
        for pid in pids:  # never leave the orphans running
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# --- in process, through main() ------------------------------------------------


@pytest.fixture(autouse=True)
def _restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """main() installs its own stderr handler on the root logger; put pytest's back."""
    monkeypatch.setenv("PATH", python_env()["PATH"])
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_version_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert call_bridge(capsys, "--version") == (0, f"korg-bridge {__version__}\n", "")


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        ([], "missing BINARY"),
        ([str(THUMP), "--json"], "--json only applies to --list-tools"),
        ([str(THUMP), "--timeout", "0"], "must be a positive number of seconds"),
        ([str(THUMP), "--timeout", "inf"], "must be a positive number of seconds"),
        ([str(THUMP), "--timeout", "soon"], 'must be a number of seconds, got "soon"'),
        ([str(THUMP), "--discovery-timeout", "-1"], "must be a positive number of seconds"),
        ([str(THUMP), "--max-concurrency", "0"], "must be at least 1"),
        ([str(THUMP), "--max-concurrency", "two"], 'must be a whole number, got "two"'),
        ([str(THUMP), "--tool-names", "fancy"], 'must be one of safe, command-id, got "fancy"'),
        ([str(THUMP), "--no-such-flag"], "unknown option --no-such-flag"),
    ],
    ids=[
        "missing-binary",
        "json-without-list-tools",
        "zero-timeout",
        "infinite-timeout",
        "word-timeout",
        "negative-discovery-timeout",
        "zero-concurrency",
        "word-concurrency",
        "unknown-name-style",
        "unknown-flag",
    ],
)
def test_usage_errors_exit_2_and_say_what_is_wrong(
    capsys: pytest.CaptureFixture[str], argv: list[str], phrase: str
) -> None:
    code, out, err = call_bridge(capsys, *argv)
    assert code == 2
    assert out == ""
    assert phrase in err


def test_a_missing_binary_in_process_is_exit_7_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call_bridge(capsys, "/no/such/binary", "--list-tools")
    assert code == 7
    assert out == ""
    assert err == "korg-bridge: error: binary not found: '/no/such/binary'. Check the path.\n"


IN_PROCESS_EXIT = {
    "not-executable": 7,
    "does-not-exist": 7,
    "notjson": 3,
    "array": 3,
    "wrongschema": 3,
    "nocallables": 3,
    "callables-object": 3,
    "missingfield": 3,
    "duplicate": 3,
    "deep": 3,
    "huge": 3,
    "empty": 3,
    "crash": 3,
    "badutf8-json": 3,
    # hang (exit 4) takes the discovery timeout: run once, as a subprocess, above.
}


@pytest.mark.parametrize("fixture", list(IN_PROCESS_EXIT))
def test_every_broken_fixture_exits_with_its_code_and_one_error_line(
    capsys: pytest.CaptureFixture[str], fixture: str
) -> None:
    code, out, err = call_bridge(capsys, str(BROKEN / fixture), "--list-tools")
    assert code == IN_PROCESS_EXIT[fixture], err
    assert out == ""
    assert ERROR_LINE.match(err), err
    assert str(BROKEN / fixture) in err
    assert "internal error" not in err


def _json_report(capsys: pytest.CaptureFixture[str], binary: Path, *flags: str) -> tuple[dict[str, Any], str]:
    code, out, err = call_bridge(capsys, str(binary), "--list-tools", "--json", *flags)
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report, err


def test_a_document_of_only_bad_callables_serves_zero_tools(capsys: pytest.CaptureFixture[str]) -> None:
    report, err = _json_report(capsys, BROKEN / "allbad")
    assert [t["status"] for t in report["tools"]] == ["skipped"] * 4
    assert all(t["reason"] for t in report["tools"])
    assert err == ""  # the report says why; a dry run need not say it twice


def test_a_non_utf8_document_is_served(capsys: pytest.CaptureFixture[str]) -> None:
    report, _ = _json_report(capsys, BROKEN / "nonutf8doc")
    assert [t["status"] for t in report["tools"]] == ["allowed"]


def test_dotted_and_long_command_ids_get_unique_valid_names(capsys: pytest.CaptureFixture[str]) -> None:
    report, _ = _json_report(capsys, BROKEN / "dotted-long")
    names = [t["name"] for t in report["tools"]]
    assert len(names) == 3 == len(set(names))
    assert all(NAME_RE.match(name) for name in names), names


def test_debug_adds_the_traceback_to_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = call_bridge(capsys, str(BROKEN / "array"), "--list-tools", "--debug")
    assert code == 3
    assert "Traceback" in err
    assert err.rstrip().endswith("it must be a JSON object with schema 'korg:introspect@v1'.")


def _table_rows(out: str) -> dict[str, str]:
    """command_id → the STATUS column, from the --list-tools table."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TOOL "))
    status_at = lines[header].index("STATUS")
    command_at = lines[header].index("COMMAND_ID")
    rows = {}
    for line in lines[header + 1 :]:
        if not line.strip():
            break
        rows[line[command_at:].split("  ")[0].strip()] = line[status_at:]
    return rows


def test_list_tools_shows_allowed_denied_and_skipped_with_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call_bridge(capsys, str(THUMP), "--list-tools")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"thump 1.2.3 ({THUMP})"
    assert lines[1] == (
        "policy: allowed side effects: none, fs_read (default; set KORG_INTROSPECT_MCP_ALLOW to allow more)"
    )
    rows = _table_rows(out)
    assert rows["thump.echo"] == "ok"
    assert rows["thump.touch"] == "DENIED: needs fs_write"
    assert rows["thump.fetch"] == "DENIED: needs network"
    assert rows["thump.append"] == "DENIED: needs ledger_write"
    assert rows["thump.mystery"] == rows["thump.nofx"] == "DENIED: unknown side effects, needs all"
    assert rows["thump.shell"] == "DENIED: interactive session, never served"
    assert rows["thump.badschema"].startswith("SKIPPED: input_schema is not a valid JSON Schema")
    assert rows["thump.bad id!"].startswith("SKIPPED: command_id segment 'bad id!'")
    assert len(rows) == 25
    assert lines[-1] == "12 allowed, 6 denied, 7 skipped"
    assert err == ""


def test_list_tools_policy_line_follows_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_INTROSPECT_MCP_ALLOW", " Network ")
    code, out, _ = call_bridge(capsys, str(THUMP), "--list-tools")
    assert code == 0
    assert "policy: allowed side effects: none, fs_read, network (KORG_INTROSPECT_MCP_ALLOW)" in out
    assert _table_rows(out)["thump.fetch"] == "ok"


def test_list_tools_allow_all_still_refuses_a_session(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_INTROSPECT_MCP_ALLOW", "fs_write")  # overridden by --allow
    code, out, _ = call_bridge(capsys, str(THUMP), "--list-tools", "--allow", "all")
    assert code == 0
    assert "policy: all side effects allowed (--allow)" in out
    rows = _table_rows(out)
    assert rows["thump.mystery"] == rows["thump.nofx"] == "ok"
    assert rows["thump.shell"] == "DENIED: interactive session, never served"
    assert out.splitlines()[-1] == "17 allowed, 1 denied, 7 skipped"


NULLABLE_STRING = {"type": ["string", "null"]}
REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["binary", "version", "path", "binaries", "policy", "tools"],
    "properties": {
        "binary": {"type": "string"},
        "version": NULLABLE_STRING,
        "path": NULLABLE_STRING,
        "binaries": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["binary", "version", "path"],
                "properties": {
                    "binary": {"type": "string"},
                    "version": NULLABLE_STRING,
                    "path": NULLABLE_STRING,
                },
            },
        },
        "policy": {
            "type": "object",
            "additionalProperties": False,
            "required": ["source", "allow_all", "allowed", "description"],
            "properties": {
                "source": {"enum": ["default", "env", "--allow"]},
                "allow_all": {"type": "boolean"},
                "allowed": {"type": "array", "items": {"enum": list(SIDE_EFFECTS)}, "uniqueItems": True},
                "description": {"type": "string"},
            },
        },
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": [
                    "binary",
                    "name",
                    "command_id",
                    "side_effects",
                    "output_mode",
                    "long_running",
                    "status",
                    "reason",
                ],
                "properties": {
                    "binary": {"type": "string"},
                    "name": {"type": ["string", "null"], "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                    "command_id": {"type": "string"},
                    "side_effects": NULLABLE_STRING,
                    "output_mode": NULLABLE_STRING,
                    "long_running": {"type": ["boolean", "null"]},
                    "status": {"enum": ["allowed", "denied", "skipped", "excluded"]},
                    "reason": NULLABLE_STRING,
                },
            },
        },
    },
}


def test_list_tools_json_has_a_stable_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call_bridge(capsys, str(THUMP), "--list-tools", "--json")
    assert code == 0
    report = json.loads(out)
    jsonschema.Draft202012Validator(REPORT_SCHEMA).validate(report)
    assert (report["binary"], report["version"], report["path"]) == ("thump", "1.2.3", str(THUMP))
    assert report["policy"]["source"] == "default"
    by_id = {t["command_id"]: t for t in report["tools"]}
    assert by_id["thump.echo"]["status"] == "allowed" and by_id["thump.echo"]["reason"] is None
    assert by_id["thump.touch"]["status"] == "denied"
    assert "KORG_INTROSPECT_MCP_ALLOW=fs_write" in by_id["thump.touch"]["reason"]
    assert by_id["thump.notobject"]["status"] == "skipped" and by_id["thump.notobject"]["name"] is None
    assert by_id["thump.sleep"]["long_running"] is True


def test_list_tools_json_with_command_id_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = call_bridge(capsys, str(THUMP), "--list-tools", "--json", "--tool-names", "command-id")
    assert code == 0
    tools = [t for t in json.loads(out)["tools"] if t["status"] != "skipped"]
    assert all(t["name"] == t["command_id"] for t in tools)
    assert os.path.basename(str(THUMP)) == "thump"
