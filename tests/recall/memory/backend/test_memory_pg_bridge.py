"""Two tokens, two tenants, through ``korg-bridge korg-recall --http``: each caller sees only its own
memories, the audit ledger records who called, and the rate limit answers 429 with Retry-After.

The bridge's side -- a token file of ``TOKEN tenant [actor]`` lines, ``KORG_BRIDGE_TENANT`` and
``KORG_BRIDGE_ACTOR`` in each child's environment, the audit fields, ``--rate-limit`` -- is tested
on its own in tests/test_http_identity.py and tests/test_ratelimit.py; korg-recall's side (the tenant and actor it takes from those
variables) without the bridge in test_memory_pg.py. Here the two meet.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.bridge_client import serve_http
from tests.helpers.cli import python_env, recall_script
from tests.helpers.paths import REPO
from tests.helpers.postgres import Roles

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.anyio,
]

BOUND = 60.0
ANA, BOB = "tok-ana-" + "a" * 32, "tok-bob-" + "b" * 32


@asynccontextmanager
async def bridge(roles: Roles, tmp_path: Path, *flags: str) -> AsyncIterator[str]:
    """``korg-bridge korg-recall --http`` with two tokens (tenants acme and globex), yielding its URL."""
    korg_recall = str(recall_script())
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{ANA} acme ana\n{BOB} globex bob\n")
    tokens.chmod(0o600)
    env = python_env()
    env.update(KORG_RECALL_STORE=roles.app_url(), HOME=str(tmp_path), PYTHONPATH=str(REPO))
    flags = ["--token-file", str(tokens), "--allow", "fs_write", *flags]
    async with serve_http(korg_recall, *flags, env=env, cwd=tmp_path, bound=BOUND) as url:
        yield url


async def _call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    value: dict[str, Any] = json.loads(result.content[0].text)
    return value


async def test_two_tokens_are_two_tenants_that_never_see_each_other(pg_roles: Roles, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with bridge(pg_roles, tmp_path, "--audit", str(audit)) as url:
        ana = await _call(
            url, ANA, "korg-recall_remember", {"content": "Acme deploys on Tuesdays.", "type": "project"}
        )
        bob = await _call(
            url, BOB, "korg-recall_remember", {"content": "Globex deploys on Fridays.", "type": "project"}
        )
        seen_by_ana = await _call(url, ANA, "korg-recall_memories", {"scope": "user", "budget_tokens": 20000})
        seen_by_bob = await _call(url, BOB, "korg-recall_memories", {"budget_tokens": 20000})
    assert ana["id"] not in json.dumps(seen_by_bob) and bob["id"] not in json.dumps(seen_by_ana)
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    text = json.dumps(entries)
    assert "acme" in text and "globex" in text and "ana" in text and "bob" in text
    assert ANA not in text and BOB not in text and pg_roles.app_password not in text


async def test_the_rate_limit_answers_429_with_retry_after(pg_roles: Roles, tmp_path: Path) -> None:
    import httpx2

    async with bridge(pg_roles, tmp_path, "--rate-limit", "2/s") as url:
        statuses: list[tuple[int, str | None]] = []
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ANA}"}) as http:
            for _ in range(10):
                response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                statuses.append((response.status_code, response.headers.get("Retry-After")))
    limited = [retry for status, retry in statuses if status == 429]
    assert limited and all(retry is not None and int(retry) >= 1 for retry in limited)
