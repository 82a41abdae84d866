"""A two-tenant team deployment, attacked from one tenant's token: no tool argument reads the other's
memories, the other's history, the server's own history or the audit ledger.

``korg-bridge korg-recall --http … --token-file … --audit …`` serves two tenants (acme and globex)
and an operator token without a tenant, on a team store (embedded PostgreSQL) and on SQLite stores.
The server's environment holds what an operator might leave there: ``KORG_RECALL_TENANT=acme``.
The operator's file gives acme its folder and, by mistake, the folder of the audit ledger; acme's
folder holds links into globex's. Everything -- globex's history, the server's, the audit ledger --
is already in the shared recall index. Then acme's token calls every tool of korg-recall with every
path-like argument an attacker would try, and all that comes back is searched for the secrets.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers.bridge_client import serve_http
from tests.helpers.cli import python_env, recall_script
from tests.helpers.cli import run_recall as korg_recall_cli
from tests.helpers.paths import REPO

pytestmark = [pytest.mark.backends_by_module, pytest.mark.anyio]

BOUND = 120.0
ANA, BOB, OPS = "tok-ana-" + "a" * 32, "tok-bob-" + "b" * 32, "tok-ops-" + "c" * 32

THEIRS = {
    "ZEBRA-7731": "globex's history",
    "WALRUS-5521": "globex's memory (and the audit ledger, which recorded its remember)",
    "OTTER-4410": "the server's own history (its ~/.claude and ~/.korg)",
    "MARMOT-3303": "the server user's Claude Code memory and a CLAUDE.md in globex's folder",
}
OURS_HISTORY, OURS_MEMORY = "LLAMA-1001", "HERON-2002"


def _ledger(path: Path, *texts: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {"seq": n, "source_agent": "agent:korgex@0.2.2", "tool_name": "user_prompt", "args": {"prompt": text}}
        for n, text in enumerate(texts, start=1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@dataclass
class Site:
    """The server's files, and the environment its bridge runs in."""

    root: Path
    env: dict[str, str]
    audit: Path
    outputs: list[str] = field(default_factory=list)


@pytest.fixture(params=["sqlite", "postgres"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    home = tmp_path / "home"
    history = tmp_path / "history"
    _ledger(history / "acme" / "a.jsonl", f"acme deploys on tuesdays, build tag {OURS_HISTORY}")
    _ledger(history / "globex" / "g.jsonl", "globex launch code is ZEBRA-7731")
    _ledger(home / ".korg" / "sessions" / "s.jsonl", "the server admin password hint is OTTER-4410")
    _ledger(home / ".claude" / "projects" / "-srv-app" / "t.jsonl", "server session OTTER-4410")
    claude_memory = home / ".claude" / "projects" / "-srv-app" / "memory"
    claude_memory.mkdir()
    (claude_memory / "deploy.md").write_text(
        "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\nThe deploy key is MARMOT-3303.\n"
    )
    (claude_memory / "MEMORY.md").write_text("- [deploy](deploy.md): how we deploy\n")
    (history / "globex" / "CLAUDE.md").write_text("# globex\nThe signing secret is MARMOT-3303.\n")
    audit = tmp_path / "var" / "audit.jsonl"
    audit.parent.mkdir()
    (history / "acme" / "escape.jsonl").symlink_to(history / "globex" / "g.jsonl")
    (history / "acme" / "escape-dir").symlink_to(history / "globex")
    (history / "acme" / "audit-link.jsonl").symlink_to(audit)
    (history / "acme" / "home").symlink_to(home)
    grants = tmp_path / "tenant-ledgers"
    grants.write_text(f"acme {history / 'acme'}\nacme {audit.parent}\nglobex {history / 'globex'}\n")
    grants.chmod(0o600)
    env = python_env() | {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PYTHONPATH": str(REPO),
        "KORG_RECALL_BACKGROUND": "0",
        "KORG_RECALL_TENANT": "acme",  # the operator's own, left in the server's environment
        "KORG_RECALL_TENANT_LEDGERS": str(grants),
    }
    env.pop("KORG_RECALL_MODEL_DIR", None)
    if request.param == "postgres":
        env["KORG_RECALL_STORE"] = request.getfixturevalue("pg_roles").app_url()
    yield Site(tmp_path, env, audit)


@asynccontextmanager
async def served(site: Site) -> AsyncIterator[str]:
    korg_recall = str(recall_script())
    tokens = site.root / "tokens"
    tokens.write_text(f"{ANA} acme ana\n{BOB} globex bob\n{OPS}\n")
    tokens.chmod(0o600)
    flags = ["--token-file", str(tokens), "--audit", str(site.audit), "--allow", "fs_write"]
    async with serve_http(korg_recall, *flags, env=site.env, cwd=site.root, bound=BOUND) as url:
        yield url


@asynccontextmanager
async def client(url: str, token: str) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=BOUND) as http,
        Client(streamable_http_client(url, http_client=http)) as connected,
    ):
        yield connected


async def call(connected: Any, site: Site, tool: str, arguments: dict[str, Any]) -> str:
    """Everything a call returns, error or not, as one text (kept for the final search)."""
    result = await connected.call_tool(f"korg-recall_{tool}", arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    text += json.dumps(result.structured_content or {})
    site.outputs.append(f"{tool} {arguments}: {text}")
    return text


def attacks(site: Site) -> list[str]:
    """Every spelling of a path to what acme must not read."""
    root, home = site.root, site.root / "home"
    data = home / ".local" / "share" / "korg-recall"
    return [
        str(site.audit),
        "var/audit.jsonl",
        "history/acme/../../var//audit.jsonl",
        str(root / "history" / "globex" / "g.jsonl"),
        str(root / "history" / "globex"),
        f"{root}/history/acme/../globex",
        "history/globex/g.jsonl",
        "./history",
        str(root / "history" / "acme" / "escape.jsonl"),
        str(root / "history" / "acme" / "escape-dir"),
        str(root / "history" / "acme" / "audit-link.jsonl"),
        str(root / "history" / "acme" / "home" / ".korg"),
        "~",
        "~/.claude/projects",
        "~/.korg/sessions/s.jsonl",
        "$HOME/.korg/sessions",
        "${KORG_BRIDGE_AUDIT}",
        "%USERPROFILE%\\.korg",
        str(root),
        "/",
        str(data / "memory-ops.jsonl"),
        str(data / "tenants" / "globex" / "memory-ops.jsonl"),
    ]


async def attack(connected: Any, site: Site) -> None:
    """acme's token tries every tool with every path-like argument."""
    own = str(site.root / "history" / "acme" / "a.jsonl")
    limiter = anyio.CapacityLimiter(4)

    async def one(tool: str, arguments: dict[str, Any]) -> None:
        async with limiter:
            await call(connected, site, tool, arguments)

    values = attacks(site)
    async with anyio.create_task_group() as tg:
        for value in values:
            tg.start_soon(
                one, "recall", {"query": "code password session tag", "ledger": [value], "top_n": 50}
            )
            tg.start_soon(one, "verify", {"path": value})
        for value in values[::3]:
            tg.start_soon(one, "index", {"ledger": [value], "no_embed": True})
            tg.start_soon(one, "recall", {"query": "code password", "project": value, "top_n": 50})
            tg.start_soon(one, "context", {"project": value})
            tg.start_soon(one, "memories", {"scope": f"project:{value}"})
        for value in values[:4]:
            tg.start_soon(one, "prune", {"gone": True, "ledger": [value]})
            tg.start_soon(one, "verify", {"path": own, "anchors": value})
        for ref in range(1, 40):  # every event of the shared index, by its ref
            tg.start_soon(one, "show", {"ref": f"e{ref}", "context": 5})
    globex = f"project:{site.root / 'history' / 'globex'}"
    for tool, arguments in [
        ("memories", {"scope": globex, "budget_tokens": 20000}),
        ("recall", {"query": "deploy key signing secret", "scope": globex, "kinds": ["memory"]}),
        ("context", {"project": str(site.root / "history" / "globex")}),
        ("recall", {"query": "code password session hint launch wifi tag", "top_n": 50, "json": True}),
        ("recall", {"query": "globex", "mode": "substring", "top_n": 50, "kinds": ["history"]}),
        ("memories", {"budget_tokens": 20000}),
        ("memories", {"scope": "user", "include_retired": True, "budget_tokens": 20000}),
        ("stats", {}),
        ("context", {}),
        ("hooks_status", {}),
    ]:
        await call(connected, site, tool, arguments)


async def test_no_tool_argument_lets_a_tenant_read_another_s_memories_or_history(site: Site) -> None:
    async with served(site) as url:
        async with client(url, BOB) as globex:
            made = await call(
                globex,
                site,
                "remember",
                {"content": "globex office wifi network is called WALRUS-5521", "type": "project"},
            )
            assert '"id"' in made, made
            await call(globex, site, "recall", {"query": "launch code"})
        async with client(url, ANA) as acme:
            made = await call(
                acme, site, "remember", {"content": f"acme door code is {OURS_MEMORY}", "type": "project"}
            )
            assert '"id"' in made, made
        # The operator, at the server, indexes everything: globex's, the server's and the audit ledger.
        everything = [str(site.root / "history"), str(site.audit), str(site.root / "home")]
        indexed = korg_recall_cli(
            "index", "--no-embed", *(f"--ledger={path}" for path in everything), cwd=site.root,
            env={**site.env, "KORG_RECALL_TENANT": ""},
        )  # fmt: skip
        assert indexed.returncode == 0, indexed.stderr
        assert json.loads(indexed.stdout)["events_added"] >= 5
        assert "WALRUS-5521" in site.audit.read_text()
        site.outputs.clear()
        async with client(url, ANA) as acme:
            ours = await call(acme, site, "recall", {"query": "door code tag", "top_n": 50, "json": True})
            await attack(acme, site)
        ana = "\n".join(site.outputs)
        site.outputs.clear()
        async with client(url, OPS) as operator:  # a token without a tenant: not acme's
            await call(operator, site, "memories", {"budget_tokens": 20000})
            await call(operator, site, "recall", {"query": "door code", "kinds": ["memory"]})
        ops = "\n".join(site.outputs)
    leaks = {secret: what for secret, what in THEIRS.items() if secret in ana}
    assert not leaks, _context(ana, leaks)
    assert OURS_MEMORY not in ops
    assert OURS_HISTORY in ours and OURS_MEMORY in ours  # acme reads its own: the walls are not blind


def _context(text: str, leaks: dict[str, str]) -> str:
    lines = [line[:400] for line in text.splitlines() if any(secret in line for secret in leaks)]
    return f"leaked {leaks}:\n" + "\n".join(lines[:10])
