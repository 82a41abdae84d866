"""Memories in the browser: filters, search with breakdowns, a memory's page (versions, diffs,
provenance linked into History, links both ways, its op-log), and every action on it -- each one
the same operation, log entry and mirror file an agent's call makes."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.helpers.memory import log_entries, rows, store_file
from tests.recall.console.browser.conftest import Console
from tests.recall.console.demo import SESSION


def cards(page: Page) -> list[str]:
    return page.locator("#memory-list > li").evaluate_all("items => items.map(i => i.dataset.id)")


def apply_filters(page: Page) -> None:
    """Submit the filters and wait for the page they load: the old page's list (or the blank one
    between) must not be read as the answer."""
    with page.expect_navigation():
        page.click(".filters button[type=submit]")


def test_memories_list_filters_by_type_state_tag_pinned_and_source(page: Page, console: Console) -> None:
    m = console.demo.memories
    page.goto(console.at("/memories"))
    assert set(cards(page)) == {m["refunds"], m["commits"], m["staging"], m["untrusted"], m["english"]}
    page.select_option("#type", "reference")
    apply_filters(page)
    assert cards(page) == [m["staging"]]
    page.goto(console.at("/memories"))
    page.select_option("#state", "retired")
    apply_filters(page)
    assert cards(page) == [m["jenkins"]]
    page.select_option("#state", "untrusted")
    apply_filters(page)
    assert cards(page) == [m["untrusted"]]
    expect(page.locator(f'[data-id="{m["untrusted"]}"] .badge.untrusted')).to_be_visible()
    page.select_option("#state", "pending")
    apply_filters(page)
    assert set(cards(page)) == {m["pending"], m["pending2"]}
    page.goto(console.at("/memories?tag=deploy"))
    assert cards(page) == [m["staging"]]
    page.goto(console.at("/memories"))
    page.select_option("#pinned", "yes")
    apply_filters(page)
    assert cards(page) == [m["commits"]]
    page.select_option("#pinned", "")
    page.select_option("#source", "user")
    apply_filters(page)
    assert set(cards(page)) == {m["commits"], m["english"]}
    page.select_option("#source", "agent")
    apply_filters(page)
    assert set(cards(page)) == {m["refunds"], m["staging"], m["untrusted"]}
    page.goto(console.at("/memories?scope=user"))
    assert cards(page) == [m["english"]]


def test_search_shows_each_hits_score_breakdown(page: Page, console: Console) -> None:
    page.goto(console.at("/memories"))
    page.fill("#q", "refund database")
    page.select_option("#mode", "keyword")
    page.press("#q", "Enter")
    first = page.locator("#memory-list > li").first
    expect(first).to_have_attribute("data-id", console.demo.memories["refunds"])
    first.locator("summary").click()
    breakdown = first.locator(".breakdown dl")
    expect(breakdown).to_contain_text("bm25")
    expect(breakdown).to_contain_text("total")


def test_memory_page_shows_versions_with_writer_provenance_diff_and_op_log(
    page: Page, console: Console
) -> None:
    memory_id = console.demo.memories["refunds"]
    page.goto(console.at("/memories"))
    page.click(f'[data-id="{memory_id}"] h3 a')
    expect(page).to_have_url(re.compile(f"/memories/{memory_id}$"))
    expect(page.locator("h1")).to_have_text("Refund tests need make db first")
    versions = page.locator("table.versions tbody tr")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("claude-code")
    expect(versions.nth(1)).to_contain_text("shorter command")
    # provenance: the event it came from, linked into History
    expect(page.locator('table.versions a[href="/history/events/e1"]').first).to_have_text("prompt e1")
    session = page.locator(f'table.versions a[href="/history/sessions/{SESSION}#e1"]').first
    expect(session).to_contain_text("session 5f0c2b9e")
    expect(versions.nth(1)).to_contain_text("claude-code (revise)")
    diff = page.locator(".diff")
    expect(diff.locator("del", has_text="before")).to_be_visible()
    expect(diff.locator("ins", has_text="test-payments").first).to_be_visible()
    # the toggles (JavaScript) show one side only
    page.click('[data-diff-show="old"]')
    expect(diff.locator("ins").first).to_be_hidden()
    expect(diff.locator("del").first).to_be_visible()
    page.click('[data-diff-show="new"]')
    expect(diff.locator("del").first).to_be_hidden()
    expect(page.locator('[data-diff-show="new"]')).to_have_attribute("aria-pressed", "true")
    ops = page.locator("ol.ops li")
    expect(ops).to_have_count(2)
    expect(ops.nth(0)).to_contain_text("remember")
    expect(ops.nth(1)).to_contain_text("revise")


def test_any_two_versions_can_be_compared(page: Page, console: Console) -> None:
    memory_id = console.demo.memories["refunds"]
    page.goto(console.at(f"/memories/{memory_id}"))
    page.select_option("#diff-a", "2")
    page.select_option("#diff-b", "1")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#diff-title")).to_have_text("Changes from version 2 to 1")
    expect(page.locator(".diff ins", has_text="before")).to_be_visible()


def test_links_show_both_ways(page: Page, console: Console) -> None:
    demo = console.demo
    staging = demo.memories["staging"]
    page.goto(console.at("/memories/new"))
    page.fill("#new-content", f"Deploys go through the staging server first, see [[{staging}]].")
    page.select_option("#new-type", "project")
    page.click("#remember button[type=submit]")
    expect(page.locator(".notice.ok")).to_have_text("Remembered.")
    new_id = page.url.rsplit("/", 1)[1].split("?")[0]
    expect(
        page.locator(f'section[aria-labelledby="links-title"] a[href="/memories/{staging}"]')
    ).to_be_visible()
    page.goto(console.at(f"/memories/{staging}"))
    expect(
        page.locator(f'section[aria-labelledby="links-title"] a[href="/memories/{new_id}"]')
    ).to_be_visible()


def test_revise_writes_a_new_version_as_the_user_with_the_log_entry_and_mirror_file(
    page: Page, console: Console
) -> None:
    memory_id = console.demo.memories["staging"]
    page.goto(console.at(f"/memories/{memory_id}"))
    page.fill("#rev-content", "The staging server is staging2.shop.internal now.")
    page.fill("#rev-reason", "moved")
    page.get_by_role("button", name="Save version 2").click()
    expect(page.locator(".notice.ok")).to_have_text("Saved as a new version.")
    expect(page.locator(".memory .body").first).to_have_text(
        "The staging server is staging2.shop.internal now."
    )
    store = store_file(console.demo.home)
    assert rows(
        store, "SELECT version, actor, reason FROM memory WHERE id = ? ORDER BY version", [memory_id]
    )[-1] == (
        2,
        "user",
        "moved",
    )
    last = log_entries(store)[-1]
    assert last["tool_name"].endswith("revise") and last["source_agent"] == "user"
    mirrored = list(
        (console.demo.home / ".local" / "share" / "korg-recall" / "memories").rglob(f"*{memory_id}*.md")
    )
    assert mirrored and "staging2.shop.internal" in mirrored[0].read_text()


def test_a_revise_against_a_version_that_moved_on_shows_the_newer_one_and_keeps_the_draft(
    page: Page, console: Console
) -> None:
    from tests.recall.console.demo import _write

    memory_id = console.demo.memories["staging"]
    page.goto(console.at(f"/memories/{memory_id}"))
    # an agent revises it while the person is editing
    _write(
        console.demo.env,
        "revise",
        {"id": memory_id, "content": "Staging moved to eu-west."},
        KORG_RECALL_ACTOR="agent-x",
    )
    page.fill("#rev-content", "My own edit of the old text.")
    page.get_by_role("button", name="Save version 2").click()
    expect(page.locator("#conflict")).to_contain_text("It changed since you read it")
    expect(page.locator(".memory .body").first).to_have_text("Staging moved to eu-west.")
    expect(page.locator("#rev-content")).to_have_value("My own edit of the old text.")
    assert rows(
        store_file(console.demo.home), "SELECT max(version) FROM memory WHERE id = ?", [memory_id]
    ) == [(2,)]
    page.get_by_role("button", name="Save version 3").click()
    expect(page.locator(".notice.ok")).to_have_text("Saved as a new version.")
    expect(page.locator(".memory .body").first).to_have_text("My own edit of the old text.")


def test_pin_retire_restore_and_review(page: Page, console: Console) -> None:
    memory_id = console.demo.memories["staging"]
    page.goto(console.at(f"/memories/{memory_id}"))
    page.click("button:has-text('Pin')")
    expect(page.locator(".notice.ok")).to_have_text("Pinned.")
    expect(page.locator(".memory .meta .badge.pinned")).to_be_visible()
    page.get_by_role("button", name="Mark as reviewed").click()
    expect(page.locator(".notice.ok")).to_have_text("Marked as reviewed.")
    expect(page.locator(".facts")).not_to_contain_text("never")
    page.click("button:has-text('Retire')")
    expect(page.locator(".notice.ok")).to_contain_text("Retired")
    expect(page.locator(".memory .meta .badge.state-retired")).to_be_visible()
    page.click("button:has-text('Restore')")
    expect(page.locator(".notice.ok")).to_contain_text("Restored")
    expect(page.locator(".memory .meta .badge.state-live")).to_be_visible()
    ops = [
        e["tool_name"].rsplit(".", 1)[-1]
        for e in log_entries(store_file(console.demo.home))
        if e["args"].get("id") == memory_id
    ]
    assert ops[-4:] == ["revise", "review", "forget", "restore"] or ops[-4:][-2:] == ["forget", "restore"], (
        ops
    )


def test_purge_needs_the_id_typed(page: Page, console: Console) -> None:
    memory_id = console.demo.memories["jenkins"]
    page.goto(console.at(f"/memories/{memory_id}"))
    button = page.locator(f"button:has-text('Purge {memory_id}')")
    expect(button).to_be_disabled()  # JavaScript waits for the id; the server checks it too
    page.fill("#purge-confirm", memory_id)
    button.click()
    expect(page.locator(".notice.ok")).to_contain_text("Purged")
    assert rows(
        store_file(console.demo.home), "SELECT count(*) FROM memory WHERE id = ? AND body <> ''", [memory_id]
    ) == [(0,)]
    page.goto(console.at(f"/memories/{memory_id}"))
    expect(page.locator("h1")).to_have_text("Not found")


def test_memories_not_reviewed_for_long_are_listed_as_due(page: Page, console: Console) -> None:
    import time

    from tests.recall.console.demo import _write

    old = _write(
        console.demo.env,
        "remember",
        {"content": "An old fact nobody looked at.", "type": "note"},
        KORG_RECALL_ACTOR="user",
    )["id"]
    store = store_file(console.demo.home)
    from tests.helpers.sqlite import connect

    conn = connect(store)
    try:
        conn.execute(
            "UPDATE memory SET recorded_at = ? WHERE id = ?",
            (time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - 400 * 86400)), old),
        )
        conn.commit()
    finally:
        conn.close()
    page.goto(console.at("/memories"))
    page.get_by_role("link", name=re.compile("due for review")).click()
    assert cards(page) == [old]
    page.click(f'[data-id="{old}"] h3 a')
    page.get_by_role("button", name="Mark as reviewed").click()
    page.goto(console.at("/memories?due=1"))
    assert cards(page) == []
