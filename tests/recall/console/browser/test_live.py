"""Live updates: what agents write and what gets indexed reaches open pages without a reload."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.helpers.memory import ok, run
from tests.recall.console.browser.conftest import Console

APPEARS_MS = 3000
"""The bound a test waits (the bench holds the 1 s goal; a loaded CI machine gets some room)."""


def agent_remembers(console: Console, content: str, **env: str) -> str:
    """``korg-recall remember`` as an agent would run it (the real binary, stdin /dev/null)."""
    proc = run(
        "remember",
        "--content",
        content,
        "--type",
        "project",
        "--json",
        cwd=console.demo.project,
        env={**console.demo.env, **env},
    )
    return str(ok(proc)["id"])


def test_a_memory_an_agent_writes_appears_on_an_open_memories_page(page: Page, console: Console) -> None:
    page.goto(console.at("/memories"))
    page.wait_for_function("document.documentElement.classList.contains('js')")
    page.wait_for_timeout(400)  # the stream has taken its first look
    memory_id = agent_remembers(console, "The nightly build runs at 02:00 UTC.")
    card = page.locator(f'#memory-list > li[data-id="{memory_id}"]')
    expect(card).to_be_visible(timeout=APPEARS_MS)
    expect(card).to_contain_text("The nightly build runs at 02:00 UTC.")
    expect(page.locator("#live")).to_contain_text("New memory")


def test_a_held_write_updates_the_count_and_the_approvals_page(page: Page, console: Console) -> None:
    page.goto(console.at("/approvals"))
    page.wait_for_timeout(400)
    memory_id = agent_remembers(console, "Deploys need two approvals.", KORG_RECALL_WRITES="confirm")
    expect(page.locator('nav [data-live="pending-count"]')).to_have_text("3", timeout=APPEARS_MS)
    expect(page.locator(f'[data-live-list="pending"] > li[data-id="{memory_id}"]')).to_be_visible(
        timeout=APPEARS_MS
    )


def test_newly_indexed_history_is_announced(page: Page, console: Console) -> None:
    page.goto(console.at("/history"))
    page.wait_for_timeout(400)
    transcript = next((console.demo.home / ".claude" / "projects").rglob(f"{console.demo.session}.jsonl"))
    line = {
        "type": "user",
        "sessionId": console.demo.session,
        "cwd": str(console.demo.project),
        "timestamp": "2026-12-01T10:00:00.000Z",
        "message": {"role": "user", "content": "One more question about refunds."},
    }
    with open(transcript, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    expect(page.locator("#live")).to_contain_text("new history event", timeout=10_000)
