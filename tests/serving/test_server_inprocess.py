"""The MCP server through the SDK's real client, in-process (fast unit level)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from korg_bridge import BridgeOptions, Policy, build_server, discover
from tests.helpers.paths import FIXTURE_BINS

pytestmark = pytest.mark.anyio


async def client_for(**options: Any) -> Client:
    document = await discover(str(FIXTURE_BINS / "thump"))
    return Client(build_server(document, BridgeOptions(**options)))


async def test_tools_list_carries_schemas_verbatim_and_capability_tags() -> None:
    document = await discover(str(FIXTURE_BINS / "thump"))
    async with Client(build_server(document, BridgeOptions(policy=Policy()))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {
        f"thump_{c.command_id.split('.', 1)[1].replace('.', '_')}" for c in document.callables
    }
    echo = tools["thump_echo"]
    assert echo.input_schema == document.get("thump.echo").input_schema  # type: ignore[union-attr]
    assert echo.title == "thump.echo"
    assert echo.description is not None
    assert echo.description.endswith("[side_effects: none, output_mode: envelope, long_running: false]")
    assert echo.meta is not None and echo.meta["dev.korg/command_id"] == "thump.echo"
    assert tools["thump_touch"].meta["dev.korg/allowed"] is False  # type: ignore[index]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in tools)


async def test_call_by_safe_name_or_command_id() -> None:
    async with await client_for(policy=Policy()) as client:
        for name in ("thump_say", "thump.say"):
            result = await client.call_tool(name, {"text": "hi"})
            assert not result.is_error
            assert result.content[0].text == "hi\n"  # type: ignore[union-attr]


async def test_envelope_output_is_pretty_printed_json() -> None:
    async with await client_for(policy=Policy()) as client:
        result = await client.call_tool("thump_echo", {"query": "--rm -rf", "tags": ["-b", "--c=d"]})
    text = result.content[0].text  # type: ignore[union-attr]
    payload = json.loads(text)
    assert text == json.dumps(payload, indent=2, ensure_ascii=False)
    assert payload["args"]["query"] == "--rm -rf"
    assert payload["args"]["tags"] == ["-b", "--c=d"]


async def test_unknown_tool_is_a_protocol_error() -> None:
    async with await client_for(policy=Policy()) as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("thump_nope", {})


async def test_denied_and_invalid_calls_are_tool_errors() -> None:
    async with await client_for(policy=Policy()) as client:
        denied = await client.call_tool("thump_touch", {"path": "/tmp/x"})
        invalid = await client.call_tool("thump_echo", {"top_n": "many"})
    assert denied.is_error and "KORG_INTROSPECT_MCP_ALLOW=fs_write" in denied.content[0].text  # type: ignore[union-attr]
    assert invalid.is_error
    text = invalid.content[0].text  # type: ignore[union-attr]
    assert "query is required" in text and 'top_n must be an integer, got "many"' in text
    assert "nothing was run" in text


async def test_missing_binary_after_discovery_is_a_tool_error(tmp_path: Any) -> None:
    import shutil

    copy = tmp_path / "thump"
    shutil.copy(FIXTURE_BINS / "thump", copy)
    shutil.copy(FIXTURE_BINS / "_fixture.py", tmp_path / "_fixture.py")
    document = await discover(str(copy))
    copy.unlink()
    async with Client(build_server(document, BridgeOptions(policy=Policy()))) as client:
        result = await client.call_tool("thump_say", {"text": "x"})
    assert result.is_error and "could not start" in result.content[0].text  # type: ignore[union-attr]
