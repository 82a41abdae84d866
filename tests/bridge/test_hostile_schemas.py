"""Hostile schemas and outputs (``fixture_bins/hostile``), over stdio through the SDK's
real client: nothing on the call path escapes, crashes or blocks the bridge."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from korg_bridge.bridge.validation import OVERRUN_GRACE, VALIDATION_TIME_LIMIT
from tests.helpers.bridge_client import CALL_BOUND, FIXTURE_BINS, Bridge, open_bridge, run_cli, text_of

pytestmark = pytest.mark.anyio

HOSTILE = FIXTURE_BINS / "hostile"
SERVED = {
    "hostile.redos",
    "hostile.lookahead",
    "hostile.keys",
    "hostile.regexformat",
    "hostile.nestedgroups",
    "hostile.tree",
    "hostile.deep",
    "hostile.deepshaped",
    "hostile.slowcheck",
}
SKIPPED = {
    "hostile.hugerepeat": "repeats 99,999,999,999 times",
    "hostile.badre": "is not a valid regular expression",
    "hostile.refcycle": "refers back to itself through $ref",
    "hostile.refmissing": "'#/$defs/nope' cannot be resolved",
    "hostile.refremote": "'https://example.invalid/schema.json' cannot be resolved",
    "hostile.uneval": "combines unevaluatedProperties with patternProperties",
    "hostile.badoutput": "output_schema",
    "hostile.run\n": "command_id segment 'run\\n' is not a safe subcommand word",
    "hostile.newlineprop": "property 'name\\n' cannot be a command-line flag",
}
PATHOLOGICAL = "a" * 40 + "!"
"""Against ``^(a|aa)+(?=b)`` a backtracking engine tries every split of the a's: minutes."""

VALIDATION_BOUND = VALIDATION_TIME_LIMIT + OVERRUN_GRACE + 10
"""How long a pathological validation may take to become an error, with room for a busy machine."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def hostile(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Bridge, Path]]:
    ledger = tmp_path_factory.mktemp("hostile-audit") / "audit.jsonl"
    async with open_bridge(HOSTILE, "--timeout", "3", "--audit", str(ledger)) as bridge:
        yield bridge, ledger


def _audit_entries(ledger: Path, command_id: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    return [e for e in events if e["tool_name"] == command_id]


def test_bad_schemas_skip_their_callable_with_a_reason_and_never_the_server() -> None:
    done = run_cli([str(HOSTILE), "--list-tools", "--json"])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    tools = {t["command_id"]: t for t in json.loads(done.stdout)["tools"]}
    assert {cid for cid, t in tools.items() if t["status"] == "allowed"} == SERVED
    for command_id, phrase in SKIPPED.items():
        assert tools[command_id]["status"] == "skipped", command_id
        assert phrase in tools[command_id]["reason"], (command_id, tools[command_id]["reason"])


async def test_names_ending_in_a_newline_never_reach_the_tool_list(hostile: tuple[Bridge, Path]) -> None:
    bridge, _ = hostile
    with anyio.fail_after(CALL_BOUND):
        tools = (await bridge.client.list_tools()).tools
    assert {t.title for t in tools} == SERVED
    assert not any("\n" in json.dumps(t.input_schema) or "\n" in t.name for t in tools)


async def test_a_pattern_that_backtracks_forever_elsewhere_is_linear_here(
    hostile: tuple[Bridge, Path],
) -> None:
    bridge, _ = hostile
    with anyio.fail_after(CALL_BOUND):
        refused = await bridge.client.call_tool("hostile_redos", {"name": "a" * 30 + "!"})
        accepted = await bridge.client.call_tool("hostile_redos", {"name": "a" * 30})
    assert refused.is_error
    assert text_of(refused).endswith(f'name must match the pattern "^(a+)+$", got "{"a" * 30}!"')
    assert not accepted.is_error and json.loads(text_of(accepted)) == {"name": "a" * 30}


async def test_other_requests_stay_responsive_while_one_validation_is_pathological(
    hostile: tuple[Bridge, Path],
) -> None:
    bridge, ledger = hostile
    finished: dict[str, float] = {}
    results: dict[str, Any] = {}

    async def request(key: str, name: str | None, arguments: dict[str, Any] | None = None) -> None:
        if name is None:
            results[key] = await bridge.client.list_tools()
        else:
            results[key] = await bridge.client.call_tool(name, arguments)
        finished[key] = time.monotonic()

    started = time.monotonic()
    with anyio.fail_after(VALIDATION_BOUND + CALL_BOUND):
        async with anyio.create_task_group() as tg:
            # Tasks start in order, so the pathological request is written first.
            tg.start_soon(request, "slow", "hostile_lookahead", {"name": PATHOLOGICAL})
            tg.start_soon(request, "list", None)
            tg.start_soon(request, "quick", "hostile_redos", {"name": "aaa"})
            tg.start_soon(request, "refused", "hostile_redos", {"name": 5})
    tools = results["list"]

    assert tools.tools and not results["quick"].is_error and results["refused"].is_error
    # Everything else was answered while the pathological call was still being checked.
    assert max(finished["list"], finished["quick"], finished["refused"]) < finished["slow"]
    slow = results["slow"]
    assert slow.is_error
    assert text_of(slow) == (
        "cannot check the arguments for hostile.lookahead: argument validation took longer than "
        f"{VALIDATION_TIME_LIMIT:g} s (pattern '^(a|aa)+(?=b)' at name is too expensive for this value); "
        "nothing was run"
    )
    assert finished["slow"] - started < VALIDATION_BOUND
    [entry] = _audit_entries(ledger, "hostile.lookahead")
    assert entry["success"] is False and "too expensive" in entry["result"]["reason"]


async def test_a_pathological_property_name_is_bounded_too(hostile: tuple[Bridge, Path]) -> None:
    bridge, _ = hostile
    with anyio.fail_after(VALIDATION_BOUND):
        result = await bridge.client.call_tool("hostile_keys", {"opts": {PATHOLOGICAL: "x"}})
    assert result.is_error and "too expensive for this value" in text_of(result)
    assert "nothing was run" in text_of(result)


async def test_a_regex_format_value_python_cannot_compile_is_an_invalid_argument(
    hostile: tuple[Bridge, Path],
) -> None:
    bridge, _ = hostile
    with anyio.fail_after(CALL_BOUND):
        huge = await bridge.client.call_tool("hostile_regexformat", {"expr": "a{99999999999}"})
        nested = await bridge.client.call_tool("hostile_regexformat", {"expr": "(" * 3000})
        fine = await bridge.client.call_tool("hostile_regexformat", {"expr": "^a+$"})
    assert huge.is_error and text_of(huge).endswith('expr must be a valid regex, got "a{99999999999}"')
    assert nested.is_error and "expr must be a valid regex" in text_of(nested)
    assert not fine.is_error


async def test_thousands_of_nested_groups_are_served_by_the_linear_engine(
    hostile: tuple[Bridge, Path],
) -> None:
    bridge, _ = hostile
    with anyio.fail_after(CALL_BOUND):
        result = await bridge.client.call_tool("hostile_nestedgroups", {"name": "a"})
    assert not result.is_error


async def test_arguments_nested_too_deep_to_validate_are_refused_by_name(
    hostile: tuple[Bridge, Path],
) -> None:
    bridge, _ = hostile
    tree: dict[str, Any] = {}
    for _ in range(100):
        tree = {"child": tree}
    with anyio.fail_after(CALL_BOUND):
        result = await bridge.client.call_tool("hostile_tree", {"tree": tree})
    assert result.is_error
    assert text_of(result) == (
        "the arguments for hostile.tree are nested deeper than 64 levels; flatten them. Nothing was run."
    )


async def test_json_too_deep_for_any_client_comes_back_as_raw_text(hostile: tuple[Bridge, Path]) -> None:
    bridge, ledger = hostile
    raw = '{"a":' * 400 + "1" + "}" * 400
    with anyio.fail_after(CALL_BOUND):
        plain = await bridge.client.call_tool("hostile_deep", {})
        shaped = await bridge.client.call_tool("hostile_deepshaped", {})
    assert not plain.is_error and plain.structured_content is None
    assert text_of(plain).strip() == raw
    assert shaped.is_error and shaped.structured_content is None
    assert "cannot be returned as structured content (its JSON is nested deeper than 100 levels)" in text_of(
        shaped
    )
    assert raw in text_of(shaped)
    [entry] = _audit_entries(ledger, "hostile.deepshaped")
    assert entry["result"]["exit_code"] == 0 and entry["result"]["output_bytes"] > 0


async def test_an_output_check_that_runs_out_of_time_returns_the_output_and_is_audited_as_run(
    hostile: tuple[Bridge, Path],
) -> None:
    bridge, ledger = hostile
    with anyio.fail_after(VALIDATION_BOUND + CALL_BOUND):
        result = await bridge.client.call_tool("hostile_slowcheck", {})
    assert result.is_error and result.structured_content is None
    text = text_of(result)
    assert text.startswith(
        "hostile.slowcheck ran and exited 0, but its output could not be checked against its "
        "output_schema: checking the output took longer than 3 s (pattern '^(a|aa)+(?=b)' at text"
    )
    assert json.loads(text.split("The output, unchecked:\n", 1)[1]) == {"text": PATHOLOGICAL}
    [entry] = _audit_entries(ledger, "hostile.slowcheck")
    assert entry["success"] is False
    assert entry["result"]["exit_code"] == 0 and PATHOLOGICAL in entry["result"]["output"]


def test_a_name_with_a_newline_cannot_break_the_table_or_a_log_line() -> None:
    done = run_cli([str(HOSTILE), "--list-tools"])
    assert done.returncode == 0, done.stderr
    table = done.stdout.split("\n\n")[1].splitlines()  # between the policy line and the summary
    assert table[0].startswith("TOOL")
    assert all(row.startswith(("hostile_", "- ")) for row in table[1:]), table
    assert any("'hostile.run\\n'" in row for row in table)
    assert done.stderr == ""  # the table says why; the server logs it
    served = subprocess.run(
        [sys.executable, "-m", "korg_bridge", str(HOSTILE)],
        stdin=subprocess.DEVNULL,  # at EOF: the server starts, logs, and ends
        capture_output=True,
        text=True,
        cwd=FIXTURE_BINS.parent,
        timeout=60,
        check=False,
    )
    warnings = [line for line in served.stderr.splitlines() if "WARNING" in line]
    assert all(line.startswith("korg-bridge: WARNING: skipping callable") for line in warnings)
    assert any("'hostile.run\\n'" in line for line in warnings)
