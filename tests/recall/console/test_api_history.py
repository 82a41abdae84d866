"""The REST API's history, context-preview, health and metrics routes, on a real index built from
Claude Code transcripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.console import console_client, write_transcript
from tests.helpers.memory import git_repo

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    transcripts = tmp_path / "transcripts"
    write_transcript(
        transcripts,
        "sess-a",
        repo,
        [("Fix the flaky checkout test", "Looking at checkout"), ("Now run it", "It passes")],
    )
    write_transcript(transcripts, "sess-b", repo, [("Add a README badge", "Added")], branch="docs")
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(transcripts))
    return repo


async def test_projects_sessions_and_a_timeline_with_tool_calls_paired_with_their_results(
    project: Path,
) -> None:
    async with console_client(cwd=project) as (client, _app):
        projects = (await client.get("/api/v1/history/projects")).json()["projects"]
        assert [(p["project"], p["sessions"]) for p in projects] == [(str(project), 2)]
        sessions = (await client.get("/api/v1/history/sessions", params={"project": str(project)})).json()
        by_id = {s["session"]: s for s in sessions["sessions"]}
        assert set(by_id) == {"sess-a", "sess-b"} and sessions["total"] == 2
        assert by_id["sess-a"]["title"] == "Fix the flaky checkout test"
        assert by_id["sess-b"]["branch"] == "docs" and by_id["sess-a"]["agent"]
        timeline = (await client.get("/api/v1/history/sessions/sess-a")).json()
        kinds = [e["kind"] for e in timeline["events"]]
        assert kinds[:3] == ["prompt", "reply", "tool"]
        tool = timeline["events"][2]
        assert tool["tool"] == "Bash" and "echo step 0" in tool["input"] and "step 0" in tool["output"]
        missing = await client.get("/api/v1/history/sessions/nope")
        assert missing.status_code == 404


async def test_an_event_in_full_and_the_memory_draft_remember_this_opens(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        timeline = (await client.get("/api/v1/history/sessions/sess-a")).json()
        ref = timeline["events"][0]["ref"]
        event = (await client.get(f"/api/v1/history/events/{ref}")).json()
        assert event["text"].startswith("Fix the flaky checkout test")
        draft = (await client.get(f"/api/v1/history/events/{ref}/draft")).json()
        assert draft["source"] == ref and draft["scope"] == f"project:{project}"
        made = await client.post(
            "/api/v1/memories",
            json={
                "content": draft["content"],
                "type": draft["type"],
                "scope": draft["scope"],
                "source": draft["source"],
            },
        )
        memory_id = made.json()["id"]
        detail = (await client.get(f"/api/v1/memories/{memory_id}")).json()
        assert detail["current"]["ref"] == ref  # the provenance links back into History
        assert (await client.get("/api/v1/history/events/e999999")).status_code == 404
        assert (await client.get("/api/v1/history/events/x1")).status_code == 400


async def test_history_search_filters_by_project_agent_and_kind_with_breakdowns(
    project: Path, tmp_path: Path
) -> None:
    async with console_client(cwd=project) as (client, _app):
        found = (
            await client.get("/api/v1/history/search", params={"q": "flaky checkout", "mode": "keyword"})
        ).json()
        assert found["hits"] and found["hits"][0]["breakdown"]["total"] > 0
        assert found["hits"][0]["session"] == "sess-a"
        only_prompts = (
            await client.get(
                "/api/v1/history/search", params={"q": "checkout", "mode": "keyword", "tool": "user_prompt"}
            )
        ).json()
        assert {h["tool"] for h in only_prompts["hits"]} == {"user_prompt"}
        elsewhere = (
            await client.get(
                "/api/v1/history/search",
                params={"q": "checkout", "mode": "keyword", "project": str(git_repo(tmp_path / "other"))},
            )
        ).json()
        assert elsewhere["hits"] == []
        bad = await client.get("/api/v1/history/search", params={"q": "x", "mode": "psychic"})
        assert bad.status_code == 400


async def test_the_context_preview_is_the_brief_the_hook_would_inject_with_what_it_left_out(
    project: Path,
) -> None:
    async with console_client(cwd=project) as (client, _app):
        await client.post(
            "/api/v1/memories", json={"content": "Run make db before the tests.", "type": "project"}
        )
        retired = (
            await client.post(
                "/api/v1/memories", json={"content": "Old fact about ports.", "type": "project"}
            )
        ).json()["id"]
        await client.post(f"/api/v1/memories/{retired}/retire")
        preview = (
            await client.get("/api/v1/context", params={"project": str(project), "budget": 500})
        ).json()
        assert "Run make db before the tests." in preview["text"] and "Old fact" not in preview["text"]
        assert 0 < preview["tokens"] <= preview["budget"] == 500
        assert preview["left_out"]["retired"] == 1 and preview["left_out"]["budget"] == 0
        assert {(h["agent"], h["level"]) for h in preview["hooks"]} == {
            ("claude", "user"),
            ("claude", "project"),
            ("codex", "user"),
            ("codex", "project"),
        }
        bad = await client.get("/api/v1/context", params={"budget": 10})
        assert bad.status_code == 400


async def test_health_reports_index_store_and_a_verified_op_log(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        await client.post("/api/v1/memories", json={"content": "A fact to log.", "type": "note"})
        health = (await client.get("/api/v1/health")).json()
        assert health["index"]["events"] > 0 and "embedding" in health["index"]
        assert health["memory"]["exists"] is True
        assert health["oplog"]["intact"] is True


async def test_metrics_count_requests_per_route_and_the_stores_figures(project: Path) -> None:
    async with console_client(cwd=project) as (client, _app):
        await client.post("/api/v1/memories", json={"content": "Metrics fact.", "type": "note"})
        await client.get("/api/v1/memories")
        await client.get("/api/v1/memories/m2222222222")
        text = (await client.get("/metrics")).text
        assert 'korg_console_requests_total{method="GET",route="/api/v1/memories",status="200"} 1.0' in text
        assert 'route="/api/v1/memories/{id}",status="404"' in text
        assert "m2222222222" not in text  # no id ever becomes a label
        assert 'korg_memories{state="live"} 1.0' in text
        assert "korg_memories_pending 0.0" in text and "korg_events_indexed" in text
        assert "korg_console_request_seconds_bucket" in text
