"""The real ``--introspect`` documents of korg, korgex and korg-recall-mcp,
served through ``fixture_bins/replay`` (which prints a document, then echoes
the argv it is called with). Ground truth: if the bridge disagrees with these
documents, the bridge is wrong."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client

from korg_bridge.bridge.contract import contract_schema
from korg_bridge.bridge.discovery import discover
from korg_bridge.bridge.policy import Policy
from korg_bridge.serving.server import BridgeOptions, build_server
from tests.helpers.bridge_client import CALL_BOUND, FIXTURE_BINS, child_env, open_bridge, text_of

pytestmark = pytest.mark.anyio

REPLAY = FIXTURE_BINS / "replay"
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DOCUMENTS = {
    "korg.introspect.json": 13,
    "korgex.introspect.json": 7,
    "korg-recall-mcp.introspect.json": 1,
}


def _doc_path(peers: Path, name: str) -> Path:
    return peers / "introspect" / name


def _load(peers: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_doc_path(peers, name).read_text("utf-8"))
    return data


@asynccontextmanager
async def serve_peer(peers: Path, name: str, allow: str | None = None) -> AsyncIterator[Client]:
    """Discover the document through replay and connect the SDK client in process."""
    env = child_env({"KORG_FIXTURE_DOC": str(_doc_path(peers, name))})
    document = await discover(str(REPLAY), env=env)
    policy = Policy.parse(allow) if allow is not None else Policy()
    server = build_server(document, BridgeOptions(policy=policy, env=env, timeout=30))
    async with Client(server) as client:
        yield client


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_the_peer_document_is_valid_under_the_shipped_contract_schema(peers: Path, name: str) -> None:
    jsonschema.Draft202012Validator(contract_schema()).validate(_load(peers, name))


@pytest.mark.parametrize("name", list(DOCUMENTS))
async def test_every_peer_callable_is_listed_with_a_valid_name_and_its_schema_verbatim(
    peers: Path, name: str
) -> None:
    raw = _load(peers, name)
    with anyio.fail_after(CALL_BOUND):
        async with serve_peer(peers, name) as client:
            tools = (await client.list_tools()).tools
    assert len(tools) == DOCUMENTS[name] == len(raw["callables"])
    assert [t.title for t in tools] == [c["command_id"] for c in raw["callables"]]
    assert len({t.name for t in tools}) == len(tools)
    for tool, entry in zip(tools, raw["callables"], strict=True):
        assert NAME_RE.match(tool.name), tool.name
        assert tool.input_schema == entry["input_schema"]
        caps = entry["capabilities"]
        expected_allowed = caps["output_mode"] != "session" and caps["side_effects"] in ("none", "fs_read")
        assert tool.meta is not None
        assert tool.meta["dev.korg/allowed"] is expected_allowed, entry["command_id"]


async def test_korg_rewind_is_denied_by_default_as_ledger_write(peers: Path) -> None:
    with anyio.fail_after(CALL_BOUND):
        async with serve_peer(peers, "korg.introspect.json") as client:
            result = await client.call_tool("korg_rewind", {"seq": 5})
    assert result.is_error
    assert "side_effects ledger_write" in text_of(result)
    assert "KORG_INTROSPECT_MCP_ALLOW=ledger_write" in text_of(result)


async def test_korg_rewind_allowed_builds_the_documented_argv(peers: Path) -> None:
    with anyio.fail_after(CALL_BOUND):
        async with serve_peer(peers, "korg.introspect.json", allow="ledger_write") as client:
            result = await client.call_tool("korg_rewind", {"seq": 5})
            by_id = await client.call_tool("korg.rewind", {"seq": 5})
            wrong = await client.call_tool("korg_rewind", {"seq": "five"})
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == {"argv": ["rewind", "--seq", "5"]}
    assert text_of(by_id) == text_of(result)
    assert wrong.is_error and 'seq must be an integer, got "five"' in text_of(wrong)


async def test_korg_session_callables_are_refused_even_under_all(peers: Path) -> None:
    raw = _load(peers, "korg.introspect.json")
    sessions = [c["command_id"] for c in raw["callables"] if c["capabilities"]["output_mode"] == "session"]
    assert sessions  # the document has several
    with anyio.fail_after(CALL_BOUND):
        async with serve_peer(peers, "korg.introspect.json", allow="all") as client:
            results = {cid: await client.call_tool(cid, {}) for cid in sessions}
            fs_read = await client.call_tool("korg.verify-provenance", {"path": "x.ktrans"})
    for cid, result in results.items():
        assert result.is_error, cid
        assert "interactive session" in text_of(result)
    assert json.loads(text_of(fs_read)) == {"argv": ["verify-provenance", "--path", "x.ktrans"]}


async def test_korgex_dashed_segment_becomes_the_subcommand_word(peers: Path) -> None:
    with anyio.fail_after(CALL_BOUND):
        async with serve_peer(peers, "korgex.introspect.json", allow="fs_write") as client:
            tools = {t.title: t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool(tools["korgex.install-extension"], {})
    assert tools["korgex.install-extension"] == "korgex_install-extension"
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == {"argv": ["install-extension"]}


async def test_korg_recall_mcp_recall_passes_hostile_queries_as_values(peers: Path) -> None:
    with anyio.fail_after(CALL_BOUND):
        async with serve_peer(peers, "korg-recall-mcp.introspect.json") as client:
            result = await client.call_tool("korg-recall-mcp_recall", {"query": "--rm -rf", "top_n": 3})
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result)) == {"argv": ["recall", "--query=--rm -rf", "--top-n", "3"]}


async def test_a_peer_document_is_served_end_to_end_over_stdio(peers: Path) -> None:
    env = {"KORG_FIXTURE_DOC": str(_doc_path(peers, "korg.introspect.json"))}
    with anyio.fail_after(CALL_BOUND):
        async with open_bridge(REPLAY, "--allow", "ledger_write", env=env) as bridge:
            tools = (await bridge.client.list_tools()).tools
            result = await bridge.client.call_tool("korg_rewind", {"seq": 5})
    assert len(tools) == 13
    assert all(NAME_RE.match(t.name) for t in tools)
    assert json.loads(text_of(result)) == {"argv": ["rewind", "--seq", "5"]}
