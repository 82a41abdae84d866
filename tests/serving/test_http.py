"""The Streamable HTTP transport: a real uvicorn on an ephemeral loopback port,
driven by the SDK's real client and by raw HTTP requests.

Status codes pinned here are the ones clients see: 401 (ours, with a Bearer
challenge), 421 for a foreign Host and 403 for a foreign Origin (the SDK's
``TransportSecurityMiddleware``), 413 for an oversized body (the SDK's limit).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import Process
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette

from korg_bridge import BridgeOptions, ConfigError, Document, Policy, UsageError, build_server, discover
from korg_bridge.bridge.process import KILL_GRACE
from korg_bridge.config import ENV_BRIDGE_TOKEN as TOKEN_ENV
from korg_bridge.serving.http import (
    build_http_app,
    is_loopback,
    load_token,
    parse_listen,
    security_settings,
    serve_http,
)
from tests.helpers.bridge_client import INITIALIZE
from tests.helpers.cli import python_env
from tests.helpers.paths import FIXTURE_BINS, REPO

pytestmark = pytest.mark.anyio

TOKEN = "test-token_0123456789"
HEALTH = {"name": "korg-bridge", "version": "0.1.0", "binary": "thump", "tools": 7}
BOUND = 20.0
"""Seconds any one wait in these tests may take before it fails instead of hanging."""

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
URL_PATTERN = re.compile(r"http://\S+/mcp")


_documents: list[Document] = []


async def thump_server() -> Server[Any]:
    """A fresh server each time (an HTTP app can be served once); discovery is shared."""
    if not _documents:
        _documents.append(await discover(str(FIXTURE_BINS / "thump")))
    return build_server(_documents[0], BridgeOptions(policy=Policy()))


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@asynccontextmanager
async def serving(**overrides: Any) -> AsyncIterator[str]:
    """serve_http on an ephemeral loopback port; yields the base URL, stops by cancellation."""
    server = await thump_server()
    options: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "token": TOKEN, "health": HEALTH}
    options.update(overrides)
    logger = logging.getLogger("korg_bridge.serving.http")
    handler, level = _Messages(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    ready = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(serve_http, server, ready=ready, **options))
            with anyio.fail_after(BOUND):
                await ready.wait()
            found = [m.group() for msg in handler.messages if (m := URL_PATTERN.search(msg))]
            assert found, f"no listening URL logged: {handler.messages}"
            yield found[0].removesuffix("/mcp")
            tg.cancel_scope.cancel()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert not any(TOKEN in msg for msg in handler.messages)


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- through the SDK client ------------------------------------------------------------


async def test_a_client_with_the_token_lists_and_calls_tools() -> None:
    async with (
        serving() as base,
        httpx2.AsyncClient(headers=bearer()) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("thump_say", {"text": "hi"})
    assert {"thump_say", "thump_sleep"} <= names
    assert not result.is_error
    assert result.content[0].text == "hi\n"  # type: ignore[union-attr]


async def test_loopback_without_a_token_serves_without_authorization() -> None:
    async with (
        serving(token=None) as base,
        httpx2.AsyncClient() as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("thump_say", {"text": "open"})
    assert result.content[0].text == "open\n"  # type: ignore[union-attr]


# --- the gates, with raw requests ------------------------------------------------------


async def test_a_request_without_the_token_gets_401_and_a_bearer_challenge() -> None:
    async with serving() as base, httpx2.AsyncClient(base_url=base) as http:
        responses = [
            await http.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS),
            await http.get("/mcp"),
            await http.get("/anything-else"),
        ]
    for response in responses:
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer ")
        assert "Authorization: Bearer" in response.json()["message"]


@pytest.mark.parametrize(
    "authorization", [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer"]
)
async def test_a_wrong_token_gets_401_invalid_token(authorization: str) -> None:
    async with serving() as base, httpx2.AsyncClient(base_url=base) as http:
        response = await http.post(
            "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Authorization": authorization}
        )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="korg-bridge", error="invalid_token"'


async def test_the_right_token_passes_the_gate() -> None:
    async with serving() as base, httpx2.AsyncClient(base_url=base, headers=bearer()) as http:
        response = await http.post("/mcp", json=INITIALIZE, headers=JSON_HEADERS)
    assert response.status_code == 200
    assert "mcp-session-id" in response.headers


async def test_healthz_answers_without_a_token() -> None:
    async with serving() as base, httpx2.AsyncClient(base_url=base) as http:
        response = await http.get("/healthz")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"status": "ok", **HEALTH}


async def test_a_foreign_origin_gets_the_sdks_403() -> None:
    async with serving() as base, httpx2.AsyncClient(base_url=base, headers=bearer()) as http:
        response = await http.post(
            "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Origin": "http://evil.example"}
        )
        loopback = await http.post(
            "/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Origin": "http://localhost:5173"}
        )
    assert response.status_code == 403
    assert loopback.status_code == 200


async def test_a_foreign_host_gets_the_sdks_421() -> None:
    async with serving() as base, httpx2.AsyncClient(base_url=base, headers=bearer()) as http:
        response = await http.post("/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Host": "evil.example"})
    assert response.status_code == 421


async def test_extra_allowed_hosts_and_origins_are_accepted_on_any_port() -> None:
    async with (
        serving(allowed_hosts=["bridge.example"], allowed_origins=["https://app.example"]) as base,
        httpx2.AsyncClient(base_url=base, headers=bearer()) as http,
    ):
        port = httpx2.URL(base).port
        response = await http.post(
            "/mcp",
            json=INITIALIZE,
            headers={**JSON_HEADERS, "Host": f"bridge.example:{port}", "Origin": "https://app.example"},
        )
    assert response.status_code == 200


async def test_a_body_over_the_limit_gets_413() -> None:
    async with serving(max_body_bytes=1024) as base, httpx2.AsyncClient(base_url=base) as http:
        oversized = {**INITIALIZE, "padding": "x" * 4096}
        response = await http.post("/mcp", json=oversized, headers={**JSON_HEADERS, **bearer()})
        anonymous = await http.post("/mcp", json=oversized, headers=JSON_HEADERS)
    assert response.status_code == 413
    assert anonymous.status_code == 401  # the token is checked before the body is read


def test_the_allowed_hosts_cover_loopback_names_the_bound_host_and_extras() -> None:
    settings = security_settings("::", ["bridge.example", "other.example:8443"], ["https://app.example"])
    for host in ("127.0.0.1:*", "localhost:*", "[::1]:*", "[::]:*", "localhost", "bridge.example:*"):
        assert host in settings.allowed_hosts
    assert "other.example:8443" in settings.allowed_hosts
    assert "other.example:8443:*" not in settings.allowed_hosts
    for origin in ("http://localhost:*", "http://[::1]:*", "https://app.example", "https://app.example:*"):
        assert origin in settings.allowed_origins
    assert settings.enable_dns_rebinding_protection


# --- refusals before anything is bound -------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "bridge.example"])
async def test_a_non_loopback_host_without_a_token_is_refused(host: str) -> None:
    server = await thump_server()
    message = f"refusing to listen on {host} without a token: set {TOKEN_ENV} or pass --token-file FILE"
    with pytest.raises(ConfigError) as built:
        build_http_app(server, host=host, token=None, health=HEALTH)
    assert built.value.message == message
    assert built.value.exit_code == 3
    with pytest.raises(ConfigError, match="refusing to listen"):
        await serve_http(server, host=host, port=0, token=None, health=HEALTH)


async def test_a_non_loopback_host_with_a_token_builds() -> None:
    app = build_http_app(await thump_server(), host="0.0.0.0", token=TOKEN, health=HEALTH)
    assert isinstance(app, Starlette)


async def test_a_port_in_use_is_a_config_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            await serve_http(await thump_server(), host="127.0.0.1", port=port, token=None, health=HEALTH)


# --- parse_listen, is_loopback, load_token ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("8080", ("127.0.0.1", 8080)),
        ("0.0.0.0:8080", ("0.0.0.0", 8080)),
        ("[::1]:8080", ("::1", 8080)),
        ("[::]:443", ("::", 443)),
        ("localhost:0", ("localhost", 0)),
        (" 65535 ", ("127.0.0.1", 65535)),
    ],
)
def test_parse_listen_accepts_port_or_host_and_port(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "http",
        "8080x",
        "70000",
        "-1",
        ":8080",
        "host:",
        "::1:8080",
        "[::1]",
        "[nohost]:80",
        "a b:80",
        "٨٠",
    ],
)
def test_parse_listen_rejects_anything_else_with_the_expected_form(value: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_listen(value)
    assert "expected [HOST:]PORT" in caught.value.message
    assert "\n" not in caught.value.message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


def test_load_token_reads_the_environment() -> None:
    assert load_token({TOKEN_ENV: f" {TOKEN}\n"}, None) == TOKEN
    assert load_token({}, None) is None


def test_load_token_reads_a_file_stripped_and_prefers_it_to_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(f"{TOKEN}\n")
    path.chmod(0o600)
    assert load_token({}, str(path)) == TOKEN
    assert load_token({TOKEN_ENV: "from-env"}, str(path)) == TOKEN


@pytest.mark.parametrize("content", ["", "  \n"])
def test_an_empty_token_file_is_a_config_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "token"
    path.write_text(content)
    with pytest.raises(ConfigError, match="is empty"):
        load_token({}, str(path))


def test_an_empty_token_variable_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=f"{TOKEN_ENV} is empty"):
        load_token({TOKEN_ENV: " "}, None)


def test_a_missing_token_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nope"
    with pytest.raises(ConfigError) as caught:
        load_token({TOKEN_ENV: TOKEN}, str(path))
    assert f"cannot read token file {path}" in caught.value.message
    assert "--token-file" in caught.value.message
    assert caught.value.exit_code == 3


def test_a_token_with_spaces_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        load_token({TOKEN_ENV: "secret with spaces"}, None)
    assert "secret" not in caught.value.message


def test_a_token_file_others_can_read_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN)
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="korg_bridge.serving.http"):
        assert load_token({}, str(path)) == TOKEN
    assert "chmod 600" in caplog.text
    assert TOKEN not in caplog.text


# --- stopping on a signal, in a real process -------------------------------------------

SERVE_SCRIPT = """
import logging, os, sys
import anyio
from korg_bridge import BridgeOptions, Policy, build_server, discover
from korg_bridge.serving.http import load_token, serve_http

async def main(binary, grace):
    document = await discover(binary)
    server = build_server(document, BridgeOptions(policy=Policy()))
    await serve_http(server, host="127.0.0.1", port=0, token=load_token(os.environ, None),
                     health={"binary": document.binary}, grace=grace)

logging.basicConfig(stream=sys.stderr, level=logging.INFO)
anyio.run(main, sys.argv[1], float(sys.argv[2]))
"""


@asynccontextmanager
async def serving_process(grace: float) -> AsyncIterator[tuple[Process, str, list[bytes]]]:
    """The bridge's HTTP server in a child process; yields it, its URL and its stderr so far."""
    env = python_env()
    env[TOKEN_ENV] = TOKEN
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    argv = [sys.executable, "-c", SERVE_SCRIPT, str(FIXTURE_BINS / "thump"), str(grace)]
    async with await anyio.open_process(argv, env=env) as process:
        assert process.stderr is not None
        stderr: list[bytes] = []
        try:
            with anyio.fail_after(BOUND):
                while not (found := URL_PATTERN.search(b"".join(stderr).decode(errors="replace"))):
                    stderr.append(await process.stderr.receive())
            async with anyio.create_task_group() as tg:
                tg.start_soon(_collect, process, stderr)
                yield process, found.group(), stderr
        finally:
            if process.returncode is None:
                process.kill()


async def _collect(process: Process, into: list[bytes]) -> None:
    assert process.stderr is not None
    async for chunk in process.stderr:
        into.append(chunk)


async def _read_all(process: Process) -> bytes:
    assert process.stdout is not None
    with anyio.fail_after(BOUND):
        return b"".join([chunk async for chunk in process.stdout])


async def _wait_for_start(stamps: Path) -> None:
    with anyio.fail_after(BOUND):
        while not (stamps.exists() and "start" in stamps.read_text()):
            await anyio.sleep(0.02)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sigterm_lets_an_in_flight_call_finish_then_exits_0(tmp_path: Path, mode: str) -> None:
    grace = 8.0
    stamps = tmp_path / "stamps"
    results: list[Any] = []
    async with serving_process(grace) as (process, url, stderr):
        async with (
            httpx2.AsyncClient(headers=bearer()) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            await client.list_tools()  # call_tool would list them afterwards, on a closed port

            async def call() -> None:
                results.append(
                    await client.call_tool("thump_sleep", {"seconds": 1, "stamp_file": str(stamps)})
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await _wait_for_start(stamps)
                process.send_signal(signal.SIGTERM)
        with anyio.fail_after(grace):
            code = await process.wait()
        stdout = await _read_all(process)
    log = b"".join(stderr).decode(errors="replace")
    assert code == 0, log
    assert not results[0].is_error
    assert results[0].content[0].text == "slept\n"
    assert "end" in stamps.read_text()
    assert "SIGTERM: stopping" in log
    assert TOKEN not in log
    assert stdout == b""


@pytest.mark.parametrize(
    ("grace", "signals", "reason"),
    [
        (0.5, [signal.SIGTERM], "grace period over: cutting 1 request(s)"),
        (8.0, [signal.SIGTERM, signal.SIGINT], "SIGINT during shutdown: stopping now, cutting 1 request(s)"),
    ],
    ids=["grace-over", "second-signal"],
)
async def test_a_call_still_running_is_cut_and_its_process_killed(
    tmp_path: Path, grace: float, signals: list[signal.Signals], reason: str
) -> None:
    stamps, pid_file = tmp_path / "stamps", tmp_path / "pid"
    outcome: list[Any] = []
    async with (
        serving_process(grace) as (process, url, stderr),
        httpx2.AsyncClient(headers=bearer()) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        await client.list_tools()

        async def call() -> None:
            arguments = {"seconds": 30, "stamp_file": str(stamps), "pid_file": str(pid_file)}
            with pytest.raises(MCPError) as caught:
                await client.call_tool("thump_sleep", arguments)
            outcome.append(caught.value)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _wait_for_start(stamps)
            for number, signum in enumerate(signals):
                process.send_signal(signum)
                if number < len(signals) - 1:
                    # Two signals pending at once are delivered lowest number first (SIGINT before
                    # SIGTERM): let the bridge take this one before sending the next.
                    with anyio.fail_after(BOUND):
                        while f"{signum.name}: stopping" not in b"".join(stderr).decode(errors="replace"):
                            await anyio.sleep(0.02)
            # A cut call's process gets SIGTERM, then SIGKILL after KILL_GRACE.
            with anyio.fail_after(grace + 2 * KILL_GRACE + 1):
                code = await process.wait()
    log = b"".join(stderr).decode(errors="replace")
    assert code == 0, log
    assert reason in log
    assert outcome, "the call never returned"
    assert "end" not in stamps.read_text()
    pids = [int(pid_file.read_text()), int(Path(f"{pid_file}.grandchild").read_text())]
    with anyio.fail_after(BOUND):
        while any(_alive(pid) for pid in pids):
            await anyio.sleep(0.02)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
