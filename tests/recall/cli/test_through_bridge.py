"""``korg-bridge korg-recall`` end to end: the installed console script served by a real
bridge process and driven through the MCP SDK's client, over the shared peer ledgers.

This is the path a model takes: every argument goes through the bridge's argv
convention into the parser the toolkit derived from the same schema, so a property the
binary cannot take back (the reference server rejected its own ``tool_filter``) fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.bridge_client import Bridge, open_bridge, text_of
from tests.helpers.cli import recall_script
from tests.helpers.paths import PEERS, peers_missing

pytestmark = pytest.mark.anyio

HIT = re.compile(
    r'^  · seq=(\d+) score=\d\.\d\d agent=(\S+) tool=(\S+) ref=(e\d+)(?: \w+=(?:"[^"]*"|\S+))* :: (.*)$',
    re.MULTILINE,
)
EXPECTED_TOOLS = {
    "korg-recall_recall",
    "korg-recall_show",
    "korg-recall_index",
    "korg-recall_stats",
    "korg-recall_verify",
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so one bridge (a second to start) serves every test here."""
    return "asyncio"


@pytest.fixture(scope="module")
def korg_recall() -> Path:
    return recall_script()


@pytest.fixture(scope="module")
def peer_ledgers() -> Path:
    # The conftest ``peers`` fixture is function-scoped; the bridge here lives for the module.
    folder = PEERS / "ledgers"
    if not folder.is_dir():
        pytest.skip(peers_missing(folder))
    return folder.resolve()


@pytest.fixture(scope="module")
async def bridge(
    korg_recall: Path, peer_ledgers: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Bridge]:
    home = tmp_path_factory.mktemp("bridge-home")
    env = {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "KORG_RECALL_LEDGER": str(peer_ledgers),
        "KORG_RECALL_INDEX": str(home / "index.sqlite"),
    }
    async with open_bridge(korg_recall, env=env, cwd=home) as running:
        yield running


async def call(bridge: Bridge, tool: str, arguments: dict[str, Any]) -> str:
    result = await bridge.client.call_tool(tool, arguments)
    text: str = text_of(result)
    assert not result.is_error, text
    return text


async def test_the_bridge_lists_the_recall_tools_with_descriptions(bridge: Bridge) -> None:
    tools = {tool.name: tool for tool in (await bridge.client.list_tools()).tools}
    assert len(tools) >= 5
    assert set(tools) >= EXPECTED_TOOLS
    for tool in tools.values():
        assert (tool.description or "").strip(), tool.name
    assert tools["korg-recall_recall"].input_schema["required"] == ["query"]


async def test_recall_then_show_a_ref_from_its_output(bridge: Bridge) -> None:
    text = await call(bridge, "korg-recall_recall", {"query": "subtraction bug", "top_n": 3})
    assert text.splitlines()[0] == "[recall · keyword] 3 match(es):"
    hits = HIT.findall(text)
    assert len(hits) == 3
    # The signed sample's short "fix the bug" may rank first (BM25 favours short events): take the
    # first hit that holds both words, whatever its rank.
    seq, agent, tool, ref, _ = next(hit for hit in hits if "subtraction bug" in hit[4])
    assert (seq, agent, tool) == ("1", "agent:claude-code@2.1.0", "user_prompt")
    shown = json.loads(await call(bridge, "korg-recall_show", {"ref": [ref], "context": 1}))
    match = [event for event in shown["events"] if event["is_match"]]
    assert [(e["ref"], e["seq"], e["tool"], e["shape"]) for e in match] == [
        (ref, 1, "user_prompt", "envelope")
    ]
    assert match[0]["args"] == {"prompt": "Fix the subtraction bug in math_utils.py and make the tests pass"}
    assert len(shown["events"]) == 2  # the first event of its session has no predecessor


async def test_recall_filters_arrive_as_the_binary_expects_them(bridge: Bridge) -> None:
    text = await call(
        bridge,
        "korg-recall_recall",
        {
            "query": "tmp",
            "tool_filter": ["Bash", "Read"],
            "agent_filter": ["claude-code"],
            "mode": "substring",
            "since": "2026-01-01",
            "top_n": 10,
        },
    )
    hits = HIT.findall(text)
    assert hits
    assert {tool for _, _, tool, _, _ in hits} <= {"Bash", "Read"}
    assert all(agent.startswith(("claude-code", "agent:claude-code")) for _, agent, _, _, _ in hits)


async def test_a_query_that_looks_like_a_flag_is_still_a_query(bridge: Bridge) -> None:
    text = await call(bridge, "korg-recall_recall", {"query": "-subtraction NOT bug"})
    assert "subtraction bug" in text


async def test_stats_counts_every_shape_of_the_peer_ledgers(bridge: Bridge) -> None:
    await call(bridge, "korg-recall_index", {})
    stats = json.loads(await call(bridge, "korg-recall_stats", {}))
    assert stats["events"] > 20
    assert {"journal", "envelope", "claude-code"} <= set(stats["by_shape"])


async def test_verify_reports_intact_and_tampered_ledgers(bridge: Bridge, peer_ledgers: Path) -> None:
    intact = json.loads(
        await call(
            bridge,
            "korg-recall_verify",
            {"path": str(peer_ledgers / "sessions" / "korg-envelope-session.jsonl")},
        )
    )
    assert (intact["intact"], intact["events"]) == (True, 6)
    result = await bridge.client.call_tool(
        "korg-recall_verify", {"path": str(peer_ledgers / "korg-ledger-v1" / "tampered-content.jsonl")}
    )
    assert result.is_error  # not intact exits 1: the report, then the exit code
    report, _, tail = text_of(result).rpartition("\n[exit_code] ")
    tampered = json.loads(report)
    assert tail == "1 (error.generic)"
    assert tampered["intact"] is False
    assert any("seq 2" in error for error in tampered["errors"])


async def test_a_missing_ledger_is_a_tool_error_the_model_can_read(bridge: Bridge, tmp_path: Path) -> None:
    result = await bridge.client.call_tool("korg-recall_verify", {"path": str(tmp_path / "missing.jsonl")})
    assert result.is_error
    text = text_of(result)
    assert "ledger not found" in text
    assert "3" in text
