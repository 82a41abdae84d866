"""What an agent sends korg-recall through ``korg-bridge``, hostile or sloppy, end to end.

The installed ``korg-recall`` served by a real bridge process, driven through the MCP SDK's
client: refs in the shapes agents send, values a model picks that once hung the binary or
crashed it, secrets no argument can unredact, verify's verdict as an error result, and
``show`` answers that fit in an agent's context however big the event.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.history.query.paging import RESPONSE_CHARS
from tests.helpers.bridge_client import Bridge, open_bridge, text_of
from tests.helpers.cli import recall_script
from tests.helpers.paths import PEERS, peers_missing
from tests.helpers.transcripts import unpack_transcripts

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so one bridge serves every test here."""
    return "asyncio"


@pytest.fixture(scope="module")
def korg_recall() -> Path:
    return recall_script()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bridge-args-home")


@pytest.fixture(scope="module")
def transcripts(home: Path) -> Path:
    folder = unpack_transcripts(home / "history")
    if folder is None or not (PEERS / "ledgers").is_dir():
        pytest.skip(peers_missing(PEERS))
    return folder


@pytest.fixture(scope="module")
async def bridge(korg_recall: Path, home: Path, transcripts: Path) -> AsyncIterator[Bridge]:
    env = {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "KORG_RECALL_LEDGER": os.pathsep.join([str(PEERS / "ledgers"), str(transcripts)]),
        "KORG_RECALL_INDEX": str(home / "index.sqlite"),
    }
    async with open_bridge(korg_recall, env=env, cwd=home) as running:
        result = await running.client.call_tool("korg-recall_index", {})
        assert not result.is_error, text_of(result)
        yield running


async def ok(bridge: Bridge, tool: str, arguments: dict[str, Any]) -> Any:
    result = await bridge.client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return result


async def refused(bridge: Bridge, tool: str, arguments: dict[str, Any]) -> str:
    result = await bridge.client.call_tool(tool, arguments)
    text = text_of(result)
    assert result.is_error, text
    assert "internal error" not in text
    return text


async def some_refs(bridge: Bridge, count: int) -> list[str]:
    result = await ok(
        bridge, "korg-recall_recall", {"query": "subtraction bug", "top_n": count, "json": True}
    )
    refs = [hit["ref"] for hit in json.loads(text_of(result))["hits"]]
    assert len(refs) == count
    return refs


# --- argument shapes -----------------------------------------------------------------------------------


async def test_show_takes_a_lone_string_ref(bridge: Bridge) -> None:
    [ref] = await some_refs(bridge, 1)
    shown = await ok(bridge, "korg-recall_show", {"ref": ref})
    assert [event["ref"] for event in shown.structured_content["events"]] == [ref]


async def test_show_takes_comma_separated_refs_in_a_string_or_a_list(bridge: Bridge) -> None:
    refs = await some_refs(bridge, 3)
    for ref in (",".join(refs), ", ".join(refs), [",".join(refs[:2]), refs[2]], refs):
        shown = await ok(bridge, "korg-recall_show", {"ref": ref})
        assert [event["ref"] for event in shown.structured_content["events"]] == refs, ref


async def test_the_show_schema_says_a_ref_may_be_a_string_or_a_list(bridge: Bridge) -> None:
    tools = {tool.name: tool for tool in (await bridge.client.list_tools()).tools}
    assert tools["korg-recall_show"].input_schema["properties"]["ref"]["type"] == ["string", "array"]


# --- values a model picks --------------------------------------------------------------------------------


@pytest.mark.parametrize("ref", ["e²", "e" + "9" * 30])
async def test_a_bad_ref_is_an_error_result_naming_it_with_exit_2(bridge: Bridge, ref: str) -> None:
    text = await refused(bridge, "korg-recall_show", {"ref": [ref]})
    assert "invalid ref" in text
    assert "[exit_code] 2" in text


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "x", "since": "9" * 400 + "d"},
        {"query": "x", "since": "9" * 40 + "d"},
        {"query": " ".join(f"w{i}" for i in range(1500))},
        {"query": " ".join(f"w{i}" for i in range(150))},
        {"query": "x", "agent_filter": [f"a{i}" for i in range(600)]},
        {"query": "x", "tool_filter": [f"t{i}" for i in range(600)]},
    ],
    ids=["400-digit-since", "40-digit-since", "1500-words", "150-terms", "600-agents", "600-tools"],
)
async def test_oversized_arguments_are_refused_with_what_is_too_large(
    bridge: Bridge, arguments: dict[str, Any]
) -> None:
    text = await refused(bridge, "korg-recall_recall", arguments)
    assert any(phrase in text for phrase in ("too large", "too long", "at most", "longer than", "greater")), (
        text
    )


async def test_a_ledger_argument_that_does_not_exist_is_an_error_naming_it(
    bridge: Bridge, home: Path
) -> None:
    missing = home / "no" / "such" / "dir"
    text = await refused(bridge, "korg-recall_recall", {"query": "bug", "ledger": [str(missing)]})
    assert f"ledger path(s) not found: {missing}" in text
    assert "[exit_code] 2" in text


@pytest.mark.parametrize("target", ["/dev/urandom", "fifo"])
async def test_verify_of_a_device_or_fifo_is_refused_at_once(bridge: Bridge, home: Path, target: str) -> None:
    path = Path(target)
    if target == "fifo":
        path = home / "never-written.fifo"
        if not path.exists():
            os.mkfifo(path)
    for arguments in (
        {"path": str(path)},
        {"path": str(PEERS / "ledgers" / "sessions" / "korg-envelope-session.jsonl"), "anchors": str(path)},
    ):
        text = await refused(bridge, "korg-recall_verify", arguments)
        assert "not a regular file" in text
        assert "[exit_code] 3" in text


# --- secrets, network, verify --------------------------------------------------------------------------


async def test_no_tool_offers_to_unredact_or_download(bridge: Bridge) -> None:
    tools = {tool.name: tool for tool in (await bridge.client.list_tools()).tools}
    for tool in tools.values():
        assert "allow_secrets" not in tool.input_schema.get("properties", {}), tool.name
    assert "download" not in tools["korg-recall_index"].input_schema["properties"]
    text = await refused(bridge, "korg-recall_recall", {"query": "bug", "allow_secrets": True})
    assert "allow_secrets" in text
    text = await refused(bridge, "korg-recall_index", {"download": True})
    assert "download" in text


async def test_verify_signs_off_the_signed_sample_with_a_pubkey_string(bridge: Bridge) -> None:
    samples = PEERS / "ledgers" / "korg-ledger-v1" / "samples"
    key = (samples / "signed.pubkey").read_text().strip()
    result = await ok(bridge, "korg-recall_verify", {"path": str(samples / "signed.jsonl"), "pubkey": key})
    assert result.structured_content["intact"] is True
    assert result.structured_content["signatures"]["verified"] == 2
    text = await refused(
        bridge, "korg-recall_verify", {"path": str(samples / "signed.jsonl"), "pubkey": "00" * 32}
    )
    assert "event_sig does not verify" in text
    assert text.endswith("[exit_code] 1 (error.generic)")
    text = await refused(
        bridge, "korg-recall_verify", {"path": str(samples / "signed.jsonl"), "pubkey": "nope"}
    )
    assert "[exit_code] 2" in text


# --- bounded answers -------------------------------------------------------------------------------------


async def test_show_of_the_biggest_real_event_fits_an_agents_context(bridge: Bridge) -> None:
    found = await ok(
        bridge,
        "korg-recall_recall",
        {"query": "tool_heavy.jsonl", "tool_filter": ["Read"], "top_n": 10, "json": True},
    )
    refs = [hit["ref"] for hit in json.loads(text_of(found))["hits"]]
    sizes = {}
    for ref in refs:
        full = await ok(bridge, "korg-recall_show", {"ref": [ref], "full": True})
        sizes[ref] = len(text_of(full))
    big = max(sizes, key=lambda ref: sizes[ref])
    assert sizes[big] > 30_000  # a real 40 KB file read

    result = await ok(bridge, "korg-recall_show", {"ref": [big], "context": 2})
    text = text_of(result)
    over_the_wire = len(text) + len(json.dumps(result.structured_content, ensure_ascii=False))
    assert len(text) <= RESPONSE_CHARS + 1000
    assert over_the_wire <= 2 * RESPONSE_CHARS + 2000  # ~20k tokens: under Claude Code's 25k default
    answer = result.structured_content
    assert answer["next"]
    assert "call show with" in answer["notice"]

    follow = answer["next"][0]
    again = await ok(bridge, "korg-recall_show", follow)
    assert again.structured_content["events"]
