"""Identity through the HTTP bridge: each token's tenant and actor reach that
call's process (``thump env`` prints a variable of its environment) and the
audit ledger, and nothing else's. A real uvicorn on loopback, the SDK's real
client over Streamable HTTP, real fixture processes."""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from korg_bridge import BridgeOptions, Policy, build_server, discover
from korg_bridge.auth.tokens import Keyring, parse_tokens
from korg_bridge.config import ENV_BRIDGE_ACTOR, ENV_BRIDGE_TENANT
from korg_bridge.ledger.chain import verify_file
from korg_bridge.serving.audit import AuditLog
from korg_bridge.serving.http import reload_tokens, serve_http
from tests.helpers.bridge_client import INITIALIZE, read_pid, wait_for_file
from tests.helpers.paths import FIXTURE_BINS
from tests.serving.test_http import JSON_HEADERS, URL_PATTERN, serving

pytestmark = pytest.mark.anyio

BOUND = 30.0
"""Seconds any one wait here may take before the test fails instead of hanging."""

ANA = "tok-ana-7Hq2vX9pLm3Rk8Wz"
BOB = "tok-bob-Qw3Er4Ty5Ui6Op7A"
OPS = "tok-ops-ZyXwVuTsRqPoNmLk"
TOKEN_FILE = f"{ANA} acme ana@example.com\n{BOB} globex ci:nightly\n{OPS}\n"
NAMES = (ENV_BRIDGE_TENANT, ENV_BRIDGE_ACTOR, "KORG_BRIDGE_TOKEN")


@asynccontextmanager
async def bridge_over_http(
    tmp_path: Path,
    *,
    text: str = TOKEN_FILE,
    audit: AuditLog | None = None,
    max_calls_per_caller: int | None = None,
    **http: Any,
) -> AsyncIterator[tuple[str, Keyring, list[str]]]:
    """thump behind serve_http with the tokens of ``text`` (a file, for reloads);
    yields the base URL, the keyring, and what the server logged."""
    path = tmp_path / "tokens"
    path.write_text(text)
    path.chmod(0o600)
    keyring = Keyring(parse_tokens(text, f"token file {path}"), str(path))
    document = await discover(str(FIXTURE_BINS / "thump"))
    options = BridgeOptions(policy=Policy(), audit=audit, max_calls_per_caller=max_calls_per_caller)
    server = build_server(document, options)
    messages: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    root, level = logging.getLogger(), logging.getLogger().level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    ready = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            serve = partial(
                serve_http, server, host="127.0.0.1", port=0, tokens=keyring, health={}, ready=ready
            )
            tg.start_soon(partial(serve, **http))
            with anyio.fail_after(BOUND):
                await ready.wait()
            url = next(m.group() for msg in messages if (m := URL_PATTERN.search(msg)))
            yield url.removesuffix("/mcp"), keyring, messages
            tg.cancel_scope.cancel()
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    for token in (ANA, BOB, OPS):
        assert not any(token in message for message in messages), "a token reached the log"


@asynccontextmanager
async def client(base: str, token: str, mode: str = "auto") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as connected,
    ):
        yield connected


async def seen(connected: Client, name: str) -> str | None:
    """What the call's process found in its environment under ``name``."""
    result = await connected.call_tool("thump_env", {"name": name})
    assert not result.is_error, result
    value: str | None = json.loads(result.content[0].text)["value"]  # type: ignore[union-attr]
    return value


@pytest.fixture
def inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values the bridge's own environment holds, which no HTTP caller may inherit."""
    monkeypatch.setenv(ENV_BRIDGE_TENANT, "stale-tenant")
    monkeypatch.setenv(ENV_BRIDGE_ACTOR, "stale-actor")
    monkeypatch.setenv("KORG_BRIDGE_TOKEN", OPS)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.usefixtures("inherited")
async def test_each_token_s_calls_see_its_own_tenant_and_actor_and_never_a_token(
    tmp_path: Path, mode: str
) -> None:
    async with bridge_over_http(tmp_path) as (base, _, _):
        found = {}
        for token in (ANA, BOB, OPS):
            async with client(base, token, mode) as connected:
                found[token] = [await seen(connected, name) for name in NAMES]
    assert found[ANA] == ["acme", "ana@example.com", None]
    assert found[BOB] == ["globex", "ci:nightly", None]
    assert found[OPS] == [None, None, None]  # a token alone on its line: no tenant, nothing inherited


@pytest.mark.usefixtures("inherited")
async def test_an_open_loopback_server_gives_no_caller_a_tenant() -> None:
    async with (
        serving(token=None) as base,
        httpx2.AsyncClient() as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as connected,
    ):
        assert [await seen(connected, name) for name in NAMES] == [None, None, None]


@pytest.mark.usefixtures("inherited")
async def test_without_http_the_inherited_tenant_is_left_to_the_operator() -> None:
    document = await discover(str(FIXTURE_BINS / "thump"))
    async with Client(build_server(document, BridgeOptions(policy=Policy()))) as connected:
        assert await seen(connected, ENV_BRIDGE_TENANT) == "stale-tenant"
        assert await seen(connected, ENV_BRIDGE_ACTOR) == "stale-actor"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_concurrent_calls_of_two_tenants_never_see_each_other_s_identity(
    tmp_path: Path, mode: str
) -> None:
    answers: dict[str, list[str | None]] = {ANA: [], BOB: []}
    async with (
        bridge_over_http(tmp_path) as (base, _, _),
        client(base, ANA, mode) as ana,
        client(base, BOB, mode) as bob,
    ):

        async def ask(connected: Client, token: str) -> None:
            answers[token].append(await seen(connected, ENV_BRIDGE_TENANT))

        with anyio.fail_after(BOUND * 2):
            async with anyio.create_task_group() as tg:
                for _ in range(8):  # interleaved, several in flight on each session
                    tg.start_soon(ask, ana, ANA)
                    tg.start_soon(ask, bob, BOB)
    assert answers == {ANA: ["acme"] * 8, BOB: ["globex"] * 8}


async def test_a_session_opened_with_one_token_is_not_found_with_another(tmp_path: Path) -> None:
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    async with bridge_over_http(tmp_path) as (base, _, _), httpx2.AsyncClient(base_url=base) as http:
        opened = await http.post(
            "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Authorization": f"Bearer {ANA}"}
        )
        session = {
            **JSON_HEADERS,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18",
        }
        stolen = await http.post("/mcp", json=ping, headers={**session, "Authorization": f"Bearer {BOB}"})
        closed = await http.delete("/mcp", headers={**session, "Authorization": f"Bearer {BOB}"})
        own = await http.post("/mcp", json=ping, headers={**session, "Authorization": f"Bearer {ANA}"})
    assert stolen.status_code == 404 and closed.status_code == 404
    assert own.status_code == 200


async def test_the_audit_ledger_records_tenant_and_actor_and_still_verifies(tmp_path: Path) -> None:
    ledger = tmp_path / "audit.jsonl"
    audit = AuditLog(ledger, binary="thump")
    async with bridge_over_http(tmp_path, audit=audit) as (base, _, _):
        for token in (ANA, BOB, OPS):
            async with client(base, token) as connected:
                await connected.call_tool("thump_say", {"text": "audited"})
                await connected.call_tool("thump_touch", {"path": str(tmp_path / "refused")})  # denied
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [(e.get("tenant"), e.get("actor"), e["success"]) for e in events] == [
        ("acme", "ana@example.com", True),
        ("acme", "ana@example.com", False),
        ("globex", "ci:nightly", True),
        ("globex", "ci:nightly", False),
        (None, None, True),
        (None, None, False),
    ]
    assert "tenant" not in events[4] and "actor" not in events[4]
    report = verify_file(ledger)
    assert report.intact, report.errors
    text = ledger.read_text()
    assert not any(token in text for token in (ANA, BOB, OPS))


async def test_a_reload_adds_and_removes_tokens_without_a_restart(tmp_path: Path) -> None:
    async with (
        bridge_over_http(tmp_path) as (base, keyring, messages),
        httpx2.AsyncClient(base_url=base) as http,
    ):

        async def status(token: str) -> int:
            headers = {**JSON_HEADERS, "Authorization": f"Bearer {token}"}
            return (await http.post("/mcp", json=INITIALIZE, headers=headers)).status_code

        assert [await status(t) for t in (ANA, BOB)] == [200, 200]
        assert keyring.path is not None
        Path(keyring.path).write_text(f"{ANA} acme ana\n{OPS} initech\n")
        assert await reload_tokens(keyring)
        assert [await status(t) for t in (ANA, BOB, OPS)] == [200, 401, 200]
        async with client(base, OPS) as connected:
            assert await seen(connected, ENV_BRIDGE_TENANT) == "initech"

        Path(keyring.path).write_text(f"{ANA} acme\n{BOB} acme bad;actor\n")
        assert not await reload_tokens(keyring)
        assert [await status(t) for t in (ANA, BOB, OPS)] == [200, 401, 200]
    refused = [m for m in messages if m.startswith("SIGHUP: keeping")]
    assert refused == [
        f"SIGHUP: keeping the 2 tokens, 2 tenants in force: token file {keyring.path}, line 2: "
        "the actor (field 3) must be 1-128 letters, digits, '.', '_', '-', '@', ':' or '+', "
        "starting with a letter or digit."
    ]


async def test_a_token_at_its_call_cap_gets_an_error_result_while_others_and_other_requests_pass(
    tmp_path: Path,
) -> None:
    pid_file, ledger = tmp_path / "pid", tmp_path / "audit.jsonl"
    outcome: list[Any] = []
    async with (
        bridge_over_http(tmp_path, audit=AuditLog(ledger), max_calls_per_caller=1) as (base, _, _),
        client(base, ANA, "legacy") as ana,
        client(base, BOB, "legacy") as bob,
    ):

        async def long_call() -> None:
            outcome.append(await ana.call_tool("thump_sleep", {"seconds": 60, "pid_file": str(pid_file)}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            await wait_for_file(pid_file, BOUND)
            refused = await ana.call_tool("thump_say", {"text": "second"})
            assert refused.is_error
            assert "already has 1 tool call(s) running" in refused.content[0].text  # type: ignore[union-attr]
            assert (await ana.list_tools()).tools  # only tool calls count against the cap
            other = await bob.call_tool("thump_say", {"text": "bob is not held up"})
            assert other.content[0].text == "bob is not held up\n"  # type: ignore[union-attr]
            os.kill(read_pid(pid_file), signal.SIGKILL)  # ends the long call now
        freed = await ana.call_tool("thump_say", {"text": "freed"})
    assert outcome[0].is_error  # killed
    assert freed.content[0].text == "freed\n"  # type: ignore[union-attr]
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    refusals = [e for e in events if "(1 per token: --max-calls-per-token)" in e["result"].get("reason", "")]
    assert [(e["tool_name"], e["tenant"], e["success"]) for e in refusals] == [("thump.say", "acme", False)]
