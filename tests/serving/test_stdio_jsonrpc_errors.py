"""Every line a client sends over stdio gets an answer: a real bridge
(``python -m korg_bridge thump``) spoken to in raw JSON lines, because the
SDK's client never sends garbage. Bad lines get a JSON-RPC error (-32700 or
-32600, with the request's id when it can be told) and the session goes on.
The parsing and line splitting underneath are checked in process too."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from korg_bridge.serving.jsonrpc import MAX_MESSAGE_BYTES, Rejection, parse_message
from korg_bridge.serving.stdio import LineSplitter, Overflow
from tests.helpers.bridge_client import INITIALIZE, REPO, THUMP, child_env

pytestmark = pytest.mark.anyio

BOUND = 30.0
"""Seconds any one answer may take before the test fails instead of hanging."""

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
BIG = "1" * 5000
"""An integer Python refuses to convert (the limit is 4,300 digits)."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope: one bridge answers every case (starting one costs a second)."""
    return "asyncio"


@dataclass
class RawBridge:
    """A bridge on pipes, spoken to one JSON line at a time."""

    process: Process
    stdout: BufferedByteReceiveStream
    stderr: Any
    next_id: int = 1000

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(line + b"\n")

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(BOUND):
            line = await self.stdout.receive_until(b"\n", 16 * 1024 * 1024)
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def ping_is_answered(self) -> None:
        self.next_id += 1
        await self.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "ping"}).encode())
        assert await self.receive() == {"jsonrpc": "2.0", "id": self.next_id, "result": {}}


@pytest.fixture(scope="module")
async def bridge() -> AsyncIterator[RawBridge]:
    with tempfile.TemporaryFile() as errors:
        async with await anyio.open_process(
            [sys.executable, "-m", "korg_bridge", str(THUMP)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=child_env(),
            cwd=REPO,
        ) as process:
            assert process.stdout is not None and process.stdin is not None
            raw = RawBridge(process, BufferedByteReceiveStream(process.stdout), errors)
            await raw.send(json.dumps(INITIALIZE).encode())
            assert (await raw.receive())["id"] == INITIALIZE["id"]
            await raw.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            yield raw
            await process.stdin.aclose()
            with anyio.fail_after(BOUND):
                assert await process.wait() == 0
        errors.seek(0)
        log = errors.read().decode(errors="replace")
    assert "Traceback" not in log


BAD_LINES: dict[str, tuple[bytes, int, int | str | None]] = {
    "garbage": (b"this is not json", PARSE_ERROR, None),
    "truncated-with-integer-id": (b'{"jsonrpc": "2.0", "id": 7, "method": "pi', PARSE_ERROR, 7),
    "truncated-with-string-id": (b'{"jsonrpc":"2.0","id":"req-7","method":"tools/li', PARSE_ERROR, "req-7"),
    "truncated-inside-the-id": (b'{"jsonrpc": "2.0", "id": 12', PARSE_ERROR, None),
    "batch": (b'[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]', INVALID_REQUEST, None),
    "empty-batch": (b"[]", INVALID_REQUEST, None),
    "huge-integer-in-params": (
        b'{"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"n": ' + BIG.encode() + b"}}",
        PARSE_ERROR,
        8,
    ),
    "huge-integer-id": (
        b'{"jsonrpc": "2.0", "id": ' + BIG.encode() + b', "method": "ping"}',
        PARSE_ERROR,
        None,
    ),
    "nan": (b'{"jsonrpc": "2.0", "id": 11, "method": "ping", "params": {"x": NaN}}', PARSE_ERROR, 11),
    "not-utf8": (b'{"jsonrpc": "2.0", "id": 12, "method": "ping", "params": {"x": "\xff"}}', PARSE_ERROR, 12),
    "a-string": (b'"ping"', INVALID_REQUEST, None),
    "a-number": (b"42", INVALID_REQUEST, None),
    "no-jsonrpc-member": (b'{"id": 9, "method": "ping"}', INVALID_REQUEST, 9),
    "params-not-an-object": (
        b'{"jsonrpc": "2.0", "id": 10, "method": "ping", "params": [1]}',
        INVALID_REQUEST,
        10,
    ),
    "boolean-id": (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', INVALID_REQUEST, None),
    "fractional-id": (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', INVALID_REQUEST, None),
    "method-not-a-string": (b'{"jsonrpc": "2.0", "id": "m", "method": 5}', INVALID_REQUEST, "m"),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
async def test_a_bad_line_is_answered_with_a_json_rpc_error_and_the_session_goes_on(
    bridge: RawBridge, case: str
) -> None:
    line, code, request_id = BAD_LINES[case]
    await bridge.send(line)
    answer = await bridge.receive()
    assert answer["jsonrpc"] == "2.0"
    assert answer["id"] == request_id
    assert answer["error"]["code"] == code, answer
    assert answer["error"]["message"].startswith("Parse error" if code == PARSE_ERROR else "Invalid Request")
    await bridge.ping_is_answered()


async def test_a_line_over_the_cap_is_answered_and_dropped_without_being_kept(bridge: RawBridge) -> None:
    assert bridge.process.stdin is not None
    await bridge.process.stdin.send(b'{"jsonrpc": "2.0", "id": 13, "method": "ping", "params": {"x": "')
    filler = b"a" * (1024 * 1024)
    for _ in range(MAX_MESSAGE_BYTES // len(filler) + 1):
        await bridge.process.stdin.send(filler)
    # Answered as soon as the line crossed the cap, before it even ended.
    answer = await bridge.receive()
    assert answer["id"] == 13
    assert answer["error"]["code"] == INVALID_REQUEST
    assert "larger than 4 MiB" in answer["error"]["message"]
    await bridge.process.stdin.send(filler + b'"}}\n')  # the rest of it is read and dropped
    await bridge.ping_is_answered()


async def test_a_malformed_response_is_not_answered_but_the_session_goes_on(bridge: RawBridge) -> None:
    await bridge.send(b'{"jsonrpc": "2.0", "id": 99, "result": 5}')
    await bridge.ping_is_answered()  # the next line out is the ping's answer, not an error


async def test_blank_lines_are_ignored(bridge: RawBridge) -> None:
    await bridge.send(b"")
    await bridge.send(b"  \r")
    await bridge.ping_is_answered()


def test_a_bridge_started_with_stdin_closed_says_so_and_exits_2() -> None:
    starter = "import os, sys; os.close(0); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    done = subprocess.run(
        [sys.executable, "-c", starter, "-m", "korg_bridge", str(THUMP)],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=REPO,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 2
    assert "korg-bridge: error: stdin is not open" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


# --- in process -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_each_bad_line_parses_to_its_rejection(case: str) -> None:
    line, code, request_id = BAD_LINES[case]
    rejection = parse_message(line)
    assert isinstance(rejection, Rejection)
    assert (rejection.code, rejection.id, rejection.answer) == (code, request_id, True)
    assert "\n" not in rejection.message


def test_an_oversized_message_keeps_the_id_found_in_its_head() -> None:
    from korg_bridge.serving.jsonrpc import oversized

    rejection = oversized(b'{"jsonrpc": "2.0", "id": "big", "params": {"x": "aaaa')
    assert (rejection.code, rejection.id) == (INVALID_REQUEST, "big")
    assert oversized(b"aaaa").id is None


def test_a_valid_message_parses_exactly_as_the_sdk_parses_it() -> None:
    import mcp_types as types

    raw = json.dumps(INITIALIZE).encode()
    assert parse_message(raw) == types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
    notification = parse_message(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert isinstance(notification, types.JSONRPCNotification)


def test_a_rejection_serialises_its_null_id() -> None:
    rejection = parse_message(b"{")
    assert isinstance(rejection, Rejection)
    assert json.loads(rejection.body()) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": PARSE_ERROR, "message": rejection.message},
    }


def test_lines_split_across_chunks_come_out_whole() -> None:
    splitter = LineSplitter(cap=100)
    out = [*splitter.feed(b'{"a":'), *splitter.feed(b'1}\n{"b"'), *splitter.feed(b":2}\n\n"), *splitter.end()]
    assert out == [b'{"a":1}', b'{"b":2}', b""]


def test_a_line_over_the_cap_overflows_once_and_the_next_line_is_whole() -> None:
    splitter = LineSplitter(cap=10)
    out = [*splitter.feed(b"0123456789ABC"), *splitter.feed(b"DEF" * 100), *splitter.feed(b"GHI\nok\n")]
    assert out == [Overflow(b"0123456789ABC"), b"ok"]
    assert len(splitter._partial) == 0


def test_a_last_line_without_a_newline_is_still_a_line() -> None:
    splitter = LineSplitter(cap=10)
    assert [*splitter.feed(b"tail")] == []
    assert [*splitter.end()] == [b"tail"]


async def test_the_transport_answers_bad_lines_and_passes_good_ones_in_process() -> None:
    """The same transport on explicit pipes, with the server in this process."""
    import os

    from korg_bridge import BridgeOptions, Policy, build_server, discover
    from korg_bridge.serving.stdio import stdio_transport

    server = build_server(await discover(str(THUMP)), BridgeOptions(policy=Policy(), reload=False))
    client_to_server, server_in = os.pipe()
    server_out, server_to_client = os.pipe()
    lines = [
        json.dumps(INITIALIZE).encode(),
        b"[1, 2]",
        b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}',
        b"{",
    ]
    received = b""

    async def serve() -> None:
        async with stdio_transport(client_to_server, server_to_client) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        with anyio.fail_after(BOUND):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve)
                os.write(server_in, b"\n".join(lines))  # the last line has no newline yet
                os.write(server_in, b"\n")
                while received.count(b"\n") < len(lines):
                    await anyio.wait_readable(server_out)
                    received += os.read(server_out, 65536)
                os.close(server_in)  # end of input ends the session
                server_in = -1
    finally:
        for fd in (client_to_server, server_in, server_out, server_to_client):
            if fd >= 0:
                os.close(fd)
    answers = [json.loads(line) for line in received.splitlines()]
    results = {a["id"]: a["result"] for a in answers if "result" in a}
    assert results[1]["serverInfo"]["name"] == "korg-bridge:thump"
    assert results[2] == {}
    assert sorted(a["error"]["code"] for a in answers if "error" in a) == [PARSE_ERROR, INVALID_REQUEST]
