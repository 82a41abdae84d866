"""A team store: two tokens on one PostgreSQL store see only their own tenant -- in the API, the
metrics and the live stream -- and each write is recorded with the token's actor."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from korg_bridge.auth.tokens import Keyring, parse_tokens
from korg_bridge.recall.console.app import Settings, build_app
from tests.helpers.console import console_client, live_server
from tests.helpers.memory import git_repo
from tests.helpers.postgres import (
    Roles,
    served_roles,
)

pytestmark = pytest.mark.anyio

ANA = "acme-token-0123456789abcdef"
BOB = "globex-token-0123456789abcdef"


@pytest.fixture(scope="module")
def pg_roles() -> Iterator[Roles]:
    yield from served_roles()


@pytest.fixture
def team(pg_roles: Roles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.delenv("KORG_RECALL_TENANT", raising=False)
    env = {**os.environ, "KORG_RECALL_STORE": pg_roles.app_url()}
    return repo, env


def tokens(suffix: str) -> Keyring:
    return Keyring(parse_tokens(f"{ANA} acme-{suffix} ana\n{BOB} globex-{suffix} bob\n", "test tokens"))


def as_(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_two_tokens_on_one_team_store_see_only_their_own_tenant(
    team: tuple[Path, dict[str, str]], request: pytest.FixtureRequest
) -> None:
    repo, env = team
    suffix = request.node.name[-8:].replace("_", "x")
    async with console_client(cwd=repo, env=env, keyring=tokens(suffix)) as (client, _app):
        acme = await client.http.post(
            "/api/v1/memories",
            json={"content": "Acme's launch is on Friday.", "type": "project"},
            headers=as_(ANA),
        )
        assert acme.status_code == 201, acme.text
        globex = await client.http.post(
            "/api/v1/memories",
            json={"content": "Globex ships on Monday.", "type": "project"},
            headers=as_(BOB),
        )
        acme_id, globex_id = acme.json()["id"], globex.json()["id"]
        ana_sees = (await client.get("/api/v1/memories", headers=as_(ANA))).json()["memories"]
        bob_sees = (await client.get("/api/v1/memories", headers=as_(BOB))).json()["memories"]
        assert [m["id"] for m in ana_sees] == [acme_id] and [m["id"] for m in bob_sees] == [globex_id]
        assert (await client.get(f"/api/v1/memories/{acme_id}", headers=as_(BOB))).status_code == 404
        found = (
            await client.get("/api/v1/memories/search", params={"q": "launch Friday"}, headers=as_(BOB))
        ).json()
        assert found["hits"] == []
        revise = await client.http.post(
            f"/api/v1/memories/{acme_id}/revise", json={"content": "Taken over."}, headers=as_(BOB)
        )
        assert revise.status_code == 404
        detail = (await client.get(f"/api/v1/memories/{acme_id}", headers=as_(ANA))).json()
        assert detail["current"]["actor"] == "ana" and detail["oplog"][0]["actor"] == "ana"
        metrics = (await client.get("/metrics", headers=as_(BOB))).text
        assert 'korg_memories{state="live"} 1.0' in metrics


async def test_a_team_stream_carries_only_its_own_tenants_memories(
    team: tuple[Path, dict[str, str]], request: pytest.FixtureRequest
) -> None:
    repo, env = team
    suffix = request.node.name[-8:].replace("_", "x")
    app = build_app(Settings(env=env, cwd=str(repo), keyring=tokens(suffix), background=False))
    with live_server(app) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as client,
            client.stream("GET", "/api/v1/events", headers=as_(BOB)) as response,
        ):
            assert response.status_code == 200
            lines = response.aiter_lines()
            ana = await client.post(
                "/api/v1/memories",
                json={"content": "Acme's secret roadmap.", "type": "note"},
                headers=as_(ANA),
            )
            assert ana.status_code == 201
            bob = await client.post(
                "/api/v1/memories",
                json={"content": "Globex's own note.", "type": "note"},
                headers=as_(BOB),
            )
            seen: list[dict[str, object]] = []
            with anyio.fail_after(5):
                async for line in lines:
                    if line.startswith("data: ") and "memories" in line:
                        seen.extend(json.loads(line.removeprefix("data: "))["memories"])
                        if any(m["id"] == bob.json()["id"] for m in seen):
                            break
            assert {m["id"] for m in seen} == {bob.json()["id"]}
            assert "Acme" not in json.dumps(seen)
