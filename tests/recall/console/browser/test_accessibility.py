"""Accessibility: axe-core finds no WCAG 2.1 A/AA violation on any page in the light or the dark
theme, and a person without a mouse can find a session, remember an event from it, approve a
pending write, revise a memory and retire it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.recall.console.browser.conftest import Console, open_page
from tests.recall.console.demo import SESSION

WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
TAB_LIMIT = 250
"""Tab presses allowed to reach one control (the memories page has the most: filters, then cards)."""


def pages_of(console: Console) -> list[str]:
    m = console.demo.memories
    return [
        "/memories",
        "/memories?q=refund&mode=keyword",
        "/memories?due=1",
        f"/memories/{m['refunds']}",
        f"/memories/{m['untrusted']}",
        f"/memories/{m['jenkins']}",
        f"/memories/{m['pending']}",
        "/memories/new",
        "/memories/new?event=e1",
        "/approvals",
        "/history",
        "/history/sessions",
        f"/history/sessions/{SESSION}",
        "/history/events/e3",
        "/history/search?q=refund&mode=keyword",
        "/context",
        "/health",
        "/memories/mzzzzzzzzzz",
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_wcag_21_aa_violation_on_any_page(
    browser: Browser, console: Console, scheme: str
) -> None:
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    context, page, guard = open_page(browser, console.url, scheme=scheme)
    found: dict[str, list[str]] = {}
    try:
        for path in pages_of(console):
            page.goto(console.at(path))
            for summary in page.locator("details > summary").all():  # folded text is read too
                summary.click()
            result = axe.run(page, options={"runOnly": {"type": "tag", "values": WCAG_21_AA}})
            violations = result.response["violations"]
            if violations:
                found[path] = [
                    f"{v['id']}: {v['help']} ({', '.join(str(n['target']) for n in v['nodes'][:3])})"
                    for v in violations
                ]
    finally:
        context.close()
    guard.assert_clean()
    assert not found, found


def tab_to(page: Page, selector: str, *, backwards: bool = False) -> None:
    """Press Tab until the focused element matches ``selector`` (fails after :data:`TAB_LIMIT`)."""
    for _ in range(TAB_LIMIT):
        if page.evaluate("s => document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
    raise AssertionError(f"{selector} cannot be reached with the Tab key")


def go(page: Page, key: str) -> None:
    """Press ``key`` and wait for the page it leads to."""
    with page.expect_navigation():
        page.keyboard.press(key)


def test_a_keyboard_only_journey_through_history_approvals_and_a_memory(page: Page, console: Console) -> None:
    m = console.demo.memories
    page.goto(console.at("/memories"))
    # find a session: the shortcut to History, then links
    page.keyboard.press("g")
    go(page, "h")
    expect(page).to_have_url(re.compile("/history$"))
    tab_to(page, 'a[href^="/history/sessions?project="]')
    go(page, "Enter")
    tab_to(page, f'a[href="/history/sessions/{SESSION}"]')
    go(page, "Enter")
    expect(page).to_have_url(re.compile(f"/history/sessions/{SESSION}$"))
    # remember an event from it
    ref = page.locator("ol.timeline > li.kind-reply", has_text="make db test").first.get_attribute("id")
    tab_to(page, f'a.remember[href="/memories/new?event={ref}"]')
    go(page, "Enter")
    expect(page.locator("#new-content")).to_have_value(re.compile("make db test"))
    tab_to(page, "#remember button[type=submit]")
    go(page, "Enter")
    expect(page.locator(".notice.ok")).to_have_text("Remembered.")
    # approve a pending write
    page.keyboard.press("g")
    go(page, "a")
    expect(page).to_have_url(re.compile("/approvals$"))
    tab_to(page, f'form[action="/approvals/{m["pending"]}/approve"] button')
    go(page, "Enter")
    expect(page.locator(".notice.ok")).to_have_text("Approved.")
    expect(page.locator('nav [data-live="pending-count"]')).to_have_text("1")
    # revise a memory
    page.keyboard.press("g")
    go(page, "m")
    page.keyboard.press("/")
    page.keyboard.type("staging")
    go(page, "Enter")
    tab_to(page, f'a[href="/memories/{m["staging"]}"]')
    go(page, "Enter")
    tab_to(page, "#rev-content")
    page.keyboard.press("Control+A")
    page.keyboard.type("Staging is staging.shop.internal; deploy with make deploy-staging.")
    tab_to(page, "#revise button[type=submit]")
    go(page, "Enter")
    expect(page.locator(".notice.ok")).to_have_text("Saved as a new version.")
    expect(page.locator(".memory .body").first).to_have_text(
        "Staging is staging.shop.internal; deploy with make deploy-staging."
    )
    # retire it
    tab_to(page, f'form[action="/memories/{m["staging"]}/retire"] button')
    go(page, "Enter")
    expect(page.locator(".notice.ok")).to_contain_text("Retired")
    expect(page.locator(".memory .meta .badge.state-retired")).to_be_visible()


def test_focus_is_always_visible_and_the_skip_link_leads_to_the_content(page: Page, console: Console) -> None:
    page.goto(console.at("/memories"))
    page.keyboard.press("Tab")
    skip = page.locator("a.skip")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), outline


def test_the_shortcuts_help_opens_with_a_question_mark_and_closes_with_escape(
    page: Page, console: Console
) -> None:
    page.goto(console.at("/memories"))
    page.keyboard.press("?")
    dialog = page.locator("#shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Keyboard shortcuts")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    # j and k move through the list
    page.keyboard.press("j")
    expect(page.locator("#memory-list > li").first.locator("a").first).to_be_focused()
    page.keyboard.press("j")
    expect(page.locator("#memory-list > li").nth(1).locator("a").first).to_be_focused()
    page.keyboard.press("k")
    expect(page.locator("#memory-list > li").first.locator("a").first).to_be_focused()
