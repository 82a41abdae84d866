"""Tokens, tenants and limits through the real command line: ``python -m
korg_bridge BINARY --http 127.0.0.1:0 --token-file FILE …`` in its own
process, driven over loopback by the SDK's client and raw requests, signalled
like an operator would (SIGHUP to reload, SIGTERM to stop)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.abc import Process
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from korg_bridge.cli import build_parser
from korg_bridge.ledger.chain import verify_file
from tests.helpers.bridge_client import INITIALIZE, run_cli
from tests.helpers.cli import python_env, recall_script
from tests.helpers.paths import FIXTURE_BINS, REPO
from tests.serving.test_http import JSON_HEADERS, URL_PATTERN

THUMP = FIXTURE_BINS / "thump"
BOUND = 60.0
"""Seconds any one wait here may take before the test fails instead of hanging."""

ANA = "tok-ana-7Hq2vX9pLm3Rk8Wz"
BOB = "tok-bob-Qw3Er4Ty5Ui6Op7A"
NEW = "tok-new-Lk9Jh8Gf7Ds6Aa5S"
ENV_TOKEN = "tok-env-Pp0Oo9Ii8Uu7Yy6T"
TOKENS = (ANA, BOB, NEW, ENV_TOKEN)


def token_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    path.chmod(0o600)
    return path


class Served:
    """A bridge process serving HTTP, its URL, and everything it wrote to stderr."""

    def __init__(self, process: Process, url: str, stderr: list[bytes]) -> None:
        self.process, self.url, self._stderr = process, url, stderr

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def log(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    async def wait_for_log(self, phrase: str) -> None:
        with anyio.fail_after(BOUND):
            while phrase not in self.log():
                await anyio.sleep(0.02)


@asynccontextmanager
async def bridge_cli(args: Sequence[str], env: dict[str, str] | None = None) -> AsyncIterator[Served]:
    """``python -m korg_bridge ARGS --http 127.0.0.1:0``, once it listens; stopped with SIGTERM after."""
    argv = [sys.executable, "-m", "korg_bridge", *args, "--http", "127.0.0.1:0"]
    async with await anyio.open_process(argv, env=env or python_env(), stdin=subprocess.DEVNULL) as process:
        assert process.stderr is not None
        stderr: list[bytes] = []
        try:
            with anyio.fail_after(BOUND):
                while not (found := URL_PATTERN.search(b"".join(stderr).decode(errors="replace"))):
                    stderr.append(await process.stderr.receive())
            async with anyio.create_task_group() as tg:
                tg.start_soon(_collect, process, stderr)
                yield Served(process, found.group(), stderr)
                process.send_signal(signal.SIGTERM)
                with anyio.fail_after(BOUND):
                    assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
    log = b"".join(stderr).decode(errors="replace")
    for token in TOKENS:
        assert token not in log, "a token reached the log"


async def _collect(process: Process, into: list[bytes]) -> None:
    assert process.stderr is not None
    async for chunk in process.stderr:
        into.append(chunk)


async def env_value(base: str, token: str, name: str) -> str | None:
    """``thump env --name NAME`` called with ``token``: what that call's process saw."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("thump_env", {"name": name})
    value: str | None = json.loads(result.content[0].text)["value"]  # type: ignore[union-attr]
    return value


async def status(base: str, token: str) -> int:
    async with httpx2.AsyncClient() as http:
        headers = {**JSON_HEADERS, "Authorization": f"Bearer {token}"}
        return (await http.post(f"{base}/mcp", json=INITIALIZE, headers=headers)).status_code


@pytest.mark.anyio
async def test_two_tokens_are_two_tenants_and_sighup_reloads_the_file_without_a_restart(
    tmp_path: Path,
) -> None:
    tokens = token_file(tmp_path, f"# team bridge\n{ANA} acme ana\n{BOB} globex ci\n")
    ledger = tmp_path / "audit.jsonl"
    env = python_env() | {"KORG_BRIDGE_TENANT": "stale", "KORG_BRIDGE_TOKEN": ENV_TOKEN}
    args = [str(THUMP), "--token-file", str(tokens), "--audit", str(ledger), "--debug"]
    async with bridge_cli(args, env) as served:
        assert "bearer token required: 2 tokens, 2 tenants" in served.log()
        base = served.base
        assert await env_value(base, ANA, "KORG_BRIDGE_TENANT") == "acme"
        assert await env_value(base, BOB, "KORG_BRIDGE_TENANT") == "globex"
        assert await env_value(base, BOB, "KORG_BRIDGE_ACTOR") == "ci"
        assert await env_value(base, ANA, "KORG_BRIDGE_TOKEN") is None
        assert await status(base, ENV_TOKEN) == 401  # the file wins over the variable

        tokens.write_text(f"{ANA} acme ana\n{NEW} initech\n")
        served.process.send_signal(signal.SIGHUP)
        await served.wait_for_log("SIGHUP: reloaded")
        assert [await status(base, t) for t in (ANA, BOB, NEW)] == [200, 401, 200]
        assert await env_value(base, NEW, "KORG_BRIDGE_TENANT") == "initech"

        tokens.write_text(f"{ANA} acme ana\n{NEW} initech\n{BOB} a/b\n")
        served.process.send_signal(signal.SIGHUP)
        await served.wait_for_log("SIGHUP: keeping")
        assert [await status(base, t) for t in (ANA, BOB, NEW)] == [200, 401, 200]
    refusal = next(line for line in served.log().splitlines() if "SIGHUP: keeping" in line)
    assert refusal.endswith(
        f"token file {tokens}, line 3: the tenant (field 2) must be 1-64 letters, "
        "digits, '.', '_' or '-', starting with a letter or digit."
    )
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [(e["tenant"], e["actor"]) for e in events if "actor" in e] == [
        ("acme", "ana"),
        ("globex", "ci"),
        ("globex", "ci"),
        ("acme", "ana"),
    ]
    assert events[-1] == {**events[-1], "tenant": "initech"} and "actor" not in events[-1]
    assert verify_file(ledger).intact
    verify = subprocess.run(
        [
            sys.executable,
            "-c",
            "from korg_bridge.recall.cli.app import main; raise SystemExit(main())",
            "verify",
            "--path",
            str(ledger),
        ],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=BOUND,
        stdin=subprocess.DEVNULL,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert not any(token in ledger.read_text() for token in TOKENS)


@pytest.mark.anyio
async def test_the_cli_answers_429_with_retry_after_beyond_the_rate_limit(tmp_path: Path) -> None:
    tokens = token_file(tmp_path, f"{ANA} acme\n{BOB} globex\n")
    args = [str(THUMP), "--token-file", str(tokens), "--rate-limit", "3/m", "--max-calls-per-token", "2"]
    async with bridge_cli(args) as served, httpx2.AsyncClient(base_url=served.base) as http:
        assert "rate limit 3/m per token" in served.log()
        headers = {**JSON_HEADERS, "Authorization": f"Bearer {ANA}"}
        codes = [(await http.post("/mcp", json=INITIALIZE, headers=headers)).status_code for _ in range(4)]
        refused = await http.post("/mcp", json=INITIALIZE, headers=headers)
        other = await http.post(
            "/mcp", json=INITIALIZE, headers={**headers, "Authorization": f"Bearer {BOB}"}
        )
        health = await http.get("/healthz")
    assert codes == [200, 200, 200, 200]  # the burst: a session's start, more than 3
    assert refused.status_code == 429 and refused.headers["retry-after"] == "20"
    assert "over its rate limit of 3 requests per minute" in refused.json()["error"]["message"]
    assert other.status_code == 200 and health.status_code == 200
    assert "answering 429 to tenant acme" in served.log()


@pytest.mark.anyio
async def test_korg_recall_writes_each_memory_as_the_actor_of_its_token(tmp_path: Path) -> None:
    """The bridge half of "two tokens, two tenants" with korg-recall itself: the actor
    reaches what it writes. (Keeping tenants' memories apart is the Postgres store's.)"""
    korg_recall = str(recall_script())
    tokens = token_file(tmp_path, f"{ANA} acme ana@example.com\n{BOB} globex ci:nightly\n")
    env = python_env() | {"XDG_DATA_HOME": str(tmp_path / "data"), "KORG_BRIDGE_ACTOR": "stale"}
    args = [korg_recall, "--token-file", str(tokens), "--allow", "fs_write"]
    written: dict[str, str] = {}
    async with bridge_cli(args, env) as served:
        for token, fact in ((ANA, "acme deploys on Tuesdays"), (BOB, "globex pins node 22")):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(served.url, http_client=http)) as client,
            ):
                result = await client.call_tool(
                    "korg-recall_remember", {"content": fact, "type": "project", "scope": "user"}
                )
                assert not result.is_error, result
                memory_id = json.loads(result.content[0].text)["id"]  # type: ignore[union-attr]
                shown = await client.call_tool("korg-recall_memories", {"ids": [memory_id]})
                written[fact] = json.loads(shown.content[0].text)["memories"][0]["actor"]  # type: ignore[union-attr]
    assert written == {"acme deploys on Tuesdays": "ana@example.com", "globex pins node 22": "ci:nightly"}


# --- refused before anything runs (and by --list-tools alike) ----------------------------


@pytest.mark.parametrize("list_tools", [[], ["--list-tools"]])
def test_a_malformed_token_file_is_one_line_naming_the_line_and_never_the_token(
    tmp_path: Path, list_tools: list[str]
) -> None:
    tokens = token_file(tmp_path, f"{ANA} acme\n{ANA} globex\n")
    result = run_cli([str(THUMP), "--http", "127.0.0.1:0", "--token-file", str(tokens), *list_tools])
    assert result.returncode == 3
    assert result.stderr == (
        f"korg-bridge: error: token file {tokens}, line 2: the token of line 1 again. "
        "Give every caller a token of its own.\n"
    )
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        (
            ["--http", "0", "--rate-limit", "fast"],
            'expected N/s, N/m or N/h with N a whole number >= 1, e.g. 10/s, got "fast"',
        ),
        (["--http", "0", "--max-calls-per-token", "0"], 'must be at least 1, got "0"'),
        (["--rate-limit", "5/s"], "--rate-limit only apply to --http"),
        (["--max-calls-per-token", "2", "--list-tools"], "--max-calls-per-token only apply to --http"),
    ],
)
def test_limit_flags_are_checked_like_the_other_http_flags(flags: list[str], phrase: str) -> None:
    result = run_cli([str(THUMP), *flags])
    assert result.returncode == 2
    assert phrase in result.stderr and result.stderr.count("\n") == 1


def test_list_tools_accepts_a_good_token_file_and_limits(tmp_path: Path) -> None:
    tokens = token_file(tmp_path, f"{ANA} acme ana\n")
    result = run_cli(
        [str(THUMP), "--http", "0", "--token-file", str(tokens), "--rate-limit", "10/s", "--list-tools"]
    )
    assert result.returncode == 0, result.stderr
    assert "thump_say" in result.stdout


def test_every_flag_of_korg_bridge_has_a_row_in_the_cli_reference() -> None:
    readme = (REPO / "docs" / "cli.md").read_text()
    flags = [flag for action in build_parser()._actions for flag in action.option_strings]
    missing = [
        flag for flag in flags if flag.startswith("--") and flag != "--help" and f"`{flag}" not in readme
    ]
    assert not missing, f"flags without a row in docs/cli.md: {missing}"
