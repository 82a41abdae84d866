"""History in the browser: projects, sessions, a session's timeline (tool calls paired with their
results, long outputs folded, compaction summaries marked, every event linkable), search with
breakdowns, and "Remember this" opening a memory prefilled with its provenance."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.recall.console.browser.conftest import Console
from tests.recall.console.demo import OTHER_SESSION, SESSION


def test_projects_lead_to_sessions_and_a_timeline(page: Page, console: Console) -> None:
    page.goto(console.at("/history"))
    project = page.locator(".cards > li", has_text="shop")
    expect(project).to_contain_text("2 sessions")
    project.get_by_role("link").click()
    sessions = page.locator('[data-live-list="sessions"] > li')
    expect(sessions).to_have_count(2)
    newest = sessions.first
    expect(newest).to_contain_text("Flaky payment tests need make db")
    expect(newest).to_contain_text("fix/payments")
    expect(newest).to_contain_text("claude-code#5f0c2b9e")
    newest.get_by_role("link").click()
    expect(page).to_have_url(re.compile(f"/history/sessions/{SESSION}$"))
    expect(page.locator("h1")).to_have_text("Flaky payment tests need make db")


def test_a_timeline_pairs_tool_calls_with_results_folds_long_output_and_marks_compaction(
    page: Page, console: Console
) -> None:
    page.goto(console.at(f"/history/sessions/{SESSION}"))
    events = page.locator("ol.timeline > li")
    expect(events.first).to_contain_text("The payment tests are flaky again")
    expect(events.first.locator(".badge.kind")).to_have_text("prompt")
    bash = page.locator("ol.timeline > li.kind-tool", has_text="Bash")
    expect(bash.locator(".tool")).to_have_text("Bash")
    expect(bash.locator(".body").first).to_have_text("make test-payments")
    result = bash.locator(".result")
    expect(result.locator("details.fold")).to_have_count(1)  # 80 lines of output: folded
    expect(result.locator("details.fold .body")).to_be_hidden()
    result.locator("summary").click()
    expect(result.locator("details.fold .body")).to_contain_text("test_case_3 FAILED")
    # the timeline keeps the first part of a long output; the event's page has all of it
    bash.get_by_role("link", name=f"all of {bash.get_attribute('id')}").click()
    expect(page.locator(".result .body")).to_contain_text("test_case_79")
    page.go_back()
    failed = page.locator("ol.timeline > li.kind-tool", has_text="Read")
    expect(failed.locator(".result.failed")).to_contain_text("No such file")
    expect(page.locator("ol.timeline > li.compaction .badge.compaction")).to_have_text("compaction summary")
    # every event is linkable: its ref leads to it
    ref = events.nth(1).get_attribute("id")
    assert ref and re.fullmatch(r"e\d+", ref)
    events.nth(1).locator("a.ref").click()
    expect(page).to_have_url(re.compile(f"/history/events/{ref}$"))
    page.get_by_role("link", name="Show it in its session").click()
    expect(page).to_have_url(re.compile(f"/history/sessions/{SESSION}#{ref}$"))
    expect(page.locator(f"#{ref}")).to_be_in_viewport()


def test_history_search_filters_and_shows_breakdowns(page: Page, console: Console) -> None:
    page.goto(console.at("/history/search"))
    page.fill("#hq", "refund database")
    page.select_option("#hmode", "keyword")
    page.get_by_role("button", name="Search").click()
    hits = page.locator("section .cards > li")
    expect(hits.first).to_be_visible()
    first = hits.first
    first.locator("summary").click()
    expect(first.locator(".breakdown dl")).to_contain_text("total")
    # filters: an agent with no history finds nothing; the kind filter keeps only prompts
    page.fill("#hagent", "claude-code#a81d3c44")
    page.get_by_role("button", name="Search").click()
    for text in hits.locator(".meta").all_inner_texts():
        assert "a81d3c44" in text
    page.fill("#hagent", "")
    page.fill("#hkind", "user_prompt")
    page.fill("#hq", "flaky")
    page.get_by_role("button", name="Search").click()
    kinds = hits.locator(".badge.kind").all_inner_texts()
    assert kinds and set(kinds) == {"user_prompt"}
    page.fill("#hkind", "")
    page.fill("#hsince", "2000-01-01")
    page.fill("#huntil", "2000-01-02")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#hits-title")).to_contain_text("0 hits")


def test_remember_this_opens_a_memory_prefilled_with_its_provenance(page: Page, console: Console) -> None:
    page.goto(console.at(f"/history/sessions/{SESSION}"))
    reply = page.locator("ol.timeline > li.kind-reply", has_text="make db test").first
    ref = reply.get_attribute("id")
    reply.get_by_role("link", name=re.compile("Remember this")).click()
    expect(page).to_have_url(re.compile(f"/memories/new\\?event={ref}$"))
    expect(page.locator(".from-event")).to_contain_text(str(ref))
    expect(page.locator("#new-content")).to_have_value(re.compile("make db test"))
    page.get_by_role("button", name="Remember").click()
    expect(page.locator(".notice.ok")).to_have_text("Remembered.")
    link = page.locator(f'table.versions a[href="/history/events/{ref}"]')
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("h1")).to_contain_text(f"Event {ref}")


def test_an_unknown_session_or_event_is_a_not_found_page(page: Page, console: Console) -> None:
    page.goto(console.at("/history/sessions/no-such-session"))
    expect(page.locator("h1")).to_have_text("Not found")
    page.goto(console.at("/history/events/e999999"))
    expect(page.locator("h1")).to_have_text("Not found")
    page.goto(console.at(f"/history/sessions/{OTHER_SESSION}"))
    expect(page.locator("h1")).to_have_text("Flaky payment tests need make db")
