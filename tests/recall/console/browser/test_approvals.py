"""The approval queue: writes held by ``KORG_RECALL_WRITES=confirm`` approved, rejected or edited
then approved, one by one or in a batch, with the count on every page and actor ``user`` in the log."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.helpers.memory import log_entries, rows, store_file
from tests.recall.console.browser.conftest import Console


def pending_ids(page: Page) -> list[str]:
    return page.locator('[data-live-list="pending"] > li').evaluate_all(
        "items => items.map(i => i.dataset.id)"
    )


def state_of(console: Console, memory_id: str) -> list[tuple[int, str]]:
    return [
        (int(v), str(s))
        for v, s in rows(
            store_file(console.demo.home),
            "SELECT version, state FROM memory WHERE id = ? ORDER BY version",
            [memory_id],
        )
    ]


def test_the_pending_count_shows_on_every_page(page: Page, console: Console) -> None:
    for path in (
        "/memories",
        "/history",
        "/context",
        "/health",
        f"/memories/{console.demo.memories['commits']}",
    ):
        page.goto(console.at(path))
        expect(page.locator('nav [data-live="pending-count"]')).to_have_text("2")


def test_approve_one_is_recorded_with_actor_user(page: Page, console: Console) -> None:
    m = console.demo.memories
    page.goto(console.at("/approvals"))
    assert set(pending_ids(page)) == {m["pending"], m["pending2"]}
    page.locator(f'[data-id="{m["pending"]}"]').get_by_role("button", name=f"Approve {m['pending']}").click()
    expect(page.locator(".notice.ok")).to_have_text("Approved.")
    assert pending_ids(page) == [m["pending2"]]
    expect(page.locator('nav [data-live="pending-count"]')).to_have_text("1")
    assert state_of(console, m["pending"]) == [(1, "live")]
    last = log_entries(store_file(console.demo.home))[-1]
    assert last["tool_name"].endswith("approve") and last["source_agent"] == "user"


def test_reject_one_leaves_nothing_live(page: Page, console: Console) -> None:
    m = console.demo.memories
    page.goto(console.at("/approvals"))
    page.locator(f'[data-id="{m["pending2"]}"]').get_by_role("button", name=f"Reject {m['pending2']}").click()
    expect(page.locator(".notice.ok")).to_have_text("Rejected.")
    assert pending_ids(page) == [m["pending"]]
    assert all(state != "live" for _, state in state_of(console, m["pending2"]))


def test_a_batch_is_approved_together(page: Page, console: Console) -> None:
    m = console.demo.memories
    page.goto(console.at("/approvals"))
    page.check(f"#pick-{m['pending']}")
    page.check(f"#pick-{m['pending2']}")
    page.get_by_role("button", name="Approve selected").click()
    expect(page.locator(".notice.ok")).to_have_text("Approved.")
    expect(page.locator("[data-live-empty]")).to_have_text("Nothing is waiting for approval.")
    expect(page.locator('nav [data-live="pending-count"]')).to_have_text("0")
    assert state_of(console, m["pending"]) == [(1, "live")]
    assert state_of(console, m["pending2"]) == [(1, "live")]


def test_a_batch_can_be_rejected_and_an_empty_selection_is_refused(page: Page, console: Console) -> None:
    m = console.demo.memories
    page.goto(console.at("/approvals"))
    page.get_by_role("button", name="Reject selected").click()
    expect(page.locator(".notice.error")).to_contain_text("select at least one")
    page.check(f"#pick-{m['pending']}")
    page.check(f"#pick-{m['pending2']}")
    page.get_by_role("button", name="Reject selected").click()
    expect(page.locator(".notice.ok")).to_have_text("Rejected.")
    assert pending_ids(page) == []


def test_edit_then_approve_makes_the_edited_text_live(page: Page, console: Console) -> None:
    memory_id = console.demo.memories["pending"]
    page.goto(console.at("/approvals"))
    card = page.locator(f'[data-id="{memory_id}"]')
    card.locator("summary").click()
    card.locator("textarea").fill("Payments use Stripe's test keys in CI (never live keys).")
    card.get_by_role("button", name="Save and approve").click()
    expect(page.locator(".notice.ok")).to_have_text("Approved.")
    page.goto(console.at(f"/memories/{memory_id}"))
    expect(page.locator(".memory .body").first).to_have_text(
        "Payments use Stripe's test keys in CI (never live keys)."
    )
    ops = [
        (e["tool_name"].rsplit(".", 1)[-1], e["source_agent"])
        for e in log_entries(store_file(console.demo.home))
    ]
    assert ops[-2:] == [("approve", "user"), ("revise", "user")]
