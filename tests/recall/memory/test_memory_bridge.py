"""The memory tools end to end, the way a model reaches them: ``korg-bridge korg-recall --allow
fs_write`` started over stdio and driven through the MCP SDK's client.

One bridge per backend serves the module (a second or two to start): a SQLite file, then a
tenant of the team store; each test writes its own memories.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.bridge_client import Bridge, open_bridge, text_of
from tests.helpers.cli import ok, recall_script, run_recall
from tests.helpers.memory import PgTarget, dump, git_repo, holds, rows, tree_bytes
from tests.helpers.sqlite import connect

pytestmark = [pytest.mark.anyio, pytest.mark.backends_by_module]

REMEMBER, REVISE, FORGET, MEMORIES = (
    f"korg-recall_{name}" for name in ("remember", "revise", "forget", "memories")
)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def korg_recall() -> Path:
    return recall_script()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("bridge-memory-home")
    found: dict[str, Any] = {"home": home, "data": home / "data", "repo": git_repo(home / "repo")}
    if request.param == "postgres":
        roles = request.getfixturevalue("pg_roles")
        found["team"] = PgTarget(roles.app_url(), f"t-bridge-{home.name}", roles)
    return found


@pytest.fixture(scope="module")
def env(world: dict[str, Any]) -> dict[str, str]:
    values = {
        "HOME": str(world["home"]),
        "XDG_DATA_HOME": str(world["data"]),
        "XDG_CACHE_HOME": str(world["home"]),
    }
    if "team" in world:
        values.update(KORG_RECALL_STORE=world["team"].url, KORG_RECALL_TENANT=world["team"].tenant)
    return values


@pytest.fixture(scope="module")
async def bridge(korg_recall: Path, world: dict[str, Any], env: dict[str, str]) -> AsyncIterator[Bridge]:
    async with open_bridge(korg_recall, "--allow", "fs_write", env=env, cwd=world["repo"]) as running:
        yield running


def store_of(world: dict[str, Any]) -> Path | PgTarget:
    if "team" in world:
        team: PgTarget = world["team"]
        return team
    path: Path = world["data"] / "korg-recall" / "memory.sqlite"
    return path


def snapshot(store: Path | PgTarget) -> tuple[object, ...]:
    """Everything a call could change: the store (and beside a SQLite one, the mirror and the log)."""
    if isinstance(store, PgTarget):
        return (dump(store),)  # the tenant's rows, its operation log included
    return (
        dump(store),
        tree_bytes(store.parent / "memories"),
        (store.parent / "memory-ops.jsonl").read_bytes(),
    )


async def tool(bridge: Bridge, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await bridge.client.call_tool(name, arguments)
    text = text_of(result)
    assert not result.is_error, text
    value: dict[str, Any] = json.loads(text)
    return value


async def tool_error(bridge: Bridge, name: str, arguments: dict[str, Any]) -> str:
    result = await bridge.client.call_tool(name, arguments)
    assert result.is_error
    return text_of(result)


async def test_the_bridge_offers_four_memory_tools_and_no_way_to_approve_or_restore(bridge: Bridge) -> None:
    tools = {t.name: t for t in (await bridge.client.list_tools()).tools}
    assert {REMEMBER, REVISE, FORGET, MEMORIES} <= set(tools)
    assert "korg-recall_restore" not in tools
    memories_props = set(tools[MEMORIES].input_schema["properties"])
    assert not memories_props & {"approve", "pending", "stats"}
    for name in (REMEMBER, REVISE, FORGET, MEMORIES):
        description = (tools[name].description or "").lower()
        assert "use it" in description and "not" in description, name  # when to use it, and when not
    assert tools[REMEMBER].annotations is not None and tools[REMEMBER].annotations.read_only_hint is False
    assert tools[MEMORIES].annotations is not None and tools[MEMORIES].annotations.read_only_hint is True


async def test_remember_dedups_repeats_merges_rewordings_and_keeps_contradictions_apart(
    bridge: Bridge,
) -> None:
    first = await tool(
        bridge, REMEMBER, {"content": "Run make db before pytest in the shop repo.", "type": "project"}
    )
    assert (first["status"], first["version"], first["state"]) == ("created", 1, "live")
    again = await tool(
        bridge, REMEMBER, {"content": "run make db  before pytest in the shop repo", "type": "project"}
    )
    assert (again["status"], again["id"], again["version"]) == ("exists", first["id"], 1)
    reworded = await tool(
        bridge,
        REMEMBER,
        {"content": "In the shop repo, run make db before running pytest.", "type": "project"},
    )
    assert (reworded["status"], reworded["id"], reworded["version"]) == ("merged", first["id"], 2)
    contradictions = {
        "number": ("The API rate limit is 100 requests per minute.", "The API rate limit is 250 requests per minute."),
        "date": ("The release freeze starts on 2026-06-01.", "The release freeze starts on 2026-07-15."),
        "negation": ("Use the staging database for integration tests.", "Never use the staging database for integration tests."),
        "entity": ("Deploys go through GitHub Actions on every merge.", "Deploys go through Buildkite on every merge."),
    }  # fmt: skip
    for kind, (original, changed) in contradictions.items():
        kept = await tool(bridge, REMEMBER, {"content": original, "type": "project"})
        other = await tool(bridge, REMEMBER, {"content": changed, "type": "project"})
        assert other["status"] == "created", kind
        assert other["id"] != kept["id"], kind
        assert [s["id"] for s in other["similar"]] == [kept["id"]], kind
        assert other["similar"][0]["differs"], kind
        assert f"supersedes={kept['id']}" in other["hint"], kind
    assert other["checks"]["semantic"].startswith("not run: no embedding model")


async def test_revise_needs_the_current_version_when_given_one(bridge: Bridge) -> None:
    made = await tool(bridge, REMEMBER, {"content": "The user prefers pnpm over npm.", "type": "user"})
    revised = await tool(
        bridge,
        REVISE,
        {"id": made["id"], "old_text": "pnpm over npm", "new_text": "bun over pnpm", "expected_version": 1},
    )
    assert (revised["status"], revised["version"], revised["previous_version"]) == ("revised", 2, 1)
    stale = await tool_error(
        bridge, REVISE, {"id": made["id"], "content": "The user prefers yarn.", "expected_version": 1}
    )
    assert f"{made['id']} is at version 2, not 1" in stale
    assert "[exit_code] 2" in stale
    full = await tool(bridge, MEMORIES, {"ids": [made["id"]]})
    shown = full["memories"][0]
    assert (shown["version"], shown["body"]) == (2, "The user prefers bun over pnpm.")
    assert [v["body"] for v in shown["versions"]] == ["The user prefers pnpm over npm."]


async def test_forget_by_query_changes_nothing_until_confirmed(bridge: Bridge, world: dict[str, Any]) -> None:
    for text in ("The zebrafish tank sensor reads in Celsius.", "Zebrafish feeding runs at 08:00 daily."):
        await tool(bridge, REMEMBER, {"content": text, "type": "project"})
    store = store_of(world)
    before = snapshot(store)
    asked = await tool(bridge, FORGET, {"query": "zebrafish", "mode": "retire"})
    assert asked["status"] == "confirm"
    assert len(asked["matches"]) == 2
    assert snapshot(store) == before
    wrong = await tool(bridge, FORGET, {"query": "zebrafish", "mode": "purge", "confirm": asked["confirm"]})
    assert wrong["status"] == "changed"
    assert dump(store) == before[0]
    done = await tool(bridge, FORGET, {"query": "zebrafish", "mode": "retire", "confirm": asked["confirm"]})
    assert (done["status"], sorted(done["ids"])) == ("retired", sorted(m["id"] for m in asked["matches"]))
    listed = await tool(bridge, MEMORIES, {"budget_tokens": 20000})
    assert not any("ebrafish" in line for line in listed["lines"])


async def test_purge_leaves_no_trace_of_the_body_in_the_store_its_wal_the_mirror_or_the_log(
    bridge: Bridge, world: dict[str, Any]
) -> None:
    store = store_of(world)
    # The store exists once something was written (this test may run first, alone).
    await tool(bridge, REMEMBER, {"content": "The purge drill starts from a store on disk.", "type": "note"})
    if isinstance(store, Path):
        # An idle connection of our own keeps the WAL file alive between korg-recall processes (the
        # last connection to close would checkpoint and delete it), so the purge must empty it itself.
        watcher = connect(store)
        watcher.execute("SELECT count(*) FROM memory").fetchone()
    secret_fact = "The vault courier codeword is quixotic-marmalade-4471."
    made = await tool(
        bridge,
        REMEMBER,
        {"content": secret_fact, "type": "note", "title": "Courier codeword", "tags": ["courier-ops"]},
    )
    assert holds(store, "quixotic-marmalade")
    done = await tool(bridge, FORGET, {"id": made["id"], "mode": "purge"})
    assert done["status"] == "purged"
    assert "not touched" in done["note"]
    # (not the digits alone: "4471" can be part of a timestamp's microseconds)
    needles = ("quixotic", "marmalade", "Courier codeword", "courier-ops")
    if isinstance(store, PgTarget):
        # Every row and column of the tenant (the generated tsvector and the log included), and the
        # purged rows' old versions vacuumed away.
        assert done["checks"]["vacuumed"] is True
        for needle in needles:
            assert not holds(store, needle), needle
        assert rows(store, "SELECT tsv::text FROM memory WHERE id = ?", [made["id"]]) == [("",)]
    else:
        assert done["checks"]["wal_checkpointed"] is True
        everything = [store, Path(f"{store}-wal"), store.parent / "memory-ops.jsonl"]
        everything += [p for p in (store.parent / "memories").rglob("*") if p.is_file()]
        for path in everything:
            data = path.read_bytes() if path.exists() else b""
            for needle in needles:
                assert needle.encode() not in data, (path, needle)
    tombstones = rows(store, "SELECT state, title, body, tags FROM memory WHERE id = ?", [made["id"]])
    assert tombstones == [("purged", "", "", "[]")]
    assert rows(
        store,
        "SELECT count(*) FROM memory_vectors WHERE row IN (SELECT rowid FROM memory WHERE id = ?)",
        [made["id"]],
    ) == [(0,)]


async def test_retire_hides_and_restore_on_the_command_line_brings_back(
    bridge: Bridge, world: dict[str, Any], env: dict[str, str]
) -> None:
    made = await tool(
        bridge, REMEMBER, {"content": "Staging lives at staging.shop.example.", "type": "reference"}
    )
    retired = await tool(bridge, FORGET, {"id": made["id"]})
    assert retired["status"] == "retired"
    assert not any(
        made["id"] in line for line in (await tool(bridge, MEMORIES, {"budget_tokens": 20000}))["lines"]
    )
    back = ok(run_recall("restore", "--id", made["id"], cwd=world["repo"], env=env))
    assert (back["status"], back["version"]) == ("restored", 2)
    assert any(
        made["id"] in line for line in (await tool(bridge, MEMORIES, {"budget_tokens": 20000}))["lines"]
    )


async def test_without_allow_the_bridge_refuses_writes_and_serves_reads(
    korg_recall: Path, world: dict[str, Any], env: dict[str, str]
) -> None:
    async with open_bridge(korg_recall, env=env, cwd=world["repo"]) as plain:
        refused = await plain.client.call_tool(REMEMBER, {"content": "x", "type": "note"})
        assert refused.is_error
        assert "fs_write" in text_of(refused)
        listed = await plain.client.call_tool(MEMORIES, {})
        assert not listed.is_error


async def test_recall_through_the_bridge_shows_memories_first_and_export_import_are_not_offered(
    bridge: Bridge,
) -> None:
    tools = {t.name: t for t in (await bridge.client.list_tools()).tools}
    assert "korg-recall_export" not in tools and "korg-recall_import" not in tools
    recall_tool = tools["korg-recall_recall"]
    assert {"kinds", "scope", "as_of", "include_superseded"} <= set(recall_tool.input_schema["properties"])
    assert "done or decided before" in (recall_tool.description or "")
    made = await tool(
        bridge,
        REMEMBER,
        {"content": "The payments sandbox resets every night at 03:00 UTC.", "type": "project"},
    )
    result = await bridge.client.call_tool(
        "korg-recall_recall", {"query": "payments sandbox resets", "kinds": ["memory"]}
    )
    text = text_of(result)
    assert not result.is_error, text
    lines = text.splitlines()
    assert lines[0] == "[recall · memory] 1 memory:"
    assert (
        lines[1].startswith(f'<memory id="{made["id"]}" type="project" scope="project:')
        and "breakdown=" in lines[1]
    )
    as_json = await bridge.client.call_tool(
        "korg-recall_recall", {"query": "payments sandbox resets", "kinds": ["memory"], "json": True}
    )
    found = json.loads(text_of(as_json))
    assert [m["id"] for m in found["memories"]] == [made["id"]] and found["memories"][0]["version"] == 1
    refused = await bridge.client.call_tool("korg-recall_recall", {"query": "x", "kinds": ["dreams"]})
    assert refused.is_error
