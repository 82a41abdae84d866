"""Drift reload backs off from a binary that changes on disk without changing its tools.

``fixture_bins/self-rewriting`` moves its own mtime on every ``--introspect``
and counts its introspections in a file, so these tests see how often the
watch really re-runs it; they run a copy, because it rewrites whichever file
it was run as.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client

from korg_bridge import BridgeOptions, Policy, discover
from korg_bridge.bridge.drift import MAX_BACKOFF, Watch
from korg_bridge.serving.server import Bridge
from tests.helpers.cli import python_env
from tests.helpers.paths import FIXTURE_BINS

pytestmark = pytest.mark.anyio

POLL = 0.05
BOUND = 30.0
"""Seconds any one wait here may take before the test fails instead of hanging."""


@pytest.fixture(autouse=True)
def _python_first_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", python_env()["PATH"])


@pytest.fixture
def rewriter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the self-rewriting fixture (and the module it imports)."""
    for name in ("self-rewriting", "_fixture.py"):
        shutil.copy2(FIXTURE_BINS / name, tmp_path / name)
    monkeypatch.setenv("KORG_FIXTURE_COUNT", str(tmp_path / "count"))
    return tmp_path / "self-rewriting"


def introspections(binary: Path) -> int:
    return (binary.parent / "count").read_text().count("introspect")


def touch(binary: Path) -> None:
    """A change on disk that is not a change of the tools (a rebuild with the same result)."""
    st = binary.stat()
    os.utime(binary, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


@asynccontextmanager
async def serving(binary: Path) -> AsyncIterator[tuple[Bridge, Client]]:
    bridge = Bridge(await discover(str(binary)), BridgeOptions(policy=Policy(), poll_interval=POLL))
    async with Client(bridge.server()) as client:
        yield bridge, client


async def until_backoff(watch: Watch, client: Client, at_least: float) -> None:
    """Keep asking for the tools (each ``tools/list`` checks for drift too) until the watch waits that long."""
    with anyio.fail_after(BOUND):
        while watch.backoff < at_least:
            await client.list_tools()
            await anyio.sleep(POLL / 2)


async def test_a_binary_that_rewrites_itself_on_introspect_is_reintrospected_ever_more_rarely(
    rewriter: Path,
) -> None:
    async with serving(rewriter) as (bridge, client):
        (watch,) = bridge.watches
        assert introspections(rewriter) == 1
        started = anyio.current_time()
        touch(rewriter)
        # Waits of 0.1, 0.2, 0.4 and 0.8 s: without the back-off, a poll every
        # 0.05 s and a tools/list every 0.025 s would re-run it ~60 times meanwhile.
        await until_backoff(watch, client, 1.6)
        elapsed = anyio.current_time() - started
        count = introspections(rewriter)
    assert elapsed >= 0.1 + 0.2 + 0.4 + 0.8
    assert 5 <= count <= 7, count


async def test_a_binary_that_prints_a_new_document_every_run_is_reloaded_once_per_back_off_period(
    rewriter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_FIXTURE_STAMPED", "1")  # a timestamp in every document it prints
    async with serving(rewriter) as (bridge, client):
        (watch,) = bridge.watches
        started = anyio.current_time()
        touch(rewriter)
        # Every look finds a "new" document: without backing off, a poll every 0.05 s and a
        # tools/list every 0.025 s would reload it (and tell the client) ~40 times meanwhile.
        await until_backoff(watch, client, 0.8)
        elapsed = anyio.current_time() - started
        count = introspections(rewriter)
    assert elapsed >= 0.1 + 0.2 + 0.4
    assert 5 <= count <= 8, count


async def test_the_back_off_doubles_from_the_poll_interval_up_to_its_cap() -> None:
    extras = FIXTURE_BINS / "extras"
    watch = Watch(str(extras), await discover(str(extras)), poll_interval=2.0)
    assert watch.backoff == 0.0
    waits = []
    for _ in range(8):
        watch._back_off()
        waits.append(watch.backoff)
    assert waits == [4.0, 8.0, 16.0, 32.0, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF]


async def test_a_real_change_is_still_served_and_ends_the_back_off(rewriter: Path) -> None:
    async with serving(rewriter) as (bridge, client):
        (watch,) = bridge.watches
        touch(rewriter)
        await until_backoff(watch, client, 0.4)
        rewriter.with_name("self-rewriting.tools").write_text("fresh\n")
        with anyio.fail_after(BOUND):
            while "self-rewriting_fresh" not in {t.name for t in (await client.list_tools()).tools}:
                await anyio.sleep(POLL)
        # Started over: serving the change rewrote the binary once more, so the
        # wait may already be one poll again, but no longer the 0.4 s or more of before.
        assert watch.backoff < 0.4
        result = await client.call_tool("self-rewriting_fresh", {})
    assert result.content[0].text == "fresh\n"  # type: ignore[union-attr]


async def test_a_binary_touched_once_is_watched_every_poll_again_once_it_stays_put(tmp_path: Path) -> None:
    for name in ("extras", "_fixture.py"):
        shutil.copy2(FIXTURE_BINS / name, tmp_path / name)
    binary = tmp_path / "extras"
    async with serving(binary) as (bridge, client):
        (watch,) = bridge.watches
        touch(binary)
        await until_backoff(watch, client, 2 * POLL)
        with anyio.fail_after(BOUND):
            while watch.backoff:
                await anyio.sleep(POLL)
