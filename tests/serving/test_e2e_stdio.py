"""End to end: ``korg-bridge fixture_bins/thump`` as a subprocess, driven over
stdio by the MCP SDK's real client, exactly as an MCP host would run it."""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.helpers.bridge_client import (
    BROKEN,
    CALL_BOUND,
    REPO,
    THUMP,
    THUMP_SKIPPED,
    Bridge,
    child_env,
    introspect,
    is_dead,
    open_bridge,
    read_pid,
    text_of,
    wait_dead,
    wait_for_file,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so one bridge can serve the many tests that need no special flags."""
    return "asyncio"


@pytest.fixture(scope="module")
def bridge_cwd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bridge-cwd")


@pytest.fixture(scope="module")
async def default_bridge(bridge_cwd: Path) -> AsyncIterator[Bridge]:
    """A bridge with default flags and policy, shared because starting one costs
    a second (Python plus the MCP SDK); tests needing other flags start their own."""
    async with open_bridge(THUMP, cwd=bridge_cwd) as bridge:
        yield bridge


@pytest.fixture(scope="module")
async def fs_write_bridge(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bridge]:
    async with open_bridge(
        THUMP, "--allow", "fs_write", cwd=tmp_path_factory.mktemp("fs-write-cwd")
    ) as bridge:
        yield bridge


NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ENV_VAR = "KORG_INTROSPECT_MCP_ALLOW"
ECHO_PROPS = ("query", "top_n", "ratio", "quiet", "tags", "config", "mode", "count")


def _echo_args(text: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(text)["args"]
    return parsed


# --- tools/list ------------------------------------------------------------


async def test_tools_list_serves_every_servable_callable_with_its_schema_verbatim(
    default_bridge: Bridge,
) -> None:
    document = introspect(THUMP)
    servable = [c for c in document["callables"] if c["command_id"] not in THUMP_SKIPPED]
    with anyio.fail_after(CALL_BOUND):
        tools = (await default_bridge.client.list_tools()).tools
    assert default_bridge.client.protocol_version == "2026-07-28"
    server_info = default_bridge.client.server_info
    stderr = default_bridge.stderr()

    assert server_info is not None and server_info.name == "korg-bridge:thump"
    by_title = {tool.title: tool for tool in tools}
    assert [tool.title for tool in tools] == [c["command_id"] for c in servable]
    assert not THUMP_SKIPPED & set(by_title)
    for cid in THUMP_SKIPPED:
        assert f"skipping callable {cid}" in stderr
    for entry in servable:
        tool = by_title[entry["command_id"]]
        caps = entry["capabilities"]
        assert NAME_RE.match(tool.name), tool.name
        assert tool.name == entry["command_id"].replace(".", "_")
        assert tool.input_schema == entry["input_schema"]
        long_running = "true" if caps.get("long_running") else "false"
        assert tool.description == (
            f"{entry['description']} [side_effects: {caps.get('side_effects', 'unspecified')}, "
            f"output_mode: {caps['output_mode']}, long_running: {long_running}]"
        )
        assert tool.meta is not None and tool.meta["dev.korg/command_id"] == entry["command_id"]
    # Denied tools are listed (so the model learns why), flagged in _meta.
    for cid in ("thump.touch", "thump.fetch", "thump.append", "thump.mystery", "thump.nofx", "thump.shell"):
        meta = by_title[cid].meta
        assert meta is not None and meta["dev.korg/allowed"] is False
        assert meta["dev.korg/denied"]
    echo_meta = by_title["thump.echo"].meta
    assert echo_meta is not None and echo_meta["dev.korg/allowed"] is True


async def test_a_tool_can_be_called_by_its_command_id_as_well_as_its_safe_name(
    default_bridge: Bridge,
) -> None:
    client = default_bridge.client
    with anyio.fail_after(CALL_BOUND):
        by_name = await client.call_tool("thump_bun_script_run", {"name": "build"})
        by_id = await client.call_tool("thump.bun.script.run", {"name": "build"})
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("thump_nope", {})
        # The bridge survives an unknown tool and keeps answering.
        after = await client.call_tool("thump_say", {"text": "alive"})
    assert text_of(by_name) == text_of(by_id) == "ran bun script build\n"
    assert not by_name.is_error and not by_id.is_error
    assert text_of(after) == "alive\n"


async def test_tool_names_command_id_keeps_command_ids_as_names() -> None:
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP, "--tool-names", "command-id") as bridge:
            tools = (await bridge.client.list_tools()).tools
            result = await bridge.client.call_tool("thump.echo", {"query": "dotted"})
    assert all(tool.name == tool.title for tool in tools)
    assert "thump.bun.script.run" in {tool.name for tool in tools}
    assert _echo_args(text_of(result))["query"] == "dotted"


async def test_legacy_initialize_handshake_serves_the_same_tools() -> None:
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP, mode="legacy") as bridge:
            assert bridge.client.protocol_version.startswith("2025-")
            tools = (await bridge.client.list_tools()).tools
            result = await bridge.client.call_tool("thump_echo", {"query": "legacy"})
    assert len(tools) == 18
    assert not result.is_error
    assert _echo_args(text_of(result))["query"] == "legacy"


# --- arguments --------------------------------------------------------------

HOSTILE_ARGUMENTS: list[dict[str, Any]] = [
    {"query": "--rm -rf"},
    {"query": "-"},
    {"query": "-- x"},
    {"query": "x", "tags": ["-b", "--c=d", "plain", ""]},
    {"query": "x", "top_n": -5, "ratio": -2.5},
    {"query": "key=value=more"},
    {"query": "  spaces  and\ttabs "},
    {"query": "line one\nline two"},
    {"query": "héllo ☃ 𝄞 日本語"},
    {"query": ""},
    {"query": "$(touch pwned); `id` | rm *"},
    {"query": "x", "config": {"k": [1, "-x"], "nested": {"a": None, "s": "--z"}}},
    {"query": "x", "quiet": True, "mode": "fast", "count": 0},
    {"query": "x", "ratio": 5, "top_n": 0},
]


async def test_hostile_values_reach_the_binary_as_values(default_bridge: Bridge, bridge_cwd: Path) -> None:
    client = default_bridge.client
    with anyio.fail_after(CALL_BOUND):
        results = [await client.call_tool("thump_echo", args) for args in HOSTILE_ARGUMENTS]
        false_flag = await client.call_tool("thump_echo", {"query": "x", "quiet": False})
        double_dash = await client.call_tool("thump_echo", {"query": "--"})
    for sent, result in zip(HOSTILE_ARGUMENTS, results, strict=True):
        assert not result.is_error, (sent, text_of(result))
        echoed = json.loads(text_of(result))
        assert echoed["args"] == {prop: sent.get(prop) for prop in ECHO_PROPS}, sent
        assert echoed["argv"][0] == "echo"
    assert _echo_args(text_of(false_flag))["quiet"] is None  # false is "not passed"
    # Python 3.11's argparse reads "--query=--" as an empty list (fixed in 3.12),
    # so for a bare "--" check what the bridge sent: the attached form.
    assert json.loads(text_of(double_dash))["argv"] == ["echo", "--query=--"]
    assert list(bridge_cwd.iterdir()) == []  # no shell ever ran


async def test_invalid_arguments_are_refused_before_anything_runs(
    fs_write_bridge: Bridge, tmp_path: Path
) -> None:
    client = fs_write_bridge.client
    target = tmp_path / "touched"
    stamps = tmp_path / "stamps"
    with anyio.fail_after(CALL_BOUND):
        wrong_type = await client.call_tool("thump_touch", {"path": str(target), "message": 5})
        undeclared = await client.call_tool("thump_touch", {"path": str(target), "bogus": 1})
        nul = await client.call_tool("thump_touch", {"path": str(target), "message": "a\x00b"})
        slept = await client.call_tool("thump_sleep", {"stamp_file": str(stamps), "seconds": "soon"})
        many = await client.call_tool(
            "thump_echo", {"query": 5, "count": 500, "mode": "medium", "tags": ["ok", 3]}
        )
        missing = await client.call_tool("thump_echo", {})
        assert not target.exists() and not stamps.exists()
        valid = await client.call_tool("thump_touch", {"path": str(target)})

    for result in (wrong_type, undeclared, nul, slept, many, missing):
        assert result.is_error
    assert "message must be a string, got 5" in text_of(wrong_type)
    assert "nothing was run" in text_of(wrong_type)
    assert 'unknown argument "bogus" (known: path, message)' in text_of(undeclared)
    assert "NUL" in text_of(nul)
    assert 'seconds must be a number, got "soon"' in text_of(slept)
    text = text_of(many)
    for phrase in (
        "query must be a string, got 5",
        "count must be at most 100, got 500",
        'mode must be one of "fast", "slow", got "medium"',
        "tags[1] must be a string, got 3",
    ):
        assert phrase in text, phrase
    assert text_of(missing).endswith("(nothing was run): query is required")
    # The same call with valid arguments does run: the refusals above were real.
    assert not valid.is_error and text_of(valid) == "ok"
    assert target.exists()


# --- policy -----------------------------------------------------------------

POLICY_CASES = {
    # id: (env value or None, extra flags, side effects expected to run)
    "default": (None, [], set()),
    "env-whitespace-and-case": (" FS_WRITE , network ", [], {"fs_write", "network"}),
    "env-all": ("all", [], {"fs_write", "network", "ledger_write", "teleport", "unspecified"}),
    "env-star": ("*", [], {"fs_write", "network", "ledger_write", "teleport", "unspecified"}),
    "allow-flag-overrides-env": ("all", ["--allow", "network"], {"network"}),
    "empty-allow-flag-overrides-env": ("all", ["--allow", ""], set()),
}
GRANTABLE = ("fs_write", "network", "ledger_write")
GATED = {
    # side effect: (tool, arguments, text when it runs)
    "fs_write": ("thump_touch", {"path": "touched"}, "ok"),
    "network": (
        "thump_fetch",
        {"url": "https://example.invalid/"},
        '{\n  "fetched": "https://example.invalid/"\n}',
    ),
    "ledger_write": ("thump_append", {}, "appended\n"),
    "teleport": ("thump_mystery", {}, "mystery ran\n"),
    "unspecified": ("thump_nofx", {}, "nofx ran\n"),
}


@pytest.mark.parametrize("case", list(POLICY_CASES))
async def test_side_effect_policy_allows_exactly_what_it_names(case: str, tmp_path: Path) -> None:
    env_value, flags, expected = POLICY_CASES[case]
    env = {ENV_VAR: env_value} if env_value is not None else {}
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP, *flags, env=env, cwd=tmp_path) as bridge:
            meta = {t.title: t.meta or {} for t in (await bridge.client.list_tools()).tools}
            outcomes = {
                effect: await bridge.client.call_tool(tool, args) for effect, (tool, args, _) in GATED.items()
            }
            shell = await bridge.client.call_tool("thump_shell", {})
            echo = await bridge.client.call_tool("thump_echo", {"query": "free"})

    assert not echo.is_error  # side_effects none always runs
    for effect, result in outcomes.items():
        tool, _, ran_text = GATED[effect]
        if effect in expected:
            assert not result.is_error, (effect, text_of(result))
            assert text_of(result) == ran_text
            continue
        assert result.is_error, effect
        denial = text_of(result)
        assert denial.startswith("denied: "), denial
        assert meta[tool.replace("_", ".")]["dev.korg/allowed"] is False
        if effect in GRANTABLE:
            # The denial names the exact value that would allow it: what is
            # granted now plus this effect, in the documented order.
            needed = ",".join(e for e in GRANTABLE if e in expected or e == effect)
            assert f"{ENV_VAR}={needed} (or pass --allow {needed})" in denial
        else:
            assert f"{ENV_VAR}=all (or pass --allow all)" in denial
    assert (tmp_path / "touched").exists() == ("fs_write" in expected)
    # A session is refused even under "all", with the reason.
    assert shell.is_error
    assert "interactive session" in text_of(shell) and f"even with {ENV_VAR}=all" in text_of(shell)
    # (An unknown token is an error before the server starts: tests/test_first_contact.py.)


# --- output -----------------------------------------------------------------


async def test_each_output_mode_shapes_the_text_as_documented(fs_write_bridge: Bridge) -> None:
    client = fs_write_bridge.client
    with anyio.fail_after(CALL_BOUND):
        envelope = await client.call_tool("thump_echo", {"query": "é"})
        not_json = await client.call_tool("thump_notjson", {})
        stream = await client.call_tool("thump_say", {"text": "  a  ", "repeat": 3})
        none_text = await client.call_tool("thump_touch", {"message": "hello"})
        none_empty = await client.call_tool("thump_touch", {})
        weird = await client.call_tool("thump_weird", {})
        env = await client.call_tool("thump_env", {"name": "NOT_SET_ANYWHERE"})

    text = text_of(envelope)
    assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    assert '"query": "é"' in text  # pretty-printed, not ASCII-escaped
    assert text_of(not_json) == "not json at all\n"
    assert text_of(stream) == "  a  \n  a  \n  a  \n"
    assert text_of(none_text) == "hello"
    assert text_of(none_empty) == "ok"
    assert text_of(weird) == '  raw {"x": 1}  \n'
    assert text_of(env) == '{\n  "value": null\n}'
    for result in (envelope, not_json, stream, none_text, none_empty, weird, env):
        assert not result.is_error


async def test_a_non_zero_exit_is_an_error_with_stdout_stderr_and_the_code_meaning(
    default_bridge: Bridge,
) -> None:
    client = default_bridge.client
    with anyio.fail_after(CALL_BOUND):
        usage = await client.call_tool("thump_fail", {"code": 2})
        custom = await client.call_tool("thump_fail", {"code": 9})
        unknown = await client.call_tool("thump_fail", {"code": 42})
        quiet_stderr = await client.call_tool("thump_say", {"text": "fine", "stderr": "a warning"})
        stderr_only = await client.call_tool("thump_say", {"text": "", "stderr": "only here", "exit_code": 3})
    assert usage.is_error and custom.is_error and unknown.is_error
    assert text_of(usage) == "partial output\n[stderr]\nsomething broke\n[exit_code] 2 (error.usage)"
    assert text_of(custom).endswith("[exit_code] 9 (error.thump_custom)")
    assert text_of(unknown).endswith("[exit_code] 42 (unknown)")
    # Success shows stdout only; stderr is for failures.
    assert not quiet_stderr.is_error and text_of(quiet_stderr) == "fine\n"
    assert text_of(stderr_only) == "[stderr]\nonly here\n[exit_code] 3 (error.config)"


async def test_the_child_gets_dev_null_as_stdin_not_the_protocol_pipe(default_bridge: Bridge) -> None:
    with anyio.fail_after(CALL_BOUND):
        result = await default_bridge.client.call_tool("thump_stdin", {})
        # The protocol still works afterwards: the child stole nothing.
        after = await default_bridge.client.call_tool("thump_say", {"text": "after"})
    assert not result.is_error, text_of(result)
    assert "stdin: 0 bytes" in text_of(result)
    assert "stdin-is-devnull: true" in text_of(result)
    assert text_of(after) == "after\n"


async def test_non_utf8_output_becomes_replacement_characters(default_bridge: Bridge) -> None:
    with anyio.fail_after(CALL_BOUND):
        result = await default_bridge.client.call_tool("thump_binary", {})
    assert not result.is_error
    assert text_of(result) == "café ok \ufffd\ufffd bad \ufffd end\n"


async def test_a_flood_is_capped_and_the_bridge_memory_stays_bounded() -> None:
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge() as bridge:
            result = await bridge.client.call_tool("thump_flood", {"mb": 64})
            peak = bridge.peak_rss_bytes()
    text = text_of(result)
    mib = 1024 * 1024
    assert not result.is_error
    assert 8 * mib <= len(text) <= 8 * mib + 200
    assert text.startswith("x" * 1023 + "\n")
    assert text.endswith(
        "\n[korg-bridge: stdout truncated: showing the first 8.0 MiB, 56.0 MiB more were discarded]"
    )
    assert peak < 200 * 1000 * 1000, f"bridge peak RSS {peak / mib:.0f} MiB"


# --- time: timeouts, cancellation, daemons, concurrency ---------------------


async def test_a_call_over_the_timeout_is_an_error_and_its_whole_group_dies(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP, "--timeout", "1") as bridge:
            result = await bridge.client.call_tool("thump_sleep", {"seconds": 30, "pid_file": str(pid_file)})
            pids = [read_pid(pid_file), read_pid(Path(f"{pid_file}.grandchild"))]
            await wait_dead(pids, timeout=10)
            after = await bridge.client.call_tool("thump_say", {"text": "next"})
    assert result.is_error
    assert "[timeout] the call did not finish within 1 s" in text_of(result)
    assert text_of(after) == "next\n"


async def test_cancelling_a_call_kills_its_process_group_and_the_bridge_keeps_serving(
    default_bridge: Bridge, tmp_path: Path
) -> None:
    client = default_bridge.client
    pid_file = tmp_path / "pid"
    outcome: list[object] = []
    scope = anyio.CancelScope()

    async def long_call() -> None:
        with scope:
            outcome.append(await client.call_tool("thump_sleep", {"seconds": 30, "pid_file": str(pid_file)}))

    with anyio.fail_after(CALL_BOUND):
        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            await wait_for_file(pid_file)
            pids = [read_pid(pid_file), read_pid(Path(f"{pid_file}.grandchild"))]
            assert not any(is_dead(pid) for pid in pids)
            scope.cancel()  # the SDK sends notifications/cancelled
        await wait_dead(pids, timeout=10)
        after = await client.call_tool("thump_echo", {"query": "still here"})
    assert outcome == []  # the cancelled call never produced a result
    assert _echo_args(text_of(after))["query"] == "still here"


async def test_a_daemonising_child_does_not_hold_the_call_open(
    default_bridge: Bridge, tmp_path: Path
) -> None:
    pid_file = tmp_path / "daemon.pid"
    # The grandchild holds stdout for 60 s; the call must not wait for it.
    with anyio.fail_after(20):
        result = await default_bridge.client.call_tool(
            "thump_daemon", {"pid_file": str(pid_file), "seconds": 60}
        )
    await wait_dead([read_pid(pid_file)], timeout=10)
    assert not result.is_error
    assert text_of(result) == "daemon started\n"


def _intervals(stamp_file: Path) -> dict[str, tuple[float, float]]:
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for line in stamp_file.read_text().splitlines():
        what, label, when = line.split()
        (starts if what == "start" else ends)[label] = float(when)
    assert starts.keys() == ends.keys()
    return {label: (starts[label], ends[label]) for label in starts}


async def _four_sleeps(
    bridge_flags: list[str], stamp_file: Path, seconds: float
) -> dict[str, tuple[float, float]]:
    results: dict[str, Any] = {}
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP, *bridge_flags) as bridge:

            async def one(label: str) -> None:
                results[label] = await bridge.client.call_tool(
                    "thump_sleep", {"seconds": seconds, "stamp_file": str(stamp_file), "label": label}
                )

            async with anyio.create_task_group() as tg:
                for label in "abcd":
                    tg.start_soon(one, label)
    assert all(not r.is_error and text_of(r) == "slept\n" for r in results.values())
    return _intervals(stamp_file)


async def test_concurrent_calls_run_at_the_same_time(tmp_path: Path) -> None:
    # 1 s each: long enough that four interpreters surely start within it.
    intervals = await _four_sleeps([], tmp_path / "stamps", seconds=1)
    assert len(intervals) == 4
    latest_start = max(start for start, _ in intervals.values())
    earliest_end = min(end for _, end in intervals.values())
    assert latest_start < earliest_end, intervals


async def test_max_concurrency_one_runs_calls_one_after_another(tmp_path: Path) -> None:
    intervals = await _four_sleeps(["--max-concurrency", "1"], tmp_path / "stamps", seconds=0.5)
    ordered = sorted(intervals.values())
    assert len(ordered) == 4
    for (_, previous_end), (next_start, _) in itertools.pairwise(ordered):
        assert previous_end <= next_start, ordered


# --- unusual but valid documents ---------------------------------------------


async def test_dotted_and_long_command_ids_get_unique_valid_names_that_still_run() -> None:
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(BROKEN / "dotted-long") as bridge:
            tools = (await bridge.client.list_tools()).tools
            outputs = {t.title: text_of(await bridge.client.call_tool(t.name, {})) for t in tools}
    names = [t.name for t in tools]
    assert len(tools) == 3 and len(set(names)) == 3
    assert all(NAME_RE.match(name) for name in names), names
    assert {t.title for t in tools} == {"dotted-long.a.b", "dotted-long.a_b", "dotted-long." + "x" * 100}
    # Each tool reaches its own callable, even though two share a naive safe name.
    for title, output in outputs.items():
        assert output.strip() == title


async def test_a_binary_that_vanishes_after_discovery_is_an_error_result(tmp_path: Path) -> None:
    script = tmp_path / "vanish"
    document = {
        "schema": "korg:introspect@v1",
        "binary": "vanish",
        "callables": [
            {
                "command_id": "vanish.hi",
                "name": "hi",
                "input_schema": {"type": "object", "properties": {}},
                "capabilities": {"output_mode": "stream", "side_effects": "none"},
            }
        ],
    }
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"print({json.dumps(json.dumps(document))} if sys.argv[1:] == ['--introspect'] else 'hi')\n"
    )
    script.chmod(0o755)
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(script) as bridge:
            first = await bridge.client.call_tool("vanish_hi", {})
            script.unlink()
            gone = await bridge.client.call_tool("vanish_hi", {})
            tools = (await bridge.client.list_tools()).tools
    assert text_of(first) == "hi\n"
    assert gone.is_error
    assert text_of(gone).startswith(f"could not start {script}: ")
    assert "Check that the binary still exists" in text_of(gone)
    assert [t.name for t in tools] == ["vanish_hi"]  # still serving


# --- the raw wire ----------------------------------------------------------


async def test_stdout_carries_only_json_rpc_messages() -> None:
    """A raw client over pipes: every stdout line is one JSON-RPC message, and
    the children's own output (and stdin) never touch the protocol stream."""
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "thump_say", "arguments": {"text": "child says hi", "stderr": "child stderr"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "thump_stdin", "arguments": {}},
        },
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "thump.fail", "arguments": {}},
        },
    ]
    env = child_env()
    wire: list[dict[str, Any]] = []  # every line the bridge wrote, in order
    answers: dict[int, dict[str, Any]] = {}
    with anyio.fail_after(CALL_BOUND):
        async with await anyio.open_process(
            [sys.executable, "-m", "korg_bridge", str(THUMP)], env=env, cwd=REPO, stderr=None
        ) as process:
            assert process.stdin is not None and process.stdout is not None
            buffer = b""
            for message in messages:
                await process.stdin.send(json.dumps(message).encode() + b"\n")
                while "id" in message and message["id"] not in answers:
                    while b"\n" not in buffer:
                        buffer += await process.stdout.receive()
                    line, buffer = buffer.split(b"\n", 1)
                    wire.append(json.loads(line))  # a non-JSON line fails here
                    if "id" in wire[-1]:
                        answers[wire[-1]["id"]] = wire[-1]
            await process.stdin.aclose()
            async for chunk in process.stdout:
                buffer += chunk
            assert await process.wait() == 0
    wire.extend(json.loads(line) for line in buffer.splitlines() if line.strip())
    assert all(m.get("jsonrpc") == "2.0" for m in wire), wire
    assert sorted(answers) == [1, 2, 3, 4, 5]
    assert all("result" in m for m in answers.values())
    assert answers[3]["result"]["content"][0]["text"] == "child says hi\n"
    assert "stdin: 0 bytes" in answers[4]["result"]["content"][0]["text"]
    assert answers[5]["result"]["isError"] is True
