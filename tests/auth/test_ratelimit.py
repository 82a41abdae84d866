"""Per-token rate limits: the bucket arithmetic with a clock the test moves,
then the 429s a real server answers (uvicorn on loopback, raw requests and the
SDK's client). The cap on calls in flight is counted by the bridge: see
``test_http_identity.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from korg_bridge.auth.gate import RATE_LIMITED
from korg_bridge.auth.ratelimit import SESSION_START, CallCap, Limiter, Rate
from korg_bridge.auth.tokens import parse_tokens
from korg_bridge.errors import UsageError
from tests.helpers.bridge_client import INITIALIZE
from tests.serving.test_http import JSON_HEADERS, serving

pytestmark = pytest.mark.anyio

BOUND = 30.0
"""Seconds any one wait here may take before the test fails instead of hanging."""

ANA = "tok-ana-7Hq2vX9pLm3Rk8Wz"
BOB = "tok-bob-Qw3Er4Ty5Ui6Op7A"
TOKENS = parse_tokens(f"{ANA} acme ana\n{BOB} globex bob\n", "token file t")
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# --- the arithmetic ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rate"),
    [("10/s", Rate(10, 1.0)), ("600/m", Rate(600, 60.0)), (" 5000 / h ", Rate(5000, 3600.0))],
)
def test_a_rate_is_a_count_per_second_minute_or_hour(text: str, rate: Rate) -> None:
    assert Rate.parse(text) == rate
    assert str(rate) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["", "10", "0/s", "-1/s", "1.5/s", "10/d", "10/sec", "ten/s", "1/s/s"])
def test_anything_else_is_a_usage_error_with_the_expected_form(text: str) -> None:
    with pytest.raises(UsageError, match=r"expected N/s, N/m or N/h") as caught:
        Rate.parse(text)
    assert caught.value.exit_code == 2


def test_a_burst_of_n_passes_then_the_wait_is_rounded_up_to_whole_seconds() -> None:
    clock = Clock()
    limiter = Limiter(Rate(6, 4.0), clock=clock)  # 1.5 per second
    assert [limiter.admit("a") for _ in range(6)] == [None] * 6
    refusal = limiter.admit("a")
    assert refusal is not None and refusal.retry_after == 1 and refusal.first
    assert "rate limit of 6 requests per 4 s (--rate-limit); retry after 1 s" in refusal.message
    again = limiter.admit("a")
    assert again is not None and not again.first  # logged once per run of refusals
    clock.now += 0.7  # 1.05 requests' worth
    assert limiter.admit("a") is None
    refusal = limiter.admit("a")
    assert refusal is not None and refusal.retry_after == 1
    clock.now += 60  # refills to the burst, no further
    assert [limiter.admit("a") for _ in range(7)][-1] is not None


def test_a_bucket_always_holds_a_session_s_start() -> None:
    clock = Clock()
    limiter = Limiter(Rate(2, 1.0), clock=clock)
    assert Rate(2, 1.0).burst == SESSION_START == 4
    assert [limiter.admit("a") for _ in range(SESSION_START)] == [None] * SESSION_START
    refusal = limiter.admit("a")
    assert refusal is not None and "rate limit of 2 requests per second" in refusal.message
    clock.now += 0.5  # refilled at the rate asked for: 2 a second
    assert limiter.admit("a") is None and limiter.admit("a") is not None


def test_a_slow_rate_asks_for_a_long_wait_and_each_token_has_its_own_bucket() -> None:
    clock = Clock()
    limiter = Limiter(Rate(2, 60.0), clock=clock)
    assert [limiter.admit("a") for _ in range(SESSION_START)] == [None] * SESSION_START
    refusal = limiter.admit("a")
    assert refusal is not None and refusal.retry_after == 30
    assert limiter.admit("b") is None


def test_the_call_cap_counts_calls_until_they_end_and_per_token() -> None:
    cap = CallCap(2)
    assert cap.enter("a") is None and cap.enter("a") is None
    refusal = cap.enter("a")
    assert refusal is not None and "already has 2 tool call(s) running" in refusal
    assert "(2 per token: --max-calls-per-token)" in refusal and "Nothing was run" in refusal
    assert cap.enter("b") is None
    cap.leave("a")
    assert cap.running("a") == 1 and cap.enter("a") is None
    for _ in range(3):
        cap.leave("b")  # more ends than starts never goes below zero
    assert cap.running("b") == 0
    assert CallCap(None).enter("a") is None
    with pytest.raises(UsageError):
        CallCap(0)


def test_a_reload_keeps_the_budget_of_remaining_tokens_and_forgets_removed_ones() -> None:
    clock = Clock()
    limiter = Limiter(Rate(1, 60.0), clock=clock)
    assert all(limiter.admit("kept") is None for _ in range(SESSION_START))
    assert limiter.admit("gone") is None
    limiter.retain({"kept"})
    assert limiter.admit("kept") is not None  # a reload does not reset a limit
    assert limiter.admit("gone") is None  # a token added back starts afresh


# --- over HTTP ---------------------------------------------------------------------------


@asynccontextmanager
async def limited(rate: Rate) -> AsyncIterator[str]:
    async with serving(token=None, tokens=TOKENS, rate_limit=rate) as base:
        yield base


def bearer(token: str) -> dict[str, str]:
    return {**JSON_HEADERS, "Authorization": f"Bearer {token}"}


async def exhaust(http: httpx2.AsyncClient, base: str, token: str) -> httpx2.Response:
    """Ping until the token is refused; the refusal."""
    for _ in range(200):
        response = await http.post(f"{base}/mcp", json=PING, headers=bearer(token))
        if response.status_code == 429:
            return response
    raise AssertionError("never rate limited")


async def test_over_the_rate_limit_a_token_gets_429_with_retry_after_then_recovers() -> None:
    # A burst of 2, refilled at 10 a second: refused fast, recovered fast.
    async with limited(Rate(2, 0.2)) as base, httpx2.AsyncClient() as http:
        refused = await exhaust(http, base, ANA)
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["content-type"] == "application/json"
        error = refused.json()["error"]
        assert error["code"] == RATE_LIMITED and error["data"] == {"retry_after": 1}
        assert "over its rate limit" in error["message"]
        # Others are not limited by it: another token, /healthz, and no token at all (401 first).
        assert (await http.post(f"{base}/mcp", json=PING, headers=bearer(BOB))).status_code != 429
        assert all([(await http.get(f"{base}/healthz")).status_code == 200 for _ in range(20)])
        assert (await http.post(f"{base}/mcp", json=PING, headers=JSON_HEADERS)).status_code == 401
        with anyio.fail_after(BOUND):
            while (await http.post(f"{base}/mcp", json=PING, headers=bearer(ANA))).status_code == 429:
                await anyio.sleep(0.05)


async def test_the_sdk_client_gets_the_429_as_that_call_s_error_and_its_session_goes_on() -> None:
    async with (
        limited(Rate(6, 6.0)) as base,  # a legacy session's start costs 3 of the burst
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ANA}"}) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy") as client,
    ):
        await client.list_tools()
        with anyio.fail_after(BOUND):
            while True:
                try:
                    await client.call_tool("thump_say", {"text": "hi"})
                except MCPError as exc:
                    assert "over its rate limit" in str(exc)
                    break
            while True:  # the same session serves the next call once the bucket refilled
                try:
                    result = await client.call_tool("thump_say", {"text": "again"})
                    break
                except MCPError:
                    await anyio.sleep(0.05)
    assert result.content[0].text == "again\n"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_session_s_start_is_never_refused_at_a_low_rate(mode: str) -> None:
    async with (
        limited(Rate(2, 1.0)) as base,
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {ANA}"}) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        tools = await client.list_tools()  # initialize, initialized, (a GET stream), tools/list
    assert tools.tools


async def test_a_429_body_is_a_json_rpc_error_even_for_an_initialize() -> None:
    async with limited(Rate(1, 60.0)) as base, httpx2.AsyncClient() as http:
        firsts = [await http.post(f"{base}/mcp", json=INITIALIZE, headers=bearer(ANA)) for _ in range(4)]
        second = await http.post(f"{base}/mcp", json=INITIALIZE, headers=bearer(ANA))
    assert [first.status_code for first in firsts] == [200] * 4
    assert second.status_code == 429 and second.headers["retry-after"] == "60"
    assert json.loads(second.text)["jsonrpc"] == "2.0"
