"""Browser tests of the console: Debian's chromium driven by Playwright against the real app served
by uvicorn on a free loopback port, over a demo store built the way agents write one.

Without chromium or the Playwright packages the suite is one skipped test with one reason
(:data:`tests.helpers.browser.SKIP_REASON`). Every page a test opens is guarded: a dialog, a
console error, a page error or a request leaving the console's origin fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers.browser import Guard, browser_missing, launched
from tests.helpers.console import live_server
from tests.recall.console.demo import Demo, build_demo

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

MISSING = browser_missing()
SENTINEL = "test_browser_available.py"
collect_ignore = (
    [str(path) for path in Path(__file__).parent.glob("test_*.py") if path.name != SENTINEL]
    if MISSING
    else []
)
"""Without a browser, only :data:`SENTINEL` is collected: the suite shows as one skip, with the
reason, instead of a skip per test (or an import error where Playwright is not installed)."""


def make_app(env: dict[str, str], cwd: Path) -> Any:
    """The console's app over ``env`` (what ``korg-recall serve`` builds), loopback, no tokens."""
    from korg_bridge.recall.console.app import Settings, build_app

    return build_app(Settings(env=env, cwd=str(cwd)))


@dataclass
class Console:
    """A running console and the store behind it."""

    url: str
    demo: Demo

    def at(self, path: str) -> str:
        return self.url + path


@pytest.fixture(scope="package")  # not the session: its event loop must be gone before anyio's tests
def playwright() -> Iterator[Playwright]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    with launched(playwright) as opened:
        yield opened


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Demo:
    built = build_demo(tmp_path / "home")
    for name, value in built.env.items():
        monkeypatch.setenv(name, value)
    return built


@pytest.fixture
def console(demo: Demo) -> Iterator[Console]:
    with live_server(make_app(demo.env, demo.project)) as url:
        yield Console(url, demo)


def open_page(
    browser: Browser, url: str, *, scheme: str = "light", width: int = 1280, javascript: bool = True
) -> tuple[Any, Page, Guard]:
    """A fresh browser context (no shared cookies) and page, guarded."""
    context = browser.new_context(
        color_scheme=scheme,  # type: ignore[arg-type]
        viewport={"width": width, "height": 900},
        java_script_enabled=javascript,
        reduced_motion="reduce",
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    guard = Guard(url)
    guard.attach(context, page)
    return context, page, guard


@pytest.fixture
def page(browser: Browser, console: Console) -> Iterator[Page]:
    context, opened, guard = open_page(browser, console.url)
    try:
        yield opened
    finally:
        context.close()
    guard.assert_clean()
