"""A BINARY reached through a symlink: served under the name it was given, and
followed again after a package manager repoints the link.

Multi-call binaries (busybox, shims) pick their personality from
``basename(argv[0])``, so resolving the link breaks them; Homebrew and stow
upgrade by repointing a link and deleting the old target, so pinning the
target breaks every call after an upgrade.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from korg_bridge import BridgeOptions, Policy, build_server, discover
from korg_bridge.bridge.discovery import resolve_binary
from korg_bridge.bridge.drift import FileStamp
from tests.helpers.bridge_client import FIXTURE_BINS, child_env, open_bridge, run_cli, text_of
from tests.helpers.cli import python_env

pytestmark = pytest.mark.anyio

MULTICALL = FIXTURE_BINS / "multicall"
EXTRAS = FIXTURE_BINS / "extras"
BOUND = 30.0
"""Seconds any one wait here may take before the test fails instead of hanging."""


@pytest.fixture(autouse=True)
def _python_first_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures run ``/usr/bin/env python3``: make that this interpreter."""
    monkeypatch.setenv("PATH", python_env()["PATH"])


def personality(folder: Path, name: str) -> Path:
    """A link named for one of multicall's personalities."""
    folder.mkdir(exist_ok=True)
    link = folder / name
    link.symlink_to(MULTICALL)
    return link


def repoint(link: Path, target: str) -> None:
    """Repoint ``link`` atomically, as ``ln -sfn`` and Homebrew's ``brew link`` do."""
    fresh = link.with_name(f".{link.name}.new")
    fresh.symlink_to(target)
    os.replace(fresh, link)


# --- the name a binary was given ------------------------------------------------------------


def test_a_symlink_is_kept_absolute_but_unresolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = personality(tmp_path / "bin", "mc-alpha")
    monkeypatch.chdir(tmp_path)
    assert resolve_binary("bin/mc-alpha") == str(link)
    assert resolve_binary("./bin/../bin/mc-alpha") == str(tmp_path / "bin" / ".." / "bin" / "mc-alpha")
    assert resolve_binary("mc-alpha", env={"PATH": "bin"}) == str(link)  # a relative PATH entry too


async def test_a_multi_call_binary_introspects_under_its_link_name(tmp_path: Path) -> None:
    link = personality(tmp_path / "bin", "mc-beta")
    document = await discover(str(link))
    assert document.binary == "mc-beta"
    assert document.path == str(link)
    assert [c.command_id for c in document.callables] == ["mc-beta.count"]


async def test_a_multi_call_binary_is_served_and_called_through_its_link(tmp_path: Path) -> None:
    link = personality(tmp_path / "bin", "mc-alpha")
    async with open_bridge(link) as bridge:
        tools = {t.name for t in (await bridge.client.list_tools()).tools}
        assert tools == {"mc-alpha_greet"}
        result = await bridge.client.call_tool("mc-alpha_greet", {"name": "world"})
    assert not result.is_error
    assert text_of(result) == "alpha greets world\nargv0 mc-alpha\n"


def test_a_multi_call_binary_found_on_path_keeps_its_name(tmp_path: Path) -> None:
    personality(tmp_path / "bin", "mc-beta")
    path = os.pathsep.join([str(tmp_path / "bin"), child_env()["PATH"]])
    done = run_cli(["mc-beta", "--list-tools", "--json"], env={"PATH": path})
    assert done.returncode == 0, done.stderr
    assert '"mc-beta.count"' in done.stdout
    assert f'"path": "{tmp_path / "bin" / "mc-beta"}"' in done.stdout


# --- a link repointed by an upgrade ---------------------------------------------------------


def install(cellar: Path, version: str, extra_tool: str | None) -> Path:
    """``cellar/<version>/tool``: a build of the extras fixture, as a package manager lays it out."""
    folder = cellar / version
    folder.mkdir(parents=True)
    tool = folder / "tool"
    env = f"EXTRAS_VERSION={version} " + (f"EXTRAS_EXTRA_TOOL={extra_tool} " if extra_tool else "")
    tool.write_text(f'#!/bin/sh\n{env}exec "{sys.executable}" "{EXTRAS}" "$@"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def test_a_repointed_link_changes_the_stamp_even_to_an_identical_file(tmp_path: Path) -> None:
    first = tmp_path / "v1"
    first.write_text("same bytes\n")
    twin = tmp_path / "v2"
    os.link(first, twin)  # same inode, size and mtime: only where the link leads differs
    link = tmp_path / "tool"
    link.symlink_to("v1")
    before = FileStamp.of(str(link))
    repoint(link, "v2")
    after = FileStamp.of(str(link))
    assert before is not None and after is not None
    assert (before.inode, before.size, before.mtime_ns) == (after.inode, after.size, after.mtime_ns)
    assert before != after


def test_a_repointed_folder_link_above_the_binary_changes_the_stamp(tmp_path: Path) -> None:
    for version in ("1", "2"):
        (tmp_path / version / "bin").mkdir(parents=True)
        (tmp_path / version / "bin" / "tool").write_text("x")
    opt = tmp_path / "opt"
    opt.symlink_to("1")
    before = FileStamp.of(str(opt / "bin" / "tool"))
    repoint(opt, "2")
    assert FileStamp.of(str(opt / "bin" / "tool")) != before


def test_a_dangling_link_has_no_stamp(tmp_path: Path) -> None:
    link = tmp_path / "tool"
    link.symlink_to("gone")
    assert FileStamp.of(str(link)) is None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_upgrade_that_repoints_the_link_and_deletes_the_old_build_keeps_calls_working(
    tmp_path: Path, mode: str
) -> None:
    cellar = tmp_path / "Cellar" / "tool"
    install(cellar, "1", None)
    install(cellar, "2", "fresh")
    (tmp_path / "bin").mkdir()
    link = tmp_path / "bin" / "tool"
    link.symlink_to("../Cellar/tool/1/tool")
    document = await discover(str(link))
    assert document.version == "1"
    server = build_server(document, BridgeOptions(policy=Policy(), poll_interval=0.1))
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(server, mode=mode, message_handler=on_message) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        assert "extras_fresh" not in before
        assert not (await client.call_tool("extras_plain", {})).is_error

        async def upgrade() -> None:
            repoint(link, "../Cellar/tool/2/tool")
            shutil.rmtree(cellar / "1")
            # Before the watch has noticed, a call already runs the new build.
            result = await client.call_tool("extras_plain", {})
            assert not result.is_error, result.content

        if mode == "legacy":
            await upgrade()
            with anyio.fail_after(BOUND):
                await changed.wait()
        else:
            async with client.listen(tools_list_changed=True) as subscription:
                await upgrade()
                with anyio.fail_after(BOUND):
                    event = await subscription.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
        after = {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}
        assert after == before | {"extras_fresh"}
        result = await client.call_tool("extras_fresh", {})
    assert not result.is_error
    assert result.content[0].text == "fresh\n"  # type: ignore[union-attr]
