"""Live updates over a real socket: a memory an agent writes, a held write and newly indexed history
reach an open event stream without a reload."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest

from korg_bridge.recall.console.app import Settings, build_app
from tests.helpers.console import live_server, write_transcript
from tests.helpers.memory import git_repo, ok, run

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(tmp_path / "transcripts"))
    (tmp_path / "transcripts").mkdir()
    return repo


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    kind = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


async def test_a_memory_an_agent_writes_reaches_an_open_stream_within_a_second(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = build_app(Settings(env=dict(os.environ), cwd=str(project)))
    with live_server(app) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as client,
            client.stream("GET", "/api/v1/events") as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            stream = events(response)
            written = await anyio.to_thread.run_sync(
                lambda: ok(
                    run(
                        "remember",
                        "--content",
                        "The API listens on 8080.",
                        "--type",
                        "project",
                        "--json",
                        cwd=project,
                    )
                )
            )
            done = time.monotonic()
            with anyio.fail_after(5):
                kind, data = await stream.__anext__()
                while kind != "memory":
                    kind, data = await stream.__anext__()
            assert time.monotonic() - done <= 1.0
            assert data["memories"][0]["id"] == written["id"]
            assert data["memories"][0]["title"] == "The API listens on 8080."

            monkeypatch.setenv("KORG_RECALL_WRITES", "confirm")
            await anyio.to_thread.run_sync(
                lambda: ok(
                    run(
                        "remember",
                        "--content",
                        "Held for approval.",
                        "--type",
                        "note",
                        "--json",
                        cwd=project,
                    )
                )
            )
            with anyio.fail_after(5):
                kind, data = await stream.__anext__()
                while kind != "pending":
                    kind, data = await stream.__anext__()
            assert data == {"count": 1}

            write_transcript(tmp_path / "transcripts", "sess-live", project, [("Is it live?", "Yes")])
            with anyio.fail_after(10):  # the background tick indexes every 2 s
                kind, data = await stream.__anext__()
                while kind != "events":
                    kind, data = await stream.__anext__()
            assert data["added"] >= 3 and data["newest"].startswith("e")
