"""What a person meets first: the terminal hint, one-line errors, messages in flag terms,
and a ``--list-tools`` that refuses what the server would refuse."""

from __future__ import annotations

import os
import pty
import re
import shutil
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.helpers.bridge_client import THUMP, child_env, open_bridge
from tests.helpers.cli import korg_bridge, run_bridge, run_recall
from tests.helpers.paths import KORG_RECALL, REPO


def bridge(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``korg-bridge ARGS`` from the repository with stdin at EOF (a server that starts exits 0 at once)."""
    return run_bridge(*args, base=child_env(env), cwd=REPO)


def one_error_line(stderr: str, prog: str = "korg-bridge") -> str:
    errors = [line for line in stderr.splitlines() if line.startswith(f"{prog}: error: ")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr and "usage:" not in stderr
    return errors[0]


# --- the stdio server in a terminal --------------------------------------------------------------


@pytest.mark.anyio
async def test_a_server_started_in_a_terminal_says_it_waits_for_an_mcp_client() -> None:
    master, slave = pty.openpty()
    try:
        process = await anyio.open_process(
            [*korg_bridge(), str(THUMP)],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
            cwd=REPO,
        )
    finally:
        os.close(slave)
    try:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(30):
            while b"--list-tools" not in seen:
                seen += await process.stderr.receive()
        line = next(ln for ln in seen.decode().splitlines() if "MCP server" in ln)
        assert "waiting for a client" in line
        assert f"korg-bridge {THUMP} --list-tools" in line
    finally:
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            await process.wait()
        await process.aclose()
        os.close(master)


@pytest.mark.anyio
async def test_a_server_started_by_an_mcp_client_prints_no_terminal_hint() -> None:
    async with open_bridge(THUMP) as running:
        await running.client.list_tools()
        assert "waiting for a client" not in running.stderr()


# --- a quiet first run ----------------------------------------------------------------------------


def test_the_readme_s_first_command_shows_a_clean_tool_list() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Two commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    found = re.search(r"korg-bridge (\S+) --list-tools", block)
    assert found is not None, block
    run = bridge(found.group(1), "--list-tools")
    assert (run.returncode, run.stderr) == (0, "")
    assert "SKIPPED" not in run.stdout and "DENIED: needs fs_write" in run.stdout
    assert run.stdout.rstrip().endswith(", 0 skipped")


def test_korg_bridge_korg_recall_starts_with_one_line() -> None:
    run = bridge(str(KORG_RECALL))  # stdin at EOF: it starts, says so, and ends
    assert run.returncode == 0
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("korg-bridge: serving ")
    assert "tools of korg-recall (12 callables are command-line only); allowed side effects:" in run.stderr
    assert "WARNING" not in run.stderr


def test_a_callable_a_binary_cannot_serve_is_still_warned_about_when_serving() -> None:
    run = bridge(str(THUMP))
    warnings = [line for line in run.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 7 and all("skipping callable thump." in line for line in warnings)


@pytest.mark.parametrize("flags", [[], ["--http", "127.0.0.1:0"]], ids=["stdio", "http"])
def test_ctrl_c_of_the_server_is_not_a_warning(flags: list[str]) -> None:
    process = subprocess.Popen(
        [*korg_bridge(), str(THUMP), *flags],
        stdin=subprocess.PIPE,  # held open: the server waits for a client
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=REPO,
    )
    assert process.stderr is not None
    started = "serving MCP on" if flags else "korg-bridge: serving"
    seen = ""
    try:
        while started not in seen:  # bounded by the timeout of communicate() below on failure
            line = process.stderr.readline()
            assert line, seen
            seen += line
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    stderr = seen + rest
    assert "WARNING" not in stderr.replace("WARNING: skipping callable", ""), stderr
    assert "Traceback" not in stderr


# --- korg-bridge's own errors --------------------------------------------------------------------


def test_an_unknown_flag_is_one_line_and_exit_2() -> None:
    run = bridge(str(THUMP), "--no-such-flag")
    assert run.returncode == 2
    assert one_error_line(run.stderr) == (
        "korg-bridge: error: unknown option --no-such-flag. See 'korg-bridge --help'."
    )
    assert run.stdout == ""


def test_a_mistyped_flag_is_named_with_the_flag_it_meant() -> None:
    run = bridge(str(THUMP), "--alow", "fs_write")
    assert run.returncode == 2
    assert one_error_line(run.stderr) == (
        "korg-bridge: error: unknown option --alow (did you mean --allow?). See 'korg-bridge --help'."
    )


@pytest.mark.parametrize("mode", [[], ["--list-tools"]], ids=["server", "list-tools"])
def test_an_unknown_allow_value_stops_the_bridge_with_exit_2(mode: list[str]) -> None:
    run = bridge(str(THUMP), *mode, "--allow", "fs_writ")
    assert run.returncode == 2 and run.stdout == ""
    line = one_error_line(run.stderr)
    assert '--allow has an unknown value "fs_writ" (did you mean fs_write?)' in line
    assert "fs_write, network, ledger_write, or all" in line
    assert "WARNING" not in run.stderr


def test_an_unknown_value_of_the_allow_variable_is_a_config_error_exit_3() -> None:
    run = bridge(str(THUMP), "--list-tools", env={"KORG_INTROSPECT_MCP_ALLOW": "network,fs-write"})
    assert run.returncode == 3
    assert 'KORG_INTROSPECT_MCP_ALLOW has an unknown value "fs-write" (did you mean fs_write?)' in (
        one_error_line(run.stderr)
    )


@pytest.mark.skipif(shutil.which("ls") is None, reason="needs ls on PATH")
def test_a_binary_that_is_not_introspect_aware_is_named_as_such_with_exit_3() -> None:
    run = bridge("ls", "--list-tools")
    assert run.returncode == 3
    line = one_error_line(run.stderr)
    assert line.startswith(
        "korg-bridge: error: ls is not a korg:introspect@v1 binary (`ls --introspect` exited "
    )
    assert "printed no JSON" in line


def test_help_examples_use_binaries_that_exist_after_install() -> None:
    run = bridge("--help")
    assert run.returncode == 0
    assert "korg-bridge thump" not in run.stdout
    assert "korg-bridge korg-recall --list-tools" in " ".join(run.stdout.split())


# --- --list-tools refuses what the server would ---------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "code", "phrase"),
    [
        (["--http", "0.0.0.0:1"], 3, "refusing to listen on 0.0.0.0 without a token"),
        (["--http", "nonsense:port"], 2, "invalid --http value"),
        (["--http", "1", "--token-file", "/no/such/token"], 3, "/no/such/token"),
        (["--audit", "/no/such/folder/audit.jsonl"], 3, "audit log folder /no/such/folder does not exist"),
        (["--audit", "/"], 3, "is a folder"),
        (["--audit", "/dev/null"], 3, "is not a regular file"),
    ],
    ids=[
        "http-without-token",
        "bad-listen",
        "missing-token-file",
        "audit-folder-missing",
        "audit-dir",
        "device",
    ],
)
@pytest.mark.parametrize("mode", [[], ["--list-tools"]], ids=["server", "list-tools"])
def test_list_tools_fails_exactly_as_the_server_would(
    flags: list[str], code: int, phrase: str, mode: list[str]
) -> None:
    run = bridge(str(THUMP), *mode, *flags)
    assert run.returncode == code
    assert phrase in one_error_line(run.stderr)
    assert run.stdout == ""


def test_list_tools_checks_the_audit_variable_too(tmp_path: Path) -> None:
    run = bridge(str(THUMP), "--list-tools", env={"KORG_BRIDGE_AUDIT": str(tmp_path / "none" / "a.jsonl")})
    assert run.returncode == 3
    assert "does not exist" in one_error_line(run.stderr)


def test_list_tools_creates_and_changes_nothing(tmp_path: Path) -> None:
    absent = tmp_path / "new.jsonl"
    torn = tmp_path / "torn.jsonl"
    content = b'{"schema_version": "1.0", "seq_id": 1, "sou'
    torn.write_bytes(content)
    for path in (absent, torn):
        run = bridge(str(THUMP), "--list-tools", "--audit", str(path))
        assert run.returncode == 0, run.stderr
    assert not absent.exists()
    assert torn.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["torn.jsonl"]


# --- korg-recall's messages, through its entry point ---------------------------------------------


def recall(*args: str) -> subprocess.CompletedProcess[str]:
    return run_recall(*args, env={"KORG_RECALL_LEDGER": "/nonexistent"})


def test_korg_recall_reports_every_problem_at_once_in_flag_terms() -> None:
    run = recall("recall", "--top-n", "x", "--mode", "loud", "--min-score", "2", "--bogus", "1", "stray")
    assert run.returncode == 2
    line = one_error_line(run.stderr, "korg-recall")
    for phrase in (
        "invalid arguments for korg-recall recall: ",
        "--query is required",
        '--top-n must be an integer, got "x"',
        '--mode must be one of auto, substring, keyword, semantic, hybrid, got "loud"',
        "--min-score must be at most 1.0, got 2",
        "unknown option --bogus",
        'unexpected argument "stray"',
        "See 'korg-recall recall --help'.",
    ):
        assert phrase in line, line
    for python in ("$", "'query'", "None", "is not of type", "required property"):
        assert python not in line, line


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["nope"], 'unknown command "nope"; choose from recall, show'),
        (["recall", "--query"], "--query needs a value"),
        (["recall", "--query", "x", "--json=yes"], '--json takes no value, got "yes"'),
        (
            ["recall", "--query", "x", "--weights", '{"vector": -1, "x": 0}'],
            '--weights has an unknown key "x"',
        ),
        (["recall", "--qeury", "x"], "unknown option --qeury (did you mean --query?)"),
    ],
    ids=["unknown-command", "missing-value", "value-for-a-switch", "nested-object", "typo"],
)
def test_korg_recall_usage_errors_are_one_line_of_cli_advice(args: list[str], phrase: str) -> None:
    run = recall(*args)
    assert run.returncode == 2
    assert phrase in one_error_line(run.stderr, "korg-recall")
