"""``/api/openapi.json`` is a valid OpenAPI 3.1 document, built from the callables' own schemas;
every route of the app is in it, and every route it documents answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from openapi_spec_validator import validate
from starlette.routing import Route

from korg_bridge.recall.cli.memory import REMEMBER_SCHEMA
from korg_bridge.recall.console.openapi import document, path_pattern
from tests.helpers.console import console_client
from tests.helpers.memory import git_repo

pytestmark = pytest.mark.anyio

NOT_API = {"/", "/healthz", "/metrics", "/login", "/logout", "/api/openapi.json", "/api/v1/csrf"}
"""Routes that are not the JSON API (pages, probes, the document itself)."""


def test_the_document_is_valid_openapi_3_1() -> None:
    spec = document()
    assert spec["openapi"].startswith("3.1")
    validate(spec)


def test_request_bodies_are_the_callables_own_schemas() -> None:
    body = document()["paths"]["/api/v1/memories"]["post"]["requestBody"]["content"]["application/json"][
        "schema"
    ]
    assert body is REMEMBER_SCHEMA or body == REMEMBER_SCHEMA


async def test_every_route_is_documented_and_every_documented_route_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    async with console_client(cwd=repo) as (client, app):
        served = await client.get("/api/openapi.json")
        assert served.status_code == 200
        spec = served.json()
        documented = {(path, method.upper()) for path, item in spec["paths"].items() for method in item}
        routes = {
            (route.path, method)
            for route in app.routes
            if isinstance(route, Route) and route.path not in NOT_API
            for method in (route.methods or ()) - {"HEAD"}
        }
        pages = {(p, m) for p, m in routes if not p.startswith("/api/")}
        assert routes - pages == documented
        memory_id = (
            await client.post("/api/v1/memories", json={"content": "A fact.", "type": "note"})
        ).json()["id"]
        for path, method in sorted(documented):
            if path.endswith("/events"):
                continue  # a stream: tests/recall/console/test_live.py
            concrete = path.replace("{id}", memory_id).replace("{ref}", "e1").replace("{session}", "none")
            assert path_pattern(path).match(concrete)
            response = await client.http.request(
                method, concrete, headers={"x-csrf-token": await client.csrf()}
            )
            # Answered by the route (a JSON result or a JSON error naming what to pass), never 404/405 of routing.
            assert response.headers["content-type"].startswith("application/json"), (
                path,
                method,
                response.text,
            )
            body = response.json()
            assert response.status_code < 300 or set(body) == {"error"}, (path, method, body)
            if response.status_code == 404:
                assert body["error"]["code"] == "not_found" and "{" in path, (path, method, body)
