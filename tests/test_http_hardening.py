"""The HTTP transport under hostile input: bodies that are not JSON-RPC get a
JSON-RPC error with the right code, and connection floods cannot keep an
authorised client (or ``/healthz``) from being served. A real uvicorn on an
ephemeral loopback port."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from _bridge_client import INITIALIZE
from test_http import JSON_HEADERS, bearer, serving

pytestmark = pytest.mark.anyio

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
BIG = b"1" * 5000

BAD_BODIES: dict[str, tuple[bytes, int, int | str | None]] = {
    "garbage": (b"this is not json", PARSE_ERROR, None),
    "truncated": (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/li', PARSE_ERROR, 7),
    "batch": (b'[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]', INVALID_REQUEST, None),
    "huge-integer": (
        b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"n": ' + BIG + b"}}",
        PARSE_ERROR,
        8,
    ),
    "not-an-object": (b'"ping"', INVALID_REQUEST, None),
    "no-jsonrpc-member": (b'{"id": "a", "method": "ping"}', INVALID_REQUEST, "a"),
    "boolean-id": (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', INVALID_REQUEST, None),
    "malformed-response": (b'{"jsonrpc": "2.0", "id": 4, "result": 5}', INVALID_REQUEST, 4),
}


async def _session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """Headers of an initialised (2025-era) session."""
    response = await http.post(f"{url}/mcp", content=json.dumps(INITIALIZE), headers=JSON_HEADERS)
    assert response.status_code == 200, response.text
    return {
        **JSON_HEADERS,
        "Mcp-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-06-18",
    }


@pytest.mark.parametrize("session", ["no-session", "session", "2026-header"])
@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_a_body_that_is_not_json_rpc_gets_400_with_the_json_rpc_error(session: str, case: str) -> None:
    body, code, request_id = BAD_BODIES[case]
    async with serving() as url, httpx2.AsyncClient(headers=bearer()) as http:
        headers: dict[str, Any] = dict(JSON_HEADERS)
        if session == "session":
            headers = await _session(http, url)
        elif session == "2026-header":
            headers["MCP-Protocol-Version"] = "2026-07-28"
        response = await http.post(f"{url}/mcp", content=body, headers=headers)
        assert response.status_code == 400
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": code, "message": response.json()["error"]["message"]},
        }
        if session == "session":  # the session still works
            ping = await http.post(
                f"{url}/mcp", json={"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers=headers
            )
            assert ping.status_code == 200
            assert '"id":5,"result":{}' in ping.text


async def test_the_sdk_still_answers_what_it_checks_before_the_body() -> None:
    async with serving() as url, httpx2.AsyncClient(headers=bearer()) as http:
        foreign = await http.post(
            f"{url}/mcp", content=b"garbage", headers={**JSON_HEADERS, "Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        too_big = await http.post(f"{url}/mcp", content=b"x" * (4 * 1024 * 1024 + 1), headers=JSON_HEADERS)
        assert too_big.status_code == 413
        not_json = await http.post(f"{url}/mcp", content=b"garbage", headers={"Content-Type": "text/plain"})
        assert not_json.status_code == 400
        assert "Content-Type" in not_json.text


async def test_without_the_token_a_bad_body_is_still_401() -> None:
    async with serving() as url, httpx2.AsyncClient() as http:
        response = await http.post(f"{url}/mcp", content=b"garbage", headers=JSON_HEADERS)
    assert response.status_code == 401
