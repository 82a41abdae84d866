"""The bridge's client-facing extras: annotations, structured output, progress,
drift reload, several binaries, tool filters — through the SDK's real client."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from korg_bridge import BridgeOptions, ConfigError, Policy, build_server, discover
from korg_bridge.bridge.catalogue import Catalogue, ToolFilter
from tests.helpers.paths import FIXTURE_BINS

pytestmark = pytest.mark.anyio

EXTRAS = FIXTURE_BINS / "extras"
THUMP = FIXTURE_BINS / "thump"


async def extras_client(**options: Any) -> Client:
    document = await discover(str(EXTRAS))
    options.setdefault("policy", Policy.parse("all"))
    return Client(build_server(document, BridgeOptions(**options)))


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# --- annotations --------------------------------------------------------------------------


async def test_annotations_follow_the_capability_table() -> None:
    async with await extras_client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    shaped = tools["extras_shaped"].annotations
    assert shaped is not None
    assert (shaped.read_only_hint, shaped.open_world_hint, shaped.idempotent_hint) == (True, False, False)
    assert shaped.title == "shaped"
    write = tools["extras_write"].annotations
    assert write is not None
    assert (write.read_only_hint, write.destructive_hint, write.idempotent_hint) == (False, True, True)
    ledger = tools["extras_ledger"].annotations
    assert ledger is not None and (ledger.read_only_hint, ledger.destructive_hint) == (False, False)
    net = tools["extras_net"].annotations
    assert net is not None and net.open_world_hint is True and net.read_only_hint is False
    weird = tools["extras_weird"].annotations
    assert weird is not None and weird.read_only_hint is False


# --- structured output --------------------------------------------------------------------


async def test_envelope_object_is_also_structured_content() -> None:
    async with await extras_client() as client:
        result = await client.call_tool("extras_plain", {})
        as_list = await client.call_tool("extras_list", {})
    assert not result.is_error
    assert result.structured_content == {"ok": True, "items": [1, 2]}
    assert '"items": [' in text(result)  # the text stays, for older clients
    assert as_list.structured_content is None and text(as_list).startswith("[")


async def test_declared_output_schema_is_advertised_and_enforced() -> None:
    async with await extras_client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["extras_shaped"].output_schema == {
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"],
        }
        good = await client.call_tool("extras_shaped", {"count": 3})
        wrong = await client.call_tool("extras_shaped", {"wrong": True})
        prose = await client.call_tool("extras_shaped", {"text": True})
    assert good.structured_content == {"count": 3} and not good.is_error
    assert wrong.is_error and "does not match its output_schema" in text(wrong) and "$.count" in text(wrong)
    assert prose.is_error and "did not print a JSON object" in text(prose)


# --- progress -----------------------------------------------------------------------------


async def test_stream_lines_become_rate_limited_progress_and_the_result_is_complete() -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with await extras_client(progress_rate=20.0) as client:
        with anyio.fail_after(30):
            result = await client.call_tool(
                "extras_ticker", {"lines": 60, "interval_ms": 10}, progress_callback=on_progress
            )
    assert text(result).splitlines() == [f"tick {i}" for i in range(1, 61)]
    assert 2 <= len(seen) < 60  # coalesced: 60 lines in ~0.6 s at most 20/s
    values = [p for p, _ in seen]
    assert values == sorted(set(values)), "progress must strictly increase"
    assert all(m and m.startswith("tick ") for _, m in seen)
    assert values[-1] <= 60.0


async def test_no_progress_token_means_no_progress_work() -> None:
    async with await extras_client() as client:
        result = await client.call_tool("extras_ticker", {"lines": 3, "interval_ms": 1})
    assert text(result) == "tick 1\ntick 2\ntick 3\n"


# --- drift reload -------------------------------------------------------------------------


def write_wrapper(path: Path, extra_tool: str | None) -> None:
    """A fresh executable file (new inode) wrapping the extras fixture."""
    env = f"EXTRAS_EXTRA_TOOL={extra_tool} " if extra_tool else ""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f'#!/bin/sh\n{env}exec "{sys.executable}" "{EXTRAS}" "$@"\n')
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR)
    os.replace(tmp, path)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_rebuilt_binary_changes_tools_list_and_notifies(tmp_path: Path, mode: str) -> None:
    binary = tmp_path / "extras"
    write_wrapper(binary, None)
    document = await discover(str(binary))
    server = build_server(document, BridgeOptions(policy=Policy(), poll_interval=0.1))
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(server, mode=mode, message_handler=on_message) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        assert "extras_fresh" not in before
        if mode == "legacy":
            write_wrapper(binary, "fresh")
            with anyio.fail_after(20):
                await changed.wait()
        else:
            async with client.listen(tools_list_changed=True) as subscription:
                write_wrapper(binary, "fresh")
                with anyio.fail_after(20):
                    event = await subscription.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
        after = {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}
        assert after == before | {"extras_fresh"}
        result = await client.call_tool("extras_fresh", {})
        assert text(result) == "fresh\n"


async def test_failed_reintrospection_keeps_the_old_tools(tmp_path: Path) -> None:
    binary = tmp_path / "extras"
    write_wrapper(binary, None)
    document = await discover(str(binary))
    server = build_server(document, BridgeOptions(policy=Policy(), poll_interval=60))
    async with Client(server) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        tmp = binary.with_suffix(".tmp")
        tmp.write_text("#!/bin/sh\necho 'not json'\n")
        tmp.chmod(0o755)
        os.replace(tmp, binary)
        after = {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}
    assert after == before


async def test_no_reload_serves_the_first_catalogue(tmp_path: Path) -> None:
    binary = tmp_path / "extras"
    write_wrapper(binary, None)
    document = await discover(str(binary))
    server = build_server(document, BridgeOptions(policy=Policy(), reload=False))
    async with Client(server) as client:
        write_wrapper(binary, "fresh")
        names = {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}
    assert "extras_fresh" not in names


# --- several binaries, filters ------------------------------------------------------------


async def test_several_binaries_are_served_together() -> None:
    documents = [await discover(str(THUMP)), await discover(str(EXTRAS))]
    async with Client(build_server(documents, BridgeOptions(policy=Policy()))) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        say = await client.call_tool("thump_say", {"text": "one"})
        plain = await client.call_tool("extras_plain", {})
    assert {"thump_echo", "extras_plain"} <= names
    assert text(say) == "one\n" and not plain.is_error


async def test_a_collision_across_binaries_is_a_startup_error_naming_both() -> None:
    thump = await discover(str(THUMP))
    with pytest.raises(ConfigError) as info:
        Catalogue([thump, thump], Policy())
    assert "thump.echo" in info.value.message and info.value.message.count("thump") >= 2


async def test_include_and_exclude_globs_choose_what_is_served() -> None:
    thump = await discover(str(THUMP))
    only = Catalogue(thump, Policy(), tool_filter=ToolFilter(include=("thump.e*",)))
    assert sorted(e.spec.command_id for e in only.entries) == ["thump.echo", "thump.env"]
    without = Catalogue(thump, Policy(), tool_filter=ToolFilter(exclude=("thump.bun.*", "thump.f*")))
    ids = {e.spec.command_id for e in without.entries}
    assert not {"thump.bun.script.run", "thump.fail", "thump.fetch", "thump.flood"} & ids
    assert "thump.echo" in ids
    async with Client(
        build_server(thump, BridgeOptions(policy=Policy(), tool_filter=ToolFilter(include=("thump.say",))))
    ) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["thump_say"]
        assert (await client.call_tool("thump.say", {"text": "x"})).is_error is False
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("thump_echo", {"query": "x"})
