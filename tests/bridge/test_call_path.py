"""The call path as a client meets it: refusals are plain tool errors (never a
JSON-RPC error), worded as advice, with string-typed values read where
unambiguous, and arguments the kernel would refuse named before ``exec``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from korg_bridge import BridgeOptions, Policy, build_server, discover
from korg_bridge.bridge.argv import MAX_ARG_STRLEN
from korg_bridge.serving.audit import AuditLog
from tests.helpers.bridge_client import CALL_BOUND, THUMP, open_bridge, text_of

pytestmark = pytest.mark.anyio


def _events(ledger: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


async def _in_process(**options: Any) -> Client:
    document = await discover(str(THUMP))
    return Client(build_server(document, BridgeOptions(policy=Policy(), **options)))


# --- item 1: nothing becomes a code-0 JSON-RPC error -------------------------------------------


async def test_invalid_arguments_with_a_progress_token_are_a_plain_tool_error_and_audited(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "audit.jsonl"
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP, "--audit", str(ledger)) as bridge:
            invalid = await bridge.client.call_tool("thump_say", {}, progress_callback=on_progress)
            slept = await bridge.client.call_tool(
                "thump_sleep", {"seconds": "soon"}, progress_callback=on_progress
            )
            valid = await bridge.client.call_tool(
                "thump_say", {"text": "still here"}, progress_callback=on_progress
            )
            stderr = bridge.stderr()
    assert (
        invalid.is_error
        and text_of(invalid) == "invalid arguments for thump.say (nothing was run): text is required"
    )
    assert slept.is_error and 'seconds must be a number, got "soon"' in text_of(slept)
    assert not valid.is_error and text_of(valid) == "still here\n"
    assert "Traceback" not in stderr and "TaskGroup" not in stderr
    events = _events(ledger)
    assert [(e["tool_name"], e["success"]) for e in events] == [
        ("thump.say", False),
        ("thump.sleep", False),
        ("thump.say", True),
    ]
    assert events[0]["result"]["reason"].endswith("text is required")


async def test_an_unforeseen_failure_becomes_an_error_result_naming_it_and_is_audited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A NUL in the child's environment makes subprocess raise ValueError, which
    # no branch of the call path expects: the last-resort guard must answer.
    ledger = tmp_path / "audit.jsonl"
    audit = AuditLog(ledger)
    with anyio.fail_after(CALL_BOUND):
        async with await _in_process(env={"BROKEN": "a\x00b"}, audit=audit) as client:
            plain = await client.call_tool("thump_say", {"text": "x"})
            with_progress = await client.call_tool(
                "thump_say", {"text": "x"}, progress_callback=lambda *_: anyio.sleep(0)
            )
    expected = "korg-bridge failed while running the binary for thump.say: ValueError: embedded null byte"
    assert plain.is_error and text_of(plain) == expected
    assert with_progress.is_error and text_of(with_progress) == expected
    assert expected in caplog.text and "Traceback" not in caplog.text  # the traceback is debug-only
    events = _events(ledger)
    assert [e["success"] for e in events] == [False, False]
    assert all(e["result"]["reason"] == expected for e in events)


# --- item 5: arguments over the kernel's limits ------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="MAX_ARG_STRLEN is Linux's")
async def test_an_argument_over_the_kernels_limit_is_named_and_nothing_runs() -> None:
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP) as bridge:
            long = await bridge.client.call_tool("thump_say", {"text": "x" * 200_000})
            dashed = await bridge.client.call_tool("thump_echo", {"query": "-" + "y" * 140_000})
            item = await bridge.client.call_tool("thump_echo", {"query": "q", "tags": ["a", "z" * 131_072]})
            fits = await bridge.client.call_tool("thump_say", {"text": "x" * (MAX_ARG_STRLEN - 1)})
    assert long.is_error and text_of(long) == (
        "--text is 200000 bytes; one command-line argument may be at most 131071 bytes. "
        "Pass less data (or a path to a file, if the tool takes one); nothing was run."
    )
    assert dashed.is_error and text_of(dashed).startswith("--query is 140009 bytes;")  # "--query=-yyy…"
    assert item.is_error and text_of(item).startswith("--tags item 1 is 131072 bytes;")
    assert not fits.is_error and len(text_of(fits)) == MAX_ARG_STRLEN


async def test_a_command_line_the_kernel_refuses_is_reported_as_too_long(tmp_path: Path) -> None:
    # A subcommand word over the per-string limit: exec itself fails with E2BIG.
    word = "w" * (MAX_ARG_STRLEN + 10)
    document = {
        "schema": "korg:introspect@v1",
        "binary": "toolong",
        "callables": [
            {
                "command_id": f"toolong.{word}",
                "name": "w",
                "input_schema": {"type": "object", "properties": {}},
                "capabilities": {"side_effects": "none", "output_mode": "stream"},
            }
        ],
    }
    script = tmp_path / "toolong"
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"print({json.dumps(json.dumps(document))} if sys.argv[1:] == ['--introspect'] else 'ran')\n"
    )
    script.chmod(0o755)
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(script) as bridge:
            [tool] = (await bridge.client.list_tools()).tools
            result = await bridge.client.call_tool(tool.name, {})
    assert result.is_error
    assert text_of(result).startswith(
        f"could not start {script}: the command line is too long for the system"
    )
    assert text_of(result).endswith("Pass less data in the arguments; nothing was run.")


# --- item 6: messages read as advice, every problem in one reply ------------------------------


async def test_violations_read_as_advice_with_json_values_and_plain_paths() -> None:
    with anyio.fail_after(CALL_BOUND):
        async with await _in_process() as client:
            nulls = await client.call_tool("thump_echo", {"query": "q", "top_n": None, "quiet": None})
            many = await client.call_tool(
                "thump_echo",
                {
                    "query": True,
                    "mode": "medium",
                    "count": -1,
                    "tags": "not-a-list" * 10,
                    "bogus": 1,
                    "qeury": 2,
                },
            )
            long_value = await client.call_tool("thump_echo", {"query": "q", "count": "9" * 200})
    assert text_of(nulls) == (
        "invalid arguments for thump.echo (nothing was run): top_n must be an integer, got null; "
        "quiet must be a boolean, got null"
    )
    text = text_of(many)
    assert text.startswith("invalid arguments for thump.echo (nothing was run): ")
    for phrase in (
        "query must be a string, got true",
        'mode must be one of "fast", "slow", got "medium"',
        "count must be at least 0, got -1",
        'unknown arguments "bogus", "qeury" (known: query, top_n, ratio, quiet, tags, config, mode, count)',
    ):
        assert phrase in text, phrase
    assert text.endswith("(known: query, top_n, ratio, quiet, tags, config, mode, count)")
    # Values are cut to 40 characters: the quote, 38 digits, the ellipsis.
    assert text_of(long_value).endswith('count must be an integer, got "' + "9" * 38 + "…")


async def test_nested_paths_are_dotted_and_required_names_the_property(tmp_path: Path) -> None:
    from korg_bridge import parse_document

    schema = {
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {"depth": {"type": "integer"}, "name": {"type": "string"}},
                "required": ["name"],
            },
            "items": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        },
    }
    document = parse_document(
        {
            "schema": "korg:introspect@v1",
            "binary": "thump",
            "callables": [
                {
                    "command_id": "thump.say",
                    "name": "say",
                    "input_schema": schema,
                    "capabilities": {"side_effects": "none", "output_mode": "stream"},
                }
            ],
        },
        path=str(THUMP),
    )
    with anyio.fail_after(CALL_BOUND):
        async with Client(build_server(document, BridgeOptions(policy=Policy()))) as client:
            result = await client.call_tool(
                "thump_say", {"config": {"depth": "deep"}, "items": ["ok", "long"]}
            )
    text = text_of(result)
    assert "config.name is required" in text
    assert 'config.depth must be an integer, got "deep"' in text
    assert "items[1] must have at most 3 characters, got 4" in text


# --- item 7: numbers and booleans sent as strings; one string for an array --------------------


async def test_unambiguous_strings_are_coerced_before_validation_argv_and_audit(tmp_path: Path) -> None:
    ledger = tmp_path / "audit.jsonl"
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(THUMP, "--audit", str(ledger)) as bridge:
            coerced = await bridge.client.call_tool(
                "thump_echo",
                {
                    "query": "5",
                    "top_n": "2",
                    "ratio": "-0.25",
                    "quiet": "true",
                    "tags": "e12",
                    "count": "100",
                },
            )
            off = await bridge.client.call_tool("thump_echo", {"query": "q", "quiet": "false"})
    echoed = json.loads(text_of(coerced))
    assert echoed["argv"] == [
        "echo",
        "--query",
        "5",
        "--top-n",
        "2",
        "--ratio=-0.25",
        "--quiet",
        "--tags",
        "e12",
        "--count",
        "100",
    ]
    assert echoed["args"]["query"] == "5"  # a string property keeps its string
    assert json.loads(text_of(off))["argv"] == ["echo", "--query", "q"]
    args = _events(ledger)[0]["args"]
    assert args == {"query": "5", "top_n": 2, "ratio": -0.25, "quiet": True, "tags": ["e12"], "count": 100}


@pytest.mark.parametrize("value", ["1e999", "0x10", "NaN", " 2", "2 ", "+2", "02", "2.0", "", "١٢"])
async def test_strings_that_are_not_plain_decimal_integers_are_left_for_validation(value: str) -> None:
    with anyio.fail_after(CALL_BOUND):
        async with await _in_process() as client:
            result = await client.call_tool("thump_echo", {"query": "q", "top_n": value})
    assert result.is_error
    assert text_of(result).endswith(f"top_n must be an integer, got {json.dumps(value, ensure_ascii=False)}")


async def test_booleans_and_numbers_are_not_coerced_from_other_spellings() -> None:
    with anyio.fail_after(CALL_BOUND):
        async with await _in_process() as client:
            yes = await client.call_tool("thump_echo", {"query": "q", "quiet": "True"})
            inf = await client.call_tool("thump_echo", {"query": "q", "ratio": "Infinity"})
            listed = await client.call_tool("thump_echo", {"query": "q", "tags": 5})
    assert text_of(yes).endswith('quiet must be a boolean, got "True"')
    assert text_of(inf).endswith('ratio must be a number, got "Infinity"')
    assert text_of(listed).endswith("tags must be an array, got 5")
