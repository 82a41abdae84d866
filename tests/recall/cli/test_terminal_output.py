"""korg-recall for people: text on a terminal, today's JSON through a pipe or with --json, nothing a
stored string could make the terminal do, and a ``stats`` that stays a summary.

Terminal behaviour needs a real terminal: each such run gets a pty as its stdin and stdout
(``_terminal.run_on_terminal``); everything else is a real process with pipes, or the real bridge.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.cli.app import kit
from korg_bridge.recall.history.stats import GROUPS_SHOWN
from tests.helpers.bridge_client import Bridge, open_bridge, text_of
from tests.helpers.cli import korg_recall, python_env, recall_script, run_recall
from tests.helpers.terminal import run_on_terminal

BOUND = 120.0
STATS_BOUND = 40_000
"""Characters ``stats`` may take on a big history, whoever reads it (the issue's bound)."""
SESSIONS = 1_200


def _piped(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_recall(*args, base=python_env(), env=env, cwd=cwd, timeout=BOUND)


def _on_terminal(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    session = run_on_terminal(
        [*korg_recall(), *args],
        env={**python_env(), **(env or {})},
        cwd=cwd,
        stderr_apart=True,
        timeout=BOUND,
    )
    return session.code, session.screen, session.stderr


def _remember(cwd: Path, text: str) -> str:
    made = _piped(cwd, "remember", "--content", text, "--type", "project", "--scope", "user")
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["id"])


def _ledger(path: Path, command: str = "make test") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    event = {
        "seq": 1,
        "source_agent": "agent:test",
        "tool_name": "Bash",
        "args": {"command": command},
        "result": {"output": "ok"},
        "success": True,
    }
    path.write_text(json.dumps(event) + "\n", encoding="utf-8")
    return path


# --- every person's command: text on a terminal, JSON otherwise ---------------------------------------

Setup = Callable[[Path], list[str]]


def _memories(tmp: Path) -> list[str]:
    _remember(tmp, "Run make db before the tests.")
    return ["memories", "--scope", "user"]


def _remember_args(tmp: Path) -> list[str]:
    return ["remember", "--content", f"The API listens on port {len(str(tmp)) + 8000}.", "--type", "note"]


def _revise(tmp: Path) -> list[str]:
    return [
        "revise",
        "--id",
        _remember(tmp, "The API listens on port 8080."),
        "--old-text",
        "8080",
        "--new-text",
        "9090",
    ]


def _forget(tmp: Path) -> list[str]:
    return ["forget", "--id", _remember(tmp, "The cache lives in /var/cache/app.")]


def _index(tmp: Path) -> list[str]:
    return ["index", "--ledger", str(_ledger(tmp / "ledgers" / "s.jsonl"))]


def _stats(tmp: Path) -> list[str]:
    _remember(tmp, "Releases go out on Tuesdays.")
    return ["stats"]


def _hooks(tmp: Path) -> list[str]:
    return ["hooks", "status"]


def _export(tmp: Path) -> list[str]:
    _remember(tmp, "Releases go out on Tuesdays.")
    return ["export", "--output", str(tmp / f"export-{len(list(tmp.iterdir()))}.jsonl")]


COMMANDS: dict[str, Setup] = {
    "memories": _memories,
    "remember": _remember_args,
    "revise": _revise,
    "forget": _forget,
    "index": _index,
    "stats": _stats,
    "hooks": _hooks,
    "export": _export,
}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder outside git (writes go to the user scope), its own index."""
    (tmp_path / "work").mkdir()
    monkeypatch.setenv("KORG_RECALL_INDEX", str(tmp_path / "index.sqlite"))
    return tmp_path / "work"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_on_a_terminal_the_answer_is_text_and_piped_it_is_json(name: str, world: Path) -> None:
    code, screen, err = _on_terminal(world, *COMMANDS[name](world))
    assert code == 0, screen + err
    assert screen.strip() and not screen.lstrip().startswith(("{", "[")), screen
    with pytest.raises(json.JSONDecodeError):
        json.loads(screen)
    piped = _piped(world, *COMMANDS[name](world))
    assert piped.returncode == 0, piped.stderr
    assert isinstance(json.loads(piped.stdout), dict)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_json_on_a_terminal_is_the_json_a_pipe_gets(name: str, world: Path) -> None:
    code, screen, err = _on_terminal(world, *COMMANDS[name](world), "--json")
    assert code == 0, screen + err
    shown = json.loads(screen)
    piped = json.loads(_piped(world, *COMMANDS[name](world), "--json").stdout)
    assert isinstance(shown, dict) and set(shown) == set(piped)


def test_memories_on_a_terminal_show_one_memory_a_line(world: Path) -> None:
    ids = [_remember(world, text) for text in ("Run make db before the tests.", "Deploys need the VPN.")]
    code, screen, _ = _on_terminal(world, "memories", "--scope", "user")
    assert code == 0
    lines = screen.strip().split("\n")
    assert lines[0] == "2 memories in user:"
    assert sorted(line.split()[0] for line in lines[1:]) == sorted(ids)
    assert "Run make db before the tests." in screen and "Deploys need the VPN." in screen


def test_the_flag_json_is_for_the_command_line_only(world: Path) -> None:
    """The bridge's child writes to a pipe and always gets JSON: no tool schema offers a flag that
    would change nothing there (recall's own json property is what recall declares)."""
    for entry in kit.document()["callables"]:
        if entry["command_id"] != "korg-recall.recall":
            assert "json" not in entry["input_schema"].get("properties", {}), entry["command_id"]


def test_export_to_a_terminal_says_where_to_send_it_instead_of_filling_the_screen(world: Path) -> None:
    _remember(world, "Releases go out on Tuesdays.")
    code, screen, err = _on_terminal(world, "export")
    assert code == 2 and screen == ""
    assert err.startswith("korg-recall: error: export writes JSONL") and "--output FILE" in err
    code, screen, _ = _on_terminal(world, "export", "--json")
    assert code == 0
    assert json.loads(screen.split("\n")[0])["format"] == "korg-recall-memory@v1"


def test_export_into_a_pipe_its_reader_closes_early_ends_quietly(world: Path, tmp_path: Path) -> None:
    """``korg-recall export | head -1``: no traceback from the read still under way."""
    entities = tmp_path / "memory.jsonl"  # the MCP memory server's format: 300 memories, ~200 KB exported
    entities.write_text(
        "".join(
            json.dumps({"type": "entity", "name": f"service-{n}", "entityType": "service",
                        "observations": [f"service {n} listens on port {8000 + n} and feeds billing queue {n}. " * 3]})
            + "\n"
            for n in range(300)
        ),
        encoding="utf-8",
    )  # fmt: skip
    assert _piped(world, "import", str(entities)).returncode == 0
    proc = subprocess.Popen(
        [*korg_recall(), "export"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=python_env(),
        cwd=world,
    )
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["versions"] == 300
    proc.stdout.close()  # the reader is gone, as `head -1` goes
    _, err = proc.communicate(timeout=BOUND)
    assert (proc.returncode, err) == (0, b"")


# --- stored text cannot drive the terminal -------------------------------------------------------------

HOSTILE = "the build \x1b[2J\x1b]0;pwned\x07is green\x9b31m now\u202e!dlrow"


def test_control_characters_in_a_memory_never_reach_the_terminal(world: Path) -> None:
    memory = _remember(world, HOSTILE)
    for argv in (
        ["memories", "--scope", "user"],
        ["memories", "--ids", memory],
        ["recall", "--query", "build"],
    ):
        code, screen, err = _on_terminal(world, *argv, env={"KORG_RECALL_LEDGER": str(world / "none")})
        assert code == 0, err
        assert "the build" in screen and "is green" in screen, screen
        assert not any(char in screen for char in "\x1b\x07\x9b\u202e"), repr(screen)
    piped = _piped(world, "memories", "--ids", memory)
    assert json.loads(piped.stdout)["memories"][0]["body"].startswith("the build \x1b[2J")  # the data is kept


def test_control_characters_in_history_never_reach_the_terminal(world: Path) -> None:
    ledger = _ledger(world / "ledgers" / "s.jsonl", command="echo \x1b[2Jcleared\x07 && make build")
    code, screen, err = _on_terminal(world, "recall", "--query", "make build", "--ledger", str(ledger.parent))
    assert code == 0, err
    assert "make build" in screen and "cleared" in screen
    assert "\x1b" not in screen and "\x07" not in screen


# --- stats stays a summary ---------------------------------------------------------------------------


def _sessions(root: Path, count: int) -> Path:
    """``count`` Claude Code sessions over 40 projects: a prompt, a tool call, its result, a reply."""
    projects = root / "projects"
    for n in range(count):
        project = f"/home/dev/src/service-{n % 40:02d}"
        folder = projects / project.replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        session = f"{n:08x}-0000-4000-8000-{n:012x}"
        base = {"sessionId": session, "cwd": project, "timestamp": f"2026-04-{1 + n % 28:02d}T10:00:00Z"}
        lines = [
            {**base, "type": "user", "uuid": f"{n:08x}-0001-4000-8000-000000000001",
             "message": {"role": "user", "content": f"fix the flaky test number {n} in service {n % 40}"}},
            {**base, "type": "assistant", "uuid": f"{n:08x}-0002-4000-8000-000000000002",
             "message": {"role": "assistant", "content": [
                 {"type": "tool_use", "id": f"toolu_{n:020d}", "name": f"mcp__tool_{n % 60}",
                  "input": {"command": f"pytest tests/test_{n}.py"}}]}},
            {**base, "type": "user", "uuid": f"{n:08x}-0003-4000-8000-000000000003",
             "message": {"role": "user", "content": [
                 {"type": "tool_result", "tool_use_id": f"toolu_{n:020d}", "content": "1 passed"}]}},
            {**base, "type": "assistant", "uuid": f"{n:08x}-0004-4000-8000-000000000004",
             "message": {"role": "assistant", "content": [{"type": "text", "text": f"Fixed test {n}."}]}},
        ]  # fmt: skip
        (folder / f"{session}.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8"
        )
    return projects


@pytest.fixture(scope="module")
def big_history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("big-history")
    env = {
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "KORG_RECALL_LEDGER": str(_sessions(home, SESSIONS)),
        "KORG_RECALL_INDEX": str(home / "index.sqlite"),
        "KORG_RECALL_BACKGROUND": "0",
    }
    indexed = _piped(home, "index", "--no-embed", env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["files_scanned"] == SESSIONS
    return env


def test_stats_on_a_big_history_is_a_bounded_summary(big_history: dict[str, str], tmp_path: Path) -> None:
    piped = _piped(tmp_path, "stats", env=big_history)
    assert piped.returncode == 0, piped.stderr
    assert len(piped.stdout) < STATS_BOUND
    stats = json.loads(piped.stdout)
    assert stats["files"]["indexed"] == SESSIONS and len(stats["sources"]) <= 20
    assert stats["events"] == 3 * SESSIONS  # prompt, tool call with its result, reply
    assert sum(stats["by_agent"].values()) == stats["events"] and len(stats["by_agent"]) == GROUPS_SHOWN + 1
    code, screen, err = _on_terminal(tmp_path, "stats", env=big_history)
    assert code == 0, err
    assert len(screen) < STATS_BOUND


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def bridge(big_history: dict[str, str], tmp_path: Path) -> AsyncIterator[Bridge]:
    async with open_bridge(recall_script(), env=big_history, cwd=tmp_path) as running:
        yield running


@pytest.mark.anyio
async def test_stats_through_the_bridge_stays_under_the_bound(bridge: Bridge) -> None:
    result = await bridge.client.call_tool("korg-recall_stats", {})
    text: Any = text_of(result)
    assert not result.is_error, text
    assert len(text) < STATS_BOUND
    assert json.loads(text)["files"]["indexed"] == SESSIONS
