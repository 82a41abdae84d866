"""The HTTP transport under hostile input: bodies that are not JSON-RPC get a
JSON-RPC error with the right code, and connection floods cannot keep an
authorised client (or ``/healthz``) from being served. A real uvicorn on an
ephemeral loopback port."""

from __future__ import annotations

import json
import resource
import selectors
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from korg_bridge.auth.admission import ConnectionLimits
from tests.helpers.bridge_client import INITIALIZE
from tests.serving.test_http import JSON_HEADERS, bearer, serving

pytestmark = pytest.mark.anyio

BOUND = 30.0
"""Seconds any one wait here may take before the test fails instead of hanging."""

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


# --- connection floods ----------------------------------------------------------------------

FLOOD = 1000
HALF_A_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriz"


@pytest.fixture
def file_limit() -> Iterator[None]:
    """Room for the flood's client ends and the server's ends in this one process; restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * FLOOD + 1024
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the hard open-file limit ({hard}) is below the {wanted} this test needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port is not None  # loopback only
    return parts.hostname, parts.port


def half_open(where: tuple[str, int], count: int) -> list[socket.socket]:
    """``count`` connections that each send half a request head, then nothing."""
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(where, timeout=BOUND)
            opened.append(sock)
            sock.sendall(HALF_A_HEAD)
            sock.setblocking(False)
    except BaseException:
        for sock in opened:
            sock.close()
        raise
    return opened


def closed_by_server(sock: socket.socket) -> bool:
    """End-of-file or a reset: the server closed it (non-blocking probe)."""
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def wait_all_closed(socks: list[socket.socket], limit: float) -> list[float]:
    """Block until the server closed every socket; the monotonic time each was seen closed."""
    deadline = time.monotonic() + limit
    seen: dict[int, float] = {}
    with selectors.DefaultSelector() as selector:  # epoll: select() stops at descriptor 1024
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        while len(seen) < len(socks):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(socks) - len(seen)} connections still open after {limit}s")
            for key, _ in selector.select(remaining):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if closed_by_server(sock):
                    seen[sock.fileno()] = time.monotonic()
                    selector.unregister(sock)
    return list(seen.values())


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


async def test_an_authorised_client_is_served_while_a_thousand_half_open_connections_are_held(
    file_limit: None,
) -> None:
    header_timeout = 6.0
    async with serving(limits=ConnectionLimits(header_timeout=header_timeout)) as url:
        opened_at = time.monotonic()
        flood = await anyio.to_thread.run_sync(half_open, address(url), FLOOD)
        try:
            with anyio.fail_after(BOUND):
                async with httpx2.AsyncClient(headers=bearer()) as http:
                    health = await http.get(f"{url}/healthz")
                    assert health.status_code == 200
                    async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                        result = await client.call_tool("thump_say", {"text": "served"})
            assert result.content[0].text == "served\n"  # type: ignore[union-attr]
            served_at = time.monotonic()
            still_held = sum(not closed_by_server(sock) for sock in flood)
            if served_at - opened_at < header_timeout - 1:  # (on a very slow machine the timeout came first)
                assert still_held == FLOOD  # the server held all of them while serving
            closed_at = await anyio.to_thread.run_sync(wait_all_closed, flood, header_timeout + BOUND)
        finally:
            close_all(flood)
    # Closed by the header timeout, not before it.
    assert min(closed_at) - opened_at >= header_timeout - 0.5


async def test_beyond_the_cap_the_oldest_unauthorised_connection_is_closed() -> None:
    async with serving(limits=ConnectionLimits(max_pending=5)) as url:
        where = address(url)
        socks: list[socket.socket] = []
        try:
            socks += await anyio.to_thread.run_sync(half_open, where, 5)
            socks += await anyio.to_thread.run_sync(half_open, where, 1)
            await anyio.to_thread.run_sync(wait_all_closed, socks[:1], BOUND)
            assert not any(closed_by_server(sock) for sock in socks[1:])
            # An honest client is the newest connection: it pushes out the next oldest and is served.
            async with httpx2.AsyncClient(headers=bearer()) as http:
                response = await http.post(
                    f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=JSON_HEADERS
                )
            assert response.status_code == 400  # served: the SDK wants a session first
            await anyio.to_thread.run_sync(wait_all_closed, socks[1:2], BOUND)
        finally:
            close_all(socks)


def authorised_ping(sock: socket.socket) -> bytes:
    """One authorised request on a raw kept-alive connection; its response head and body."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"Authorization: {bearer()['Authorization']}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head_part, _, rest = received.partition(b"\r\n\r\n")
    length = int(
        next(line for line in head_part.split(b"\r\n") if line.lower().startswith(b"content-length:"))[15:]
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    return head_part + b"\r\n\r\n" + rest


async def test_an_authorised_connection_no_longer_counts_against_the_cap() -> None:
    async with serving(limits=ConnectionLimits(max_pending=2)) as url:
        where = address(url)
        honest = socket.create_connection(where, timeout=BOUND)
        flood: list[socket.socket] = []
        try:
            assert b"Missing session ID" in await anyio.to_thread.run_sync(authorised_ping, honest)
            flood = await anyio.to_thread.run_sync(half_open, where, 4)
            await anyio.to_thread.run_sync(wait_all_closed, flood[:2], BOUND)  # the cap at work
            honest.setblocking(False)
            assert not closed_by_server(honest)
            honest.setblocking(True)
            assert b"Missing session ID" in await anyio.to_thread.run_sync(authorised_ping, honest)
        finally:
            close_all([honest, *flood])


async def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout() -> None:
    async with serving(limits=ConnectionLimits(header_timeout=0.5)) as url:
        sock = socket.create_connection(address(url), timeout=BOUND)
        try:
            sock.setblocking(False)
            await anyio.to_thread.run_sync(wait_all_closed, [sock], BOUND)
        finally:
            sock.close()


async def test_a_stalled_request_body_is_cut_after_the_idle_timeout() -> None:
    async with serving(limits=ConnectionLimits(body_idle_timeout=0.5)) as url:
        sock = socket.create_connection(address(url), timeout=BOUND)
        try:
            sock.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\n"
                b"Authorization: " + bearer()["Authorization"].encode() + b"\r\n"
                b'Content-Length: 100\r\n\r\n{"jsonrpc"'
            )
            sock.setblocking(False)
            await anyio.to_thread.run_sync(wait_all_closed, [sock], BOUND)
        finally:
            sock.close()


async def test_a_call_that_outlasts_every_timeout_is_not_cut() -> None:
    limits = ConnectionLimits(header_timeout=0.3, body_idle_timeout=0.3, keep_alive_timeout=1)
    async with (
        serving(limits=limits) as url,
        httpx2.AsyncClient(headers=bearer()) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("thump_sleep", {"seconds": 1.5})
        again = await client.call_tool("thump_say", {"text": "still here"})
    assert result.content[0].text == "slept\n"  # type: ignore[union-attr]
    assert again.content[0].text == "still here\n"  # type: ignore[union-attr]


def test_the_server_raises_its_soft_file_limit_to_the_hard_one_with_a_ceiling() -> None:
    from korg_bridge.auth.admission import FILE_LIMIT_CEILING, raise_file_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
        now = raise_file_limit()
        expected = FILE_LIMIT_CEILING if hard == resource.RLIM_INFINITY else min(hard, FILE_LIMIT_CEILING)
        assert now == expected == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_pending_cap_leaves_half_the_descriptors_free() -> None:
    assert ConnectionLimits().pending_cap(1024) == 512
    assert ConnectionLimits().pending_cap(20000) == 1024
    assert ConnectionLimits(max_pending=7).pending_cap(20000) == 7


# --- when descriptors run out all the same ----------------------------------------------------------


def test_a_refused_accept_is_one_warning_per_flood(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import errno
    import logging

    from korg_bridge.auth.admission import FLOOD_QUIET, AcceptErrors

    now = [0.0]
    handler = AcceptErrors(96, clock=lambda: now[0])
    loop = asyncio.new_event_loop()
    refused = {
        "message": "socket.accept() out of system resource",
        "exception": OSError(errno.EMFILE, "Too many open files"),
    }
    try:
        with caplog.at_level(logging.DEBUG, logger="korg_bridge.auth.admission"):
            for _ in range(2048):  # one readiness of the accept loop, under CPython 3.11
                handler(loop, refused)
            now[0] += FLOOD_QUIET / 2
            handler(loop, refused)  # the same flood
            now[0] += FLOOD_QUIET * 2
            handler(loop, refused)  # a new one
    finally:
        loop.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and handler.refused == 2050
    assert (
        "cannot accept more connections: Too many open files (the open-file limit is 96)"
        in warnings[0].getMessage()
    )


def test_a_flood_that_exhausts_the_file_limit_logs_one_warning_and_no_traceback(tmp_path: Any) -> None:
    """The real server under a low open-file limit (set before it starts: it cannot raise it),
    flooded with connections that each pass the gate (so the cap on unauthorised ones does not
    close them) and stay open."""
    import re
    import signal
    import subprocess
    import sys

    from tests.helpers.paths import FIXTURE_BINS, REPO

    limit = 96
    wrapper = (
        "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]),) * 2); "
        "os.execv(sys.executable, [sys.executable, '-m', 'korg_bridge', *sys.argv[2:]])"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", wrapper, str(limit), str(FIXTURE_BINS / "demo"), "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert server.stderr is not None
    clients: list[socket.socket] = []
    try:
        found = re.search(r"127\.0\.0\.1:(\d+)/mcp", server.stderr.readline())
        assert found, "the server did not say where it listens"
        port = int(found.group(1))
        request = f"GET /nothing-here HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        for _ in range(limit * 3):
            client = socket.create_connection(("127.0.0.1", port), timeout=BOUND)
            client.sendall(request)
            clients.append(client)
        time.sleep(2)  # the server keeps trying to accept the rest meanwhile (asyncio: once a second)
    finally:
        for client in clients:
            client.close()
        server.send_signal(signal.SIGTERM)
        try:
            _, stderr = server.communicate(timeout=BOUND)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait(timeout=BOUND)
    warnings = [line for line in stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "cannot accept more connections: Too many open files" in warnings[0], (
        stderr[:2000]
    )
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr[:2000]
