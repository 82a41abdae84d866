"""Helpers for tests that run korg-bridge as a real subprocess.

The bridge is started the way an MCP client starts it (``python -m korg_bridge
BINARY ...`` with stdio pipes) and driven through the SDK's real ``Client``,
so what these tests see is what Claude Desktop would see. Also here: bounded
polling for files and for process death, because a test must never wait on a
bare sleep.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.helpers.cli import bare_env, korg_bridge, run_bridge
from tests.helpers.paths import BROKEN as BROKEN
from tests.helpers.paths import FIXTURE_BINS as FIXTURE_BINS
from tests.helpers.paths import REPO, THUMP

THUMP_SKIPPED = frozenset(
    {
        "thump.bad id!",
        "thump..empty",
        "thump.-dash",
        "thump.badprop",
        "thump.dashprop",
        "thump.badschema",
        "thump.notobject",
    }
)
"""The callables of thump's document the bridge must skip (bad ids, bad schemas)."""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
"""A raw MCP ``initialize`` request, for tests that speak JSON-RPC without the SDK client."""

MARKER_VAR = "BRIDGE_TEST_MARKER"
"""Set in each bridge's environment so its pid can be found under /proc."""

CALL_BOUND = 60.0
"""Seconds any one end-to-end test may take before it fails instead of hanging."""


child_env = bare_env
"""What the bridge needs explicitly (PATH, HOME); the name these tests know :func:`bare_env` by."""


@dataclass
class Bridge:
    """A running bridge: the connected client, its stderr, and how to find its pid."""

    client: Client
    marker: str
    _stderr: Any

    def stderr(self) -> str:
        """Everything the bridge wrote to stderr so far."""
        self._stderr.flush()
        self._stderr.seek(0)
        text: str = self._stderr.read()
        return text

    def pid(self) -> int:
        """The bridge process: our direct child carrying this bridge's marker.

        Raises:
            LookupError: no such process (it already exited).
        """
        for pid in _pids():
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                ppid = _status_field(pid, "PPid")
            except OSError:
                continue
            if ppid == str(os.getpid()) and f"{MARKER_VAR}={self.marker}".encode() in environ:
                return pid
        raise LookupError(f"no bridge process with marker {self.marker}")

    def peak_rss_bytes(self) -> int:
        """The bridge's peak resident set size (``VmHWM``), in bytes."""
        value = _status_field(self.pid(), "VmHWM")
        number, unit = value.split()
        assert unit == "kB"
        return int(number) * 1024


@asynccontextmanager
async def open_bridge(
    binary: str | os.PathLike[str] = THUMP,
    *flags: str,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    mode: str = "auto",
) -> AsyncIterator[Bridge]:
    """Start ``korg-bridge BINARY FLAGS...`` and yield it connected through the SDK client."""
    marker = uuid.uuid4().hex
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "korg_bridge", os.fspath(binary), *flags],
        env=child_env({**(env or {}), MARKER_VAR: marker}),
        cwd=os.fspath(cwd) if cwd is not None else str(REPO),
    )
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        transport = stdio_client(params, errlog=errlog)
        client = Client(transport, mode=mode, read_timeout_seconds=CALL_BOUND)
        async with client:
            yield Bridge(client, marker, errlog)


def text_of(result: Any) -> str:
    """The single text block of a tool result."""
    assert len(result.content) == 1, result.content
    text: str = result.content[0].text
    return text


# --- files and processes ---------------------------------------------------


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    raise LookupError(f"/proc/{pid}/status has no {name}")


def is_dead(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped (orphans here are reaped late by PID 1)."""
    try:
        state = _status_field(pid, "State")
    except (OSError, LookupError):
        return True
    return state.startswith("Z")


async def wait_dead(pids: Iterable[int], timeout: float = 10.0) -> None:
    """Poll until every pid is dead; fail the test after ``timeout`` seconds."""
    pending = list(pids)
    with anyio.fail_after(timeout):
        while pending := [pid for pid in pending if not is_dead(pid)]:
            await anyio.sleep(0.05)


async def wait_for_file(path: Path, timeout: float = 15.0) -> None:
    """Poll until ``path`` exists (pid files are written atomically by the fixtures)."""
    with anyio.fail_after(timeout):
        while not path.exists():
            await anyio.sleep(0.02)


def read_pid(path: Path) -> int:
    return int(path.read_text().strip())


# --- the CLI as a plain subprocess -------------------------------------------


def run_cli(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """``korg-bridge ARGS`` from the repository, with the bare environment an MCP client gives."""
    return run_bridge(*args, base=bare_env(), env=env, cwd=REPO, timeout=timeout)


def introspect(binary: Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The document a fixture prints for ``--introspect``, decoded."""
    out = subprocess.run(
        [str(binary), "--introspect"], capture_output=True, env=child_env(env), timeout=60, check=False
    ).stdout
    data: dict[str, Any] = json.loads(out)
    return data


# --- the HTTP server ------------------------------------------------------------------------


URL = re.compile(r"http://\S+/mcp")
"""The endpoint the HTTP bridge names on stderr once it listens."""


def free_port() -> int:
    """A loopback port free a moment ago (the server binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def serve_http(
    binary: str | os.PathLike[str], *flags: str, env: Mapping[str, str], cwd: Path, bound: float = CALL_BOUND
) -> AsyncIterator[str]:
    """``korg-bridge BINARY --http 127.0.0.1:PORT FLAGS`` as a child, yielding the URL it serves at once it
    listens; terminated (and waited for) when the block ends. Every wait is bounded by ``bound``."""
    argv = [*korg_bridge(), os.fspath(binary), "--http", f"127.0.0.1:{free_port()}", *flags]
    async with await anyio.open_process(argv, env=dict(env), cwd=cwd) as process:
        assert process.stderr is not None
        seen = b""
        try:
            with anyio.fail_after(bound):
                while not (found := URL.search(seen.decode(errors="replace"))):
                    seen += await process.stderr.receive()
            yield found.group()
        finally:
            process.terminate()
            with anyio.fail_after(bound):
                await process.wait()
