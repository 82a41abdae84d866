"""Everything works with JavaScript off: server-rendered pages and plain forms (the script only
adds live updates, shortcuts and diff toggles). And every page is usable 360 px wide."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.helpers.memory import rows, store_file
from tests.recall.console.browser.conftest import Console, open_page
from tests.recall.console.demo import SESSION


@pytest.fixture
def plain(browser: Browser, console: Console) -> Iterator[Page]:
    context, page, guard = open_page(browser, console.url, javascript=False)
    try:
        yield page
    finally:
        context.close()
    guard.assert_clean()


def test_filter_search_revise_approve_and_purge_work_without_javascript(
    plain: Page, console: Console
) -> None:
    page = plain
    m = console.demo.memories
    page.goto(console.at("/memories"))
    assert page.evaluate("document.documentElement.classList.contains('js')") is False
    page.fill("#q", "staging")
    page.select_option("#mode", "keyword")
    with page.expect_navigation():
        page.click(".filters button[type=submit]")
    page.click(f'#memory-list a[href="/memories/{m["staging"]}"]')
    # no toggles without a script; the diff form and the actions are plain forms
    expect(page.locator(".diff-toggles")).to_be_hidden()
    page.fill("#rev-content", "Staging: staging.shop.internal (no JavaScript needed).")
    page.get_by_role("button", name="Save version 2").click()
    expect(page.locator(".notice.ok")).to_have_text("Saved as a new version.")
    expect(page.locator(".diff ins").first).to_be_visible()  # both sides inline
    expect(page.locator(".diff del").first).to_be_visible()
    page.goto(console.at("/approvals"))
    page.check(f"#pick-{m['pending']}")
    page.get_by_role("button", name="Approve selected").click()
    expect(page.locator(".notice.ok")).to_have_text("Approved.")
    # purge: the button is enabled without the script, and the server checks the typed id
    page.goto(console.at(f"/memories/{m['jenkins']}"))
    page.fill("#purge-confirm", m["jenkins"])
    page.evaluate("document.querySelector('#purge-confirm').removeAttribute('pattern')")
    page.fill("#purge-confirm", "mwrongwrong")
    page.get_by_role("button", name=f"Purge {m['jenkins']}").click()
    expect(page.locator(".notice.error")).to_contain_text("type its id exactly")
    assert rows(
        store_file(console.demo.home),
        "SELECT count(*) FROM memory WHERE id = ? AND body <> ''",
        [m["jenkins"]],
    ) != [(0,)]


def test_history_and_remember_this_work_without_javascript(plain: Page, console: Console) -> None:
    page = plain
    page.goto(console.at(f"/history/sessions/{SESSION}"))
    result = page.locator("ol.timeline > li.kind-tool", has_text="Bash").locator(".result")
    result.locator("summary").click()  # <details> folds without a script
    expect(result.locator("details.fold .body")).to_contain_text("test_case_3 FAILED")
    page.locator("ol.timeline > li.kind-prompt").first.get_by_role(
        "link", name=re.compile("Remember this")
    ).click()
    page.get_by_role("button", name="Remember").click()
    expect(page.locator(".notice.ok")).to_have_text("Remembered.")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_fits_a_360_pixel_screen(browser: Browser, console: Console, scheme: str) -> None:
    m = console.demo.memories
    context, page, guard = open_page(browser, console.url, scheme=scheme, width=360)
    wide: dict[str, int] = {}
    try:
        for path in (
            "/memories",
            f"/memories/{m['refunds']}",
            "/memories/new?event=e1",
            "/approvals",
            "/history",
            "/history/sessions",
            f"/history/sessions/{SESSION}",
            "/history/events/e3",
            "/history/search?q=refund",
            "/context",
            "/health",
        ):
            page.goto(console.at(path))
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 360:
                wide[path] = width
    finally:
        context.close()
    guard.assert_clean()
    assert not wide, wide
