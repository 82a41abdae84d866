"""A team store in the browser: two people signed in with two tokens on one PostgreSQL store each
see only their own tenant's memories on every page and in live updates, and write as their
token's actor."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from korg_bridge.auth.tokens import Keyring, parse_tokens
from korg_bridge.recall.console.app import Settings, build_app
from tests.helpers.browser import Guard
from tests.helpers.console import live_server
from tests.helpers.memory import git_repo
from tests.helpers.postgres import (
    Roles,
    served_roles,
)
from tests.recall.console.browser.conftest import open_page

ANA = "acme-token-0123456789abcdef"
BOB = "globex-token-0123456789abcdef"


@pytest.fixture(scope="module")
def pg_roles() -> Iterator[Roles]:
    yield from served_roles()


@pytest.fixture
def team_url(
    pg_roles: Roles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[str]:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    env = {**os.environ, "KORG_RECALL_STORE": pg_roles.app_url()}
    suffix = re.sub(r"[^A-Za-z0-9]", "x", request.node.name[-10:])
    keyring = Keyring(parse_tokens(f"{ANA} acme-{suffix} ana\n{BOB} globex-{suffix} bob\n", "test tokens"))
    with live_server(build_app(Settings(env=env, cwd=str(repo), keyring=keyring))) as url:
        yield url


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_sign_in_page_has_no_wcag_21_aa_violation(browser: Browser, team_url: str, scheme: str) -> None:
    from axe_playwright_python.sync_playwright import Axe

    from tests.recall.console.browser.test_accessibility import WCAG_21_AA

    context, page, guard = open_page(browser, team_url, scheme=scheme)
    try:
        page.goto(team_url + "/login")
        page.fill("#token", "not-a-token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("not a token")
        violations = (
            Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG_21_AA}}).response["violations"]
        )
    finally:
        context.close()
    assert not violations, [v["id"] for v in violations]
    guard.assert_clean()


def signed_in(browser: Browser, url: str, token: str) -> tuple[object, Page, Guard]:
    context, page, guard = open_page(browser, url)
    page.goto(url + "/memories")
    expect(page).to_have_url(re.compile("/login$"))  # no session yet: the sign-in form
    page.fill("#token", token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("h1")).to_have_text("Memories")
    return context, page, guard


def remember(page: Page, url: str, text: str) -> str:
    page.goto(url + "/memories/new")
    page.fill("#new-content", text)
    page.get_by_role("button", name="Remember").click()
    expect(page.locator(".notice.ok")).to_have_text("Remembered.")
    return page.url.rsplit("/", 1)[1].split("?")[0]


def test_two_people_on_one_team_store_see_only_their_own_tenant(browser: Browser, team_url: str) -> None:
    ana_context, ana, ana_guard = signed_in(browser, team_url, ANA)
    bob_context, bob, bob_guard = signed_in(browser, team_url, BOB)
    try:
        expect(ana.locator(".who")).to_contain_text("ana")
        acme = remember(ana, team_url, "Acme's launch is on Friday.")
        expect(ana.locator(".facts")).to_contain_text("ana")  # written as the token's actor
        ana.goto(team_url + "/memories")
        ana.wait_for_timeout(400)  # her live stream is open
        globex = remember(bob, team_url, "Globex ships on Monday.")
        bob.goto(team_url + "/memories")
        ids = "items => items.map(i => i.dataset.id)"
        ana.wait_for_timeout(1500)  # Bob's write never reaches Ana's open page
        expect(ana.locator("#live")).to_be_empty()
        assert ana.locator("#memory-list > li").evaluate_all(ids) == [acme]
        assert bob.locator("#memory-list > li").evaluate_all(ids) == [globex]
        bob.goto(team_url + f"/memories/{acme}")
        expect(bob.locator("h1")).to_have_text("Not found")
        bob.goto(team_url + "/memories?q=launch+Friday&mode=keyword")
        expect(bob.locator("#memory-list > li")).to_have_count(0)
        ana.goto(team_url + "/context")
        expect(ana.locator("pre.brief")).to_contain_text("Acme's launch")
        expect(ana.locator("pre.brief")).not_to_contain_text("Globex")
        ana.get_by_role("button", name="Sign out").click()
        expect(ana).to_have_url(re.compile("/login$"))
        ana.goto(team_url + "/memories")
        expect(ana).to_have_url(re.compile("/login$"))
    finally:
        ana_context.close()  # type: ignore[attr-defined]
        bob_context.close()  # type: ignore[attr-defined]
    ana_guard.assert_clean()
    bob_guard.assert_clean()
