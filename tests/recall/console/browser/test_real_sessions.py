"""The real agent sessions of ``../shared/peers`` in a real browser: every session's timeline and the
history pages open in chromium, light and dark, without a dialog, a console error or a request
leaving the console, and axe-core finds no WCAG 2.1 A/AA violation on them (the demo store's
pages are checked in test_accessibility.py; real sessions bring images, sub-agents, compaction
summaries, slash commands and hook output)."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.helpers.console import live_server
from tests.helpers.peer_sessions import use_peer_home
from tests.recall.console.browser.conftest import make_app, open_page
from tests.recall.console.browser.test_accessibility import WCAG_21_AA

SESSIONS_MAX = 12
"""Session pages checked (the peers hold about a dozen; each is axe-checked in both themes)."""


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    work = use_peer_home(tmp_path, monkeypatch)
    with live_server(make_app(dict(os.environ), work)) as url:
        yield url


def _session_paths(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/api/v1/history/projects", timeout=60) as answer:
        projects = json.load(answer)["projects"]
    paths: list[str] = []
    for project in projects:
        query = urllib.parse.urlencode({"project": project["project"]})
        with urllib.request.urlopen(f"{url}/api/v1/history/sessions?{query}", timeout=60) as answer:
            paths += [
                f"/history/sessions/{urllib.parse.quote(s['session'], safe='')}"
                for s in json.load(answer)["sessions"]
            ]
    return paths[:SESSIONS_MAX]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_real_sessions_render_cleanly_and_accessibly(browser: Browser, served: str, scheme: str) -> None:
    from axe_playwright_python.sync_playwright import Axe

    sessions = _session_paths(served)
    assert len(sessions) >= 5, sessions
    axe = Axe()
    context, page, guard = open_page(browser, served, scheme=scheme)
    found: dict[str, list[str]] = {}
    try:
        for path in ["/history", "/history/sessions", *sessions]:
            page.goto(served + path)
            for summary in page.locator("details > summary").all()[:40]:  # folded outputs are read too
                summary.click()
            result = axe.run(page, options={"runOnly": {"type": "tag", "values": WCAG_21_AA}})
            if result.response["violations"]:
                found[path] = [
                    f"{v['id']}: {v['help']} ({', '.join(str(n['target']) for n in v['nodes'][:3])})"
                    for v in result.response["violations"]
                ]
    finally:
        context.close()
    guard.assert_clean()
    assert not found, found
