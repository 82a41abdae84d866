"""A real browser for the console (served by :func:`tests.helpers.console.live_server`): Debian's
chromium driven by Playwright, with a guard that records every dialog, console error, page error
and request that would leave the console's origin (such a request is aborted, never sent).

Playwright's own browser downloads do not work here and are not wanted: the tests use the
system's ``/usr/bin/chromium`` (``.ci/run`` installs it with apt).
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page, Playwright, Request, Route

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SKIP_REASON = (
    "browser tests need Debian's chromium at /usr/bin/chromium and the playwright and axe-playwright-python "
    "packages (apt-get install -y chromium; pip install -e '.[test]'); .ci/run installs both"
)
"""The one reason every browser test skips with on a plain clone."""


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not CHROMIUM.exists() and shutil.which("chromium") is None:
        return SKIP_REASON
    for module in ("playwright", "axe_playwright_python"):
        if importlib.util.find_spec(module) is None:
            return SKIP_REASON
    return None


def chromium_path() -> str:
    return str(CHROMIUM) if CHROMIUM.exists() else str(shutil.which("chromium"))


@contextlib.contextmanager
def launched(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
    try:
        yield browser
    finally:
        browser.close()


@dataclass
class Guard:
    """What a page did that a console must never do with hostile text in it."""

    origin: str
    dialogs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    foreign_requests: list[str] = field(default_factory=list)
    refused_pages: set[str] = field(default_factory=set)
    """Pages the server answered with an error status on purpose (404, a 409 conflict shown
    to the person): the browser logs each as a console error, which is not the page's doing."""
    _console: list[tuple[str, str]] = field(default_factory=list)

    def attach(self, context: BrowserContext, page: Page) -> None:
        def on_dialog(dialog: Any) -> None:
            self.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        def on_console(message: Any) -> None:
            if message.type == "error":
                self._console.append((message.text, str((message.location or {}).get("url", ""))))

        def on_response(response: Any) -> None:
            if response.request.resource_type == "document" and response.status >= 400:
                self.refused_pages.add(response.url)

        def on_route(route: Route, request: Request) -> None:
            if request.url.startswith(self.origin + "/") or request.url == self.origin:
                route.continue_()
            else:
                self.foreign_requests.append(request.url)
                route.abort()

        page.on("dialog", on_dialog)
        page.on("console", on_console)
        page.on("response", on_response)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        context.route("**/*", on_route)

    def problems(self) -> dict[str, list[str]]:
        self.console_errors = [
            text
            for text, url in self._console
            if not (text.startswith("Failed to load resource") and url in self.refused_pages)
        ]
        found = {
            "dialogs": self.dialogs,
            "console errors": self.console_errors,
            "page errors": self.page_errors,
            "requests off the origin": self.foreign_requests,
        }
        return {name: items for name, items in found.items() if items}

    def assert_clean(self) -> None:
        assert not self.problems(), self.problems()
