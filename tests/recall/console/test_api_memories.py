"""The REST API's memory routes, over a real ASGI client: the same operations, log entries and
mirror files as the command line's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.console import console_client
from tests.helpers.memory import git_repo

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    return repo


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
