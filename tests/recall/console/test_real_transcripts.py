"""Every page of the console renders the real agent sessions in ``../shared/peers`` (Claude Code 2.x
sessions with sub-agents, a compaction, slash commands, images, hook attachments; Codex rollouts;
a Claude Code memory folder): a crawl from the home page through every project, session and event
link, and the REST routes beside them, answers without a server error."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.helpers.console import console_client
from tests.helpers.peer_sessions import use_peer_home

pytestmark = pytest.mark.anyio

PAGES_MAX = 400
"""Pages the crawl visits at most (the peers' sessions have a few thousand events)."""
HREF = re.compile(r'href="([^"#]+)')
SKIP = re.compile(r"^/(static|api|logout|login|metrics)|\.(css|js|svg|png)$")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return use_peer_home(tmp_path, monkeypatch)


async def test_every_page_renders_the_real_sessions_without_a_server_error(home: Path) -> None:
    async with console_client(cwd=home, rate_limit=None) as (client, _app):  # a crawl, not a person
        projects = (await client.get("/api/v1/history/projects")).json()["projects"]
        assert projects, "the peers' sessions were not indexed"
        seen: set[str] = set()
        todo = ["/", "/memories", "/history", "/approvals", "/context", "/health"]
        kinds = {"session": 0, "event": 0}
        while todo and len(seen) < PAGES_MAX:
            path = todo.pop(0)
            if path in seen:
                continue
            seen.add(path)
            page = await client.get(path)
            assert page.status_code < 500, (path, page.status_code, page.text[:300])
            assert "internal error" not in page.text.lower(), path  # (a session's own tracebacks are content)
            if page.status_code != 200 or "text/html" not in page.headers.get("content-type", ""):
                continue
            for href in HREF.findall(page.text):
                target = unescape(href)
                parts = urlsplit(target)
                if parts.netloc or not parts.path.startswith("/") or SKIP.search(parts.path):
                    continue
                link = parts.path + (f"?{parts.query}" if parts.query else "")
                if "/history/sessions/" in parts.path:
                    kinds["session"] += 1
                if "/history/events/" in parts.path:
                    if kinds["event"] >= 60:
                        continue  # a sample of events: every session's timeline is crawled already
                    kinds["event"] += 1
                if link not in seen:
                    todo.append(link)
        assert kinds["session"] >= 5 and kinds["event"] >= 10, kinds
        for project in projects:
            listed = await client.get("/api/v1/history/sessions", params={"project": project["project"]})
            assert listed.status_code == 200, listed.text[:300]
            for session in listed.json()["sessions"]:
                timeline = await client.get(f"/api/v1/history/sessions/{session['session']}")
                assert timeline.status_code == 200, (session["session"], timeline.text[:300])
        memories = (await client.get("/api/v1/memories", params={"scope": "user"})).json()
        assert "memories" in memories or "items" in memories or memories
