"""The extras through the command line: audit, several binaries, filters, HTTP."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from korg_bridge.ledger.chain import verify_file
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.query.search import search
from tests.helpers.bridge_client import free_port, open_bridge, text_of
from tests.helpers.cli import python_env, run_bridge
from tests.helpers.paths import FIXTURE_BINS

THUMP = FIXTURE_BINS / "thump"
EXTRAS = FIXTURE_BINS / "extras"


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return run_bridge(*args, base=env or python_env(), timeout=timeout)


@pytest.mark.anyio
async def test_audit_ledger_records_allowed_denied_invalid_and_failed_calls(tmp_path: Path) -> None:
    ledger = tmp_path / "audit.jsonl"
    async with open_bridge(THUMP, "--audit", str(ledger)) as bridge:
        ok = await bridge.client.call_tool("thump_say", {"text": "audited hello"})
        denied = await bridge.client.call_tool("thump_touch", {"path": str(tmp_path / "x")})
        invalid = await bridge.client.call_tool("thump_echo", {"top_n": "many"})
        failed = await bridge.client.call_tool("thump_fail", {"code": 3})
    assert not ok.is_error and denied.is_error and invalid.is_error and failed.is_error
    report = verify_file(ledger)
    assert report.intact, report.errors
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [e["tool_name"] for e in events] == ["thump.say", "thump.touch", "thump.echo", "thump.fail"]
    assert [e["success"] for e in events] == [True, False, False, False]
    assert events[0]["source_agent"].startswith("agent:korg-bridge@")
    assert "KORG_INTROSPECT_MCP_ALLOW=fs_write" in events[1]["result"]["reason"]
    assert events[3]["result"]["exit_code"] == 3
    assert not (tmp_path / "x").exists()
    # korg-recall finds the recorded call by its arguments
    with Index(tmp_path / "index.sqlite") as index:
        index.refresh([ledger])
        hits = search(index, "audited hello", mode="keyword", top_n=3, min_score=0.0, sources=[ledger])
    assert hits and hits[0].tool == "thump.say"


@pytest.mark.anyio
async def test_audit_chain_continues_across_bridge_restarts(tmp_path: Path) -> None:
    ledger = tmp_path / "audit.jsonl"
    env = {"KORG_BRIDGE_AUDIT": str(ledger)}
    for word in ("first", "second"):
        async with open_bridge(THUMP, env=env) as bridge:
            await bridge.client.call_tool("thump_say", {"text": word})
    report = verify_file(ledger)
    assert report.intact and report.events == 2
    assert [json.loads(line)["seq_id"] for line in ledger.read_text().splitlines()] == [1, 2]


def test_several_binaries_list_together_and_collisions_name_both() -> None:
    listed = run_cli(str(THUMP), str(EXTRAS), "--list-tools", "--json")
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert [b["binary"] for b in report["binaries"]] == ["thump", "extras"]
    assert {"thump", "extras"} == {t["binary"] for t in report["tools"]}
    clash = run_cli(str(THUMP), str(THUMP), "--list-tools")
    assert clash.returncode == 3
    last = clash.stderr.splitlines()[-1]
    assert last.startswith("korg-bridge: error:") and "declared by both" in last


def test_include_and_exclude_change_what_list_tools_shows() -> None:
    out = run_cli(
        str(THUMP), "--list-tools", "--json", "--include-tool", "thump.s*", "--exclude-tool", "thump.shell"
    )
    assert out.returncode == 0, out.stderr
    tools = json.loads(out.stdout)["tools"]
    served = sorted(t["command_id"] for t in tools if t["status"] in ("allowed", "denied"))
    assert served == ["thump.say", "thump.sleep", "thump.stdin"]
    excluded = {t["command_id"] for t in tools if t["status"] == "excluded"}
    assert {"thump.echo", "thump.shell"} <= excluded
    table = run_cli(str(THUMP), "--list-tools", "--exclude-tool", "thump.*")
    assert "EXCLUDED" in table.stdout and table.stdout.splitlines()[-1].endswith("excluded")


@pytest.mark.anyio
async def test_filtered_tools_are_not_served(tmp_path: Path) -> None:
    async with open_bridge(THUMP, "--include-tool", "thump.say") as bridge:
        names = [t.name for t in (await bridge.client.list_tools()).tools]
    assert names == ["thump_say"]


def test_http_flags_need_http_and_off_loopback_needs_a_token() -> None:
    assert run_cli(str(THUMP), "--token-file", "x").returncode == 2
    refused = run_cli(str(THUMP), "--http", "0.0.0.0:1")
    assert refused.returncode == 3 and "token" in refused.stderr and refused.stderr.count("\n") == 1
    assert run_cli(str(THUMP), "--http", "nonsense:port").returncode == 2


@pytest.mark.anyio
async def test_http_server_from_the_cli_serves_with_a_token_and_drains_on_sigterm() -> None:
    port = free_port()
    env = python_env() | {"KORG_BRIDGE_TOKEN": "s3cret-token-value"}
    process = await anyio.open_process(
        [sys.executable, "-m", "korg_bridge", str(THUMP), "--http", f"127.0.0.1:{port}"],
        env=env,
        stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient(base_url=base) as http:
            with anyio.fail_after(30):
                while True:
                    try:
                        health = await http.get("/healthz")
                        break
                    except httpx2.TransportError:
                        await anyio.sleep(0.05)
            assert health.status_code == 200
            assert health.json()["binary"] == "thump" and health.json()["tools"] == 18
            assert (await http.post("/mcp", json={})).status_code == 401
        headers = {"Authorization": "Bearer s3cret-token-value"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
        ):
            await client.list_tools()
            result = await client.call_tool("thump_say", {"text": "over http"})
            assert text_of(result) == "over http\n"
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            code = await process.wait()
        assert code == 0
        stderr = (await process.stderr.receive(65536)).decode() if process.stderr else ""
        assert "s3cret-token-value" not in stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()
