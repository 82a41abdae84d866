"""The REST API's memory and approval routes, over a real ASGI client on real stores: the same
operations, log entries and mirror files as the command line's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from korg_bridge.recall.memory.backend.factory import open_store
from korg_bridge.recall.memory.review import REVIEW_AFTER_DAYS, due_for_review
from tests.helpers.console import console_client
from tests.helpers.memory import git_repo, ok, run

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)  # keyword checks: no model load per write
    return repo


def agent_remembers(project: Path, content: str, **env: str) -> dict[str, object]:
    """An agent's write: korg-recall as a child with stdin from /dev/null, as under the bridge."""
    return ok(run("remember", "--content", content, "--type", "project", "--json", cwd=project, env=env))


async def test_a_memory_remembered_over_the_api_is_listed_read_revised_and_retired(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        made = await client.post(
            "/api/v1/memories", json={"content": "Tests need make db first.", "type": "project"}
        )
        assert made.status_code == 201, made.text
        memory_id = made.json()["id"]
        listed = (await client.get("/api/v1/memories")).json()
        assert [m["id"] for m in listed["memories"]] == [memory_id]
        detail = (await client.get(f"/api/v1/memories/{memory_id}")).json()
        assert detail["current"]["actor"] == "user"
        revised = await client.post(
            f"/api/v1/memories/{memory_id}/revise",
            json={"content": "Tests need make db and make seed first.", "expected_version": 1},
        )
        assert revised.status_code == 200, revised.text
        stale = await client.post(
            f"/api/v1/memories/{memory_id}/revise", json={"content": "Something else.", "expected_version": 1}
        )
        assert stale.status_code == 400
        assert "changed since you read it" in stale.json()["error"]["message"]
        diff = (await client.get(f"/api/v1/memories/{memory_id}/diff", params={"old": 1, "new": 2})).json()
        assert {"op": "insert", "text": "and make seed "} in diff["body"]
        retired = await client.post(f"/api/v1/memories/{memory_id}/retire")
        assert retired.json()["status"] == "retired"
        detail = (await client.get(f"/api/v1/memories/{memory_id}")).json()
        assert [e["op"] for e in detail["oplog"]] == ["remember", "revise", "forget"]
        assert [e["actor"] for e in detail["oplog"]] == ["user", "user", "user"]


async def test_a_revise_in_the_console_is_the_same_version_log_entry_and_mirror_file_as_an_agents(
    project: Path, isolated_env: Path
) -> None:
    memory_id = str(agent_remembers(project, "The staging database is staging-db-2.")["id"])
    async with console_client(cwd=project) as (client, _app):
        response = await client.post(
            f"/api/v1/memories/{memory_id}/revise",
            json={
                "old_text": "staging-db-2",
                "new_text": "staging-db-3",
                "expected_version": 1,
                "reason": "moved",
            },
        )
        assert response.status_code == 200, response.text
    shown = ok(run("memories", "--ids", memory_id, "--json", cwd=project))["memories"][0]
    assert shown["version"] == 2 and "staging-db-3" in shown["body"] and shown["actor"] == "user"
    assert shown["reason"] == "moved"
    mirror = list((isolated_env / ".local" / "share" / "korg-recall").rglob(f"*{memory_id}*.md"))
    assert mirror and "staging-db-3" in mirror[0].read_text(encoding="utf-8")


async def test_filters_narrow_the_list_by_scope_type_state_tag_pinned_and_source(project: Path) -> None:
    agent_remembers(project, "An agent noted the deploy script lives in ops/deploy.sh.")
    async with console_client(cwd=project) as (client, _app):
        mine = (
            await client.post(
                "/api/v1/memories",
                json={
                    "content": "I prefer pnpm.",
                    "type": "user",
                    "scope": "user",
                    "tags": ["tools"],
                    "pinned": True,
                },
            )
        ).json()["id"]

        async def ids(**params: object) -> list[str]:
            response = await client.get("/api/v1/memories", params=params)
            assert response.status_code == 200, response.text
            return [m["id"] for m in response.json()["memories"]]

        assert len(await ids()) == 2
        assert await ids(scope="user") == [mine]
        assert await ids(type="user") == [mine]
        assert await ids(tag="tools") == [mine]
        assert await ids(pinned="true") == [mine]
        assert await ids(source="user") == [mine]
        assert mine not in await ids(source="agent") and len(await ids(source="agent")) == 1
        assert await ids(state="retired") == []
        await client.post(f"/api/v1/memories/{mine}/retire")
        assert await ids(state="retired") == [mine]
        await client.post(f"/api/v1/memories/{mine}/restore")
        assert mine in await ids(state="live")
        assert mine in await ids(state="superseded")  # its retired and first versions were superseded
        scopes = (await client.get("/api/v1/memories/scopes")).json()["scopes"]
        assert {s["scope"] for s in scopes} == {"user", f"project:{project}"}
        bad = await client.get("/api/v1/memories", params={"state": "gone"})
        assert bad.status_code == 400 and "gone" in bad.json()["error"]["message"]
        unknown = await client.get("/api/v1/memories", params={"colour": "red"})
        assert unknown.status_code == 400


async def test_a_page_of_memories_continues_with_its_cursor(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        for number in range(5):
            await client.post(
                "/api/v1/memories",
                json={"content": f"Fact number {number} about widgets {number * 7}.", "type": "note"},
            )
        first = (await client.get("/api/v1/memories", params={"limit": 3})).json()
        assert len(first["memories"]) == 3 and first["total"] == 5 and first["next_cursor"] == "3"
        rest = (
            await client.get("/api/v1/memories", params={"limit": 3, "cursor": first["next_cursor"]})
        ).json()
        assert len(rest["memories"]) == 2 and rest["next_cursor"] is None
        seen = {m["id"] for m in first["memories"]} | {m["id"] for m in rest["memories"]}
        assert len(seen) == 5
        bad = await client.get("/api/v1/memories", params={"cursor": "abc"})
        assert bad.status_code == 400 and "cursor" in bad.json()["error"]["message"]


async def test_search_shows_each_hits_score_breakdown(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        await client.post(
            "/api/v1/memories", json={"content": "Use pnpm for installs in this repo.", "type": "project"}
        )
        await client.post("/api/v1/memories", json={"content": "The CI runs on Debian.", "type": "project"})
        found = (await client.get("/api/v1/memories/search", params={"q": "pnpm installs"})).json()
        assert found["mode"] == "keyword"
        assert len(found["hits"]) == 1
        hit = found["hits"][0]
        assert {"bm25", "total"} <= set(hit["breakdown"]) and hit["how"]
        missing = await client.get("/api/v1/memories/search")
        assert missing.status_code == 400 and "q" in missing.json()["error"]["message"]


async def test_pin_review_and_purge_confirmed_by_typing_the_id(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        memory_id = (
            await client.post("/api/v1/memories", json={"content": "Secret-free fact.", "type": "note"})
        ).json()["id"]
        pinned = await client.post(
            f"/api/v1/memories/{memory_id}/pin", json={"pinned": True, "expected_version": 1}
        )
        assert pinned.status_code == 200 and pinned.json()["status"] == "revised"
        reviewed = await client.post(f"/api/v1/memories/{memory_id}/review")
        assert reviewed.json()["status"] == "reviewed"
        detail = (await client.get(f"/api/v1/memories/{memory_id}")).json()
        assert detail["current"]["pinned"] is True and detail["reviewed_at"]
        wrong = await client.delete(f"/api/v1/memories/{memory_id}", json={"confirm": "m2222222222"})
        assert wrong.status_code == 400 and "type its id" in wrong.json()["error"]["message"]
        assert (await client.get(f"/api/v1/memories/{memory_id}")).status_code == 200
        purged = await client.delete(f"/api/v1/memories/{memory_id}", json={"confirm": memory_id})
        assert purged.status_code == 200 and purged.json()["status"] == "purged"
        gone = await client.get(f"/api/v1/memories/{memory_id}")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"


async def test_held_writes_are_approved_rejected_or_edited_then_approved_with_actor_user(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_RECALL_WRITES", "confirm")
    first = str(agent_remembers(project, "Deploys happen on Tuesdays.")["id"])
    second = str(agent_remembers(project, "The linter is ruff with line length 110.")["id"])
    third = str(agent_remembers(project, "Releases are tagged vX.Y.Z by hand.")["id"])
    async with console_client(cwd=project) as (client, _app):
        status = (await client.get("/api/v1/status")).json()
        assert status["pending"] == 3 and status["actor"] == "user"
        queue = (await client.get("/api/v1/approvals")).json()
        assert {m["id"] for m in queue["memories"]} == {first, second, third}
        assert all(m["before"] is None for m in queue["memories"])
        approved = await client.post("/api/v1/approvals/approve", json={"ids": [first]})
        assert approved.status_code == 200, approved.text
        rejected = await client.post("/api/v1/approvals/reject", json={"ids": [second]})
        assert rejected.json()["rejected"][0]["outcome"] == "retired"
        edited = await client.post(
            f"/api/v1/approvals/{third}/edit", json={"content": "Releases are tagged vX.Y.Z by CI."}
        )
        assert edited.status_code == 200, edited.text
        assert (await client.get("/api/v1/status")).json()["pending"] == 0
        again = await client.post("/api/v1/approvals/approve", json={"ids": [first]})
        assert again.status_code == 400 and "nothing pending" in again.json()["error"]["message"]
        live = {m["id"]: m for m in (await client.get("/api/v1/memories")).json()["memories"]}
        assert set(live) == {first, third} and "by CI" in live[third]["excerpt"]
        log = (await client.get(f"/api/v1/memories/{first}")).json()["oplog"]
        assert [(e["op"], e["actor"]) for e in log] == [("remember", "agent"), ("approve", "user")]


async def test_a_revision_an_agent_proposes_is_rejected_and_the_memory_reads_as_before(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_id = str(agent_remembers(project, "The cache lives in /var/cache/shop.")["id"])
    monkeypatch.setenv("KORG_RECALL_WRITES", "confirm")
    ok(run("revise", "--id", memory_id, "--content", "The cache lives in /tmp.", "--json", cwd=project))
    async with console_client(cwd=project) as (client, _app):
        queue = (await client.get("/api/v1/approvals")).json()["memories"]
        assert queue[0]["before"]["body"] == "The cache lives in /var/cache/shop."
        rejected = (await client.post("/api/v1/approvals/reject", json={"ids": [memory_id]})).json()
        assert rejected["rejected"][0]["outcome"] == "dropped"
        detail = (await client.get(f"/api/v1/memories/{memory_id}")).json()
        assert (
            detail["current"]["body"] == "The cache lives in /var/cache/shop." and detail["pending"] is None
        )


async def test_writes_off_is_a_409_with_the_clis_message(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KORG_RECALL_WRITES", "off")
    async with console_client(cwd=project) as (client, _app):
        response = await client.post("/api/v1/memories", json={"content": "x y z", "type": "note"})
        assert response.status_code == 409
        assert "KORG_RECALL_WRITES=off" in response.json()["error"]["message"]


async def test_bad_bodies_get_the_schema_violation_named(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        no_type = await client.post("/api/v1/memories", json={"content": "x"})
        assert no_type.status_code == 400 and "type" in no_type.json()["error"]["message"]
        not_json = await client.post(
            "/api/v1/memories", content=b"{", headers={"content-type": "application/json"}
        )
        assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]
        bad_id = await client.get("/api/v1/memories/nope")
        assert bad_id.status_code == 400
        unknown = await client.get("/api/v1/memories/m2222222222")
        assert unknown.status_code == 404


def test_memories_untouched_for_the_review_period_are_due_and_a_review_takes_them_off(project: Path) -> None:
    import os

    from korg_bridge.recall.memory.review import mark_reviewed
    from korg_bridge.recall.memory.scopes import Context

    made = agent_remembers(project, "The build uses make.")
    later = time.time() + (REVIEW_AFTER_DAYS + 1) * 86_400
    env = dict(os.environ)
    with open_store(env) as store:
        due, total = due_for_review(store, scopes=None, now=later)
        assert [v.id for v in due] == [made["id"]] and total == 1
        assert due_for_review(store, scopes=None, now=time.time())[1] == 0
        ctx = Context.from_env(env, cwd=str(project), now=later)
        mark_reviewed(store, ctx, str(made["id"]))
        assert due_for_review(store, scopes=None, now=later + 86_400)[1] == 0


async def test_a_memorys_page_shows_its_wiki_links_both_ways(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        target = (
            await client.post(
                "/api/v1/memories", json={"content": "Staging is staging-db-3.", "type": "project"}
            )
        ).json()["id"]
        source = (
            await client.post(
                "/api/v1/memories",
                json={"content": f"Before deploying, check [[{target}]] first.", "type": "project"},
            )
        ).json()["id"]
        outgoing = (await client.get(f"/api/v1/memories/{source}")).json()["links"]["outgoing"]
        assert {"id": target, "kind": "wiki", "title": "Staging is staging-db-3."} in outgoing
        incoming = (await client.get(f"/api/v1/memories/{target}")).json()["links"]["incoming"]
        assert [(link["id"], link["kind"]) for link in incoming] == [(source, "wiki")]


async def test_a_list_shows_what_another_process_wrote_since_it_was_last_shown(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        assert (await client.get("/api/v1/memories")).json()["total"] == 0
        first = agent_remembers(project, "The queue is RabbitMQ.")
        assert [m["id"] for m in (await client.get("/api/v1/memories")).json()["memories"]] == [first["id"]]
        ok(run("forget", "--id", str(first["id"]), "--json", cwd=project))
        assert (await client.get("/api/v1/memories")).json()["total"] == 0
        assert (await client.get("/api/v1/memories", params={"state": "retired"})).json()["total"] == 1


def test_a_word_diff_is_escaped_when_rendered() -> None:
    from korg_bridge.recall.console.diff import to_html, word_diff

    parts = word_diff("run <b>make</b> first", 'run <script>alert(1)</script> "first"')
    assert [p.op for p in parts] == ["equal", "delete", "insert", "equal", "delete", "insert"]
    html = to_html(parts)
    assert "<script>" not in html and "&lt;script&gt;" in html and "&quot;first&quot;" in html
    assert html.startswith("run <del>") and "<ins>" in html


async def test_an_unknown_api_route_or_method_answers_the_error_shape(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        missing = await client.get("/api/v1/nothing-here")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        wrong = await client.http.put(
            "/api/v1/memories", json={}, headers={"x-csrf-token": await client.csrf()}
        )
        assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
