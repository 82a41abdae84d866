"""Helpers of the console tests: the app over a real ASGI client (httpx), the CSRF dance a browser
does, and a real uvicorn on a free port for what only a socket shows (live streams, signals)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from korg_bridge.recall.console.app import Settings, build_app
from korg_bridge.recall.console.security import CSRF_COOKIE, CSRF_HEADER

BASE = "http://127.0.0.1:8377"


class Client:
    """An httpx client on the app that sends the CSRF header a page's script would."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def csrf(self) -> str:
        token = self.http.cookies.get(CSRF_COOKIE)
        if token is None:
            response = await self.http.get("/api/v1/csrf")
            token = str(response.json()["csrf_token"])
        return token

    async def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return await self.http.get(path, **kwargs)

    async def post(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        headers = {CSRF_HEADER: await self.csrf(), **kwargs.pop("headers", {})}
        return await self.http.post(path, json=json, headers=headers, **kwargs)

    async def delete(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        headers = {CSRF_HEADER: await self.csrf(), **kwargs.pop("headers", {})}
        return await self.http.request("DELETE", path, json=json, headers=headers, **kwargs)


@contextlib.asynccontextmanager
async def console_client(
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Client, Any]]:
    """A :class:`Client` on a fresh app (no background tick) and the app; the app's stores are
    closed on exit."""
    app = build_app(
        Settings(
            env=dict(os.environ if env is None else env),
            cwd=str(cwd) if cwd else None,
            background=False,
            **settings,
        )
    )
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url=BASE, headers=dict(headers or {})) as http:
            yield Client(http), app
    finally:
        app.state.console.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def live_server(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port in a thread; stopped (and joined) on exit."""
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, lifespan="on", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.01)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        live = getattr(app.state, "live", {})
        if live.get("stopping") is not None:
            live["stopping"].set()
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive(), "uvicorn did not stop"


def write_transcript(
    folder: Path, session: str, cwd: Path, turns: list[tuple[str, str]], *, branch: str = "main"
) -> Path:
    """A Claude Code transcript: each turn a typed prompt, a reply and a Bash call with its result."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    lines: list[dict[str, Any]] = []
    common = {"sessionId": session, "cwd": str(cwd), "gitBranch": branch}
    for number, (prompt, reply) in enumerate(turns):
        stamp = f"2026-05-01T10:{number:02d}:00.000Z"
        lines.append(
            {
                **common,
                "type": "user",
                "uuid": f"u{number}",
                "timestamp": stamp,
                "message": {"role": "user", "content": prompt},
            }
        )
        lines.append(
            {
                **common,
                "type": "assistant",
                "uuid": f"a{number}",
                "timestamp": stamp.replace(":00.000Z", ":10.000Z"),
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": reply},
                        {
                            "type": "tool_use",
                            "id": f"tool{number}",
                            "name": "Bash",
                            "input": {"command": f"echo step {number}"},
                        },
                    ],
                },
            }
        )
        lines.append(
            {
                **common,
                "type": "user",
                "uuid": f"r{number}",
                "timestamp": stamp.replace(":00.000Z", ":20.000Z"),
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"tool{number}", "content": f"step {number}"}
                    ],
                },
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path
