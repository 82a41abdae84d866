"""Stored text is hostile: memories, history events, session titles, tags and a Claude Code topic
file full of ``<script>``, ``"><img onerror>``, ``javascript:``/``data:`` links, SVG, CSS tricks and
bidi overrides must not run, restyle the page or reach another origin -- on every page, and when
they arrive over the live stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.helpers.console import live_server
from tests.helpers.memory import ok, run
from tests.recall.console.browser.conftest import Console, make_app, open_page
from tests.recall.console.demo import HOSTILE, HOSTILE_TEXT, OTHER_SESSION, SESSION, build_demo

INJECTED = """() => {
  const found = [];
  const ours = (el) => {
    const src = el.getAttribute('src') || el.getAttribute('href') || '';
    return src.startsWith('/static/');
  };
  for (const el of document.querySelectorAll('script, link')) { if (!ours(el)) found.push(el.outerHTML.slice(0, 120)); }
  for (const el of document.querySelectorAll('img, svg, style, iframe, object, embed, video, audio, base, meta[http-equiv], form[action^="javascript"], [style]')) {
    found.push(el.outerHTML.slice(0, 120));
  }
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      if (attr.name.startsWith('on')) found.push(el.tagName + ' ' + attr.name);
      if (/^\\s*(javascript|data|vbscript):/i.test(attr.value) && ['href', 'src', 'action', 'formaction'].includes(attr.name)) found.push(el.tagName + ' ' + attr.name + '=' + attr.value.slice(0, 40));
    }
  }
  for (const a of document.querySelectorAll('a[href]')) {
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin) found.push('link off the origin: ' + a.href.slice(0, 80));
  }
  return found;
}"""
"""Elements and attributes the page would have if stored text had become markup (our own script,
stylesheet and icon excepted): the page's DOM must hold none of them."""


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:
    demo = build_demo(tmp_path / "home", hostile=True)
    for name, value in demo.env.items():
        monkeypatch.setenv(name, value)
    with live_server(make_app(demo.env, demo.project)) as url:
        yield Console(url, demo)


def pages_of(console: Console) -> list[str]:
    ids = console.demo.memories
    return [
        "/context",  # first: building the brief reads the Claude Code folder into the store
        "/memories",
        "/memories?source=claude",
        "/memories?q=script&mode=keyword",
        "/memories?state=pending",
        "/memories?state=retired",
        *[f"/memories/{memory_id}" for memory_id in ids.values()],
        "/memories/new?event=e1",
        "/approvals",
        "/history",
        "/history/sessions",
        f"/history/sessions/{SESSION}",
        f"/history/sessions/{OTHER_SESSION}",
        *[f"/history/events/e{n}" for n in range(1, 10)],
        "/history/search?q=alert&mode=keyword",
        "/history/search?q=onerror&mode=substring",
        "/health",
    ]


@pytest.mark.parametrize("javascript", [True, False], ids=["with-js", "without-js"])
def test_hostile_text_never_runs_restyles_or_leaves_the_origin(
    browser: Browser, hostile: Console, javascript: bool
) -> None:
    context, page, guard = open_page(browser, hostile.url, javascript=javascript)
    injected: dict[str, list[str]] = {}
    try:
        for path in pages_of(hostile):
            page.goto(hostile.at(path))
            page.wait_for_load_state("load")
            found = page.evaluate(INJECTED)
            if found:
                injected[path] = found
            assert page.evaluate("getComputedStyle(document.body).display") == "block", path
            assert page.locator("main").is_visible(), path
            color = page.evaluate("getComputedStyle(document.querySelector('h1')).color")
            assert color != "rgb(255, 0, 0)", path
    finally:
        context.close()
    guard.assert_clean()
    assert not injected, injected


def test_hostile_text_is_shown_as_the_text_it_is(page_hostile: Page, hostile: Console) -> None:
    page = page_hostile
    memory_id = hostile.demo.memories["refunds"]
    page.goto(hostile.at(f"/memories/{memory_id}"))
    body = page.locator(".memory .body").first
    expect(body).to_contain_text(HOSTILE["script"])
    expect(body).to_contain_text(HOSTILE["img"])
    expect(body).to_contain_text(HOSTILE["js_link"])
    expect(body).to_contain_text("{{ 7*7 }}")  # no template ran on it either
    # bidi overrides and invisible characters are shown, not obeyed
    expect(body.locator(".ctl", has_text="U+202E").first).to_be_visible()
    expect(body.locator(".ctl", has_text="U+200B").first).to_be_visible()
    tags = page.locator(".facts .tags")
    expect(tags).to_contain_text(HOSTILE["img"][:40])
    expect(tags.locator(".ctl", has_text="U+202E").first).to_be_visible()
    # the Claude Code topic file, read into the store, is shown as text too
    page.goto(hostile.at("/context"))
    page.goto(hostile.at("/memories?source=claude"))
    topic = page.locator("#memory-list > li", has_text="hostile topic")
    expect(topic.first).to_be_visible()
    expect(topic.first).to_contain_text("<script>")
    # and the one whose front matter could not be read is on Health, with why, as text
    page.goto(hostile.at("/health"))
    unread = page.locator("section").filter(has=page.locator("h2", has_text="Claude Code memory files"))
    expect(unread).to_contain_text("broken.md: unreadable front matter")
    expect(unread).to_contain_text('onerror=alert("img")')


def test_hostile_text_arriving_over_the_live_stream_stays_text(page_hostile: Page, hostile: Console) -> None:
    page = page_hostile
    page.goto(hostile.at("/memories"))
    page.wait_for_timeout(400)
    proc = run(
        "remember",
        "--content",
        "Live " + HOSTILE_TEXT,
        "--title",
        "Live " + HOSTILE["img"] + HOSTILE["script"],
        "--type",
        "note",
        "--json",
        cwd=hostile.demo.project,
        env=hostile.demo.env,
    )
    memory_id = ok(proc)["id"]
    card = page.locator(f'#memory-list > li[data-id="{memory_id}"]')
    expect(card).to_be_visible(timeout=3000)
    expect(card.locator("h3")).to_contain_text(HOSTILE["img"])
    expect(page.locator("#live")).to_contain_text("<script>")
    assert page.evaluate(INJECTED) == []


@pytest.fixture
def page_hostile(browser: Browser, hostile: Console) -> Iterator[Page]:
    context, opened, guard = open_page(browser, hostile.url)
    try:
        yield opened
    finally:
        context.close()
    guard.assert_clean()
