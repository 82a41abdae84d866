"""With an engine running, every korg-recall call prints the same bytes, the same stderr and exits
with the same code as a fresh process; the engine's calls are as fresh as a fresh process's; and
the front half imports only the standard library."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.engine import Running, korg_recall
from tests.recall.engine.conftest import BOUND, answered, append, event, off, run

READS: list[list[str]] = [
    ["recall", "--query", "deploy"],
    ["recall", "--query", "walrus", "--json"],
    ["recall", "--query", "deploy", "--mode", "hybrid", "--json"],
    ["recall", "--query", "blue green", "--kinds", "memory"],
    ["show", "e1", "--context", "1"],
    ["memories"],
    ["memories", "--query", "deploy"],
    ["context"],
    ["hooks", "status"],
    ["index", "--no-embed"],
    ["--introspect"],
    ["--version"],
    ["--help"],
    ["recall", "--help"],
    [],
    ["recall"],
    ["nonsense"],
    ["recall", "--query", "x", "--top-n", "zz"],
    ["show", "e999999"],
    ["memories", "--scope", "nowhere:at-all"],
    ["verify", "--path", "/nonexistent/ledger.jsonl"],
    ["--debug", "recall", "--query", "deploy"],
]
"""Reads and mistakes: each answer must be byte-identical both ways."""
TIMING = re.compile(r'"duration_s": [0-9.e-]+')
"""A figure that differs between any two runs, engine or not."""
ID = re.compile(r'"id": "[^"]+"|\bm[0-9a-z]{10}\b')


def both(env: Mapping[str, str], cwd: Path, *args: str) -> tuple[Any, Any]:
    """(without an engine, with it): each the exit code, stdout and stderr."""
    alone = run(off(env), *args, cwd=cwd)
    served = run(env, *args, cwd=cwd)
    return (
        (alone.returncode, TIMING.sub("T", alone.stdout), alone.stderr),
        (served.returncode, TIMING.sub("T", served.stdout), served.stderr),
    )


def test_every_read_and_every_mistake_answers_byte_identically_with_an_engine(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    assert answered(env, project)
    made = run(env, "remember", "--content", "the deploy uses blue green", "--type", "project", cwd=project)
    assert made.returncode == 0, made.stderr
    for args in READS:
        alone, served = both(env, project, *args)
        assert served == alone, args


def test_a_bad_switch_fails_the_same_way_with_an_engine(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    bad = {**env, "KORG_RECALL_ALLOW_SECRETS": "maybe"}
    alone, served = both(bad, project, "recall", "--query", "deploy")
    assert served == alone
    assert served[0] == 3 and "KORG_RECALL_ALLOW_SECRETS='maybe'" in served[2]


def test_writes_answer_alike_and_land_once_with_an_engine(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    def masked(done: subprocess.CompletedProcess[str]) -> tuple[int, str, str]:
        return done.returncode, ID.sub("ID", done.stdout), done.stderr

    first = run(off(env), "remember", "--content", "tabs over spaces here", "--type", "user", cwd=project)
    second = run(env, "remember", "--content", "the build runs on fridays", "--type", "user", cwd=project)
    assert masked(first)[0] == masked(second)[0] == 0, (first.stderr, second.stderr)
    assert json.loads(first.stdout).keys() == json.loads(second.stdout).keys()
    ident = json.loads(second.stdout)["id"]
    revised = [
        run(environment, "revise", "--id", ident, "--content", f"the build runs on {day}", cwd=project)
        for environment, day in ((env, "mondays"), (off(env), "tuesdays"))
    ]
    assert [done.returncode for done in revised] == [0, 0], [done.stderr for done in revised]
    listed = json.loads(run(env, "memories", "--json", cwd=project).stdout)
    texts = sorted(line["text"] if "text" in line else json.dumps(line) for line in listed["lines"])
    assert len(listed["lines"]) == 2, texts
    assert any("tuesdays" in text for text in texts) and any("tabs" in text for text in texts)


def test_a_line_appended_a_moment_ago_is_found_through_the_engine(
    engine: Running, env: dict[str, str], ledger: Path, project: Path
) -> None:
    before = run(env, "recall", "--query", "narwhal", "--json", cwd=project)
    assert json.loads(before.stdout)["hits"] == []
    append(ledger, event(4, "echo narwhal", "the narwhal surfaced"))
    after = run(env, "recall", "--query", "narwhal", "--json", cwd=project)
    assert [hit["seq"] for hit in json.loads(after.stdout)["hits"]] == [4]
    assert answered(env, project)


def test_a_revise_made_by_another_process_is_seen_by_the_next_engine_call(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    made = run(env, "remember", "--content", "lint with ruff", "--type", "user", cwd=project)
    ident = json.loads(made.stdout)["id"]
    done = run(off(env), "revise", "--id", ident, "--content", "lint with ruff and mypy", cwd=project)
    assert done.returncode == 0, done.stderr
    seen = run(env, "memories", "--json", cwd=project)
    assert "mypy" in seen.stdout


def test_stats_says_whether_an_engine_answered(engine: Running, env: dict[str, str], project: Path) -> None:
    served = json.loads(run(env, "stats", "--json", cwd=project).stdout)["engine"]
    alone = json.loads(run(off(env), "stats", "--json", cwd=project).stdout)["engine"]
    assert {key: served[key] for key in ("answered", "pid")} == {"answered": True, "pid": engine.pid}
    assert served["mirror_watch"]["watching"] is True
    assert alone == {"answered": False}


ALLOWED = {
    "korg_bridge",
    "korg_bridge._version",
    "korg_bridge.config",
    "korg_bridge.errors",
    "korg_bridge.recall",
    "korg_bridge.recall.paths",
    "korg_bridge.recall.engine",
    "korg_bridge.recall.engine.front",
    "korg_bridge.recall.engine.protocol",
}
"""The package's modules the front half may import: its own, and the one path resolver's."""


def test_the_front_half_imports_only_the_standard_library_when_an_engine_answers(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    script = korg_recall()
    assert len(script) == 1, "the console script is installed"

    def imports(*argv: str) -> list[str]:
        """What sys.modules holds when the script ``argv`` exits (written at exit, as the script ends)."""
        out = project / "modules.json"
        code = (
            "import atexit, json, os, runpy, sys\n"
            f"dump = lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules)))\n"
            "atexit.register(dump)\n"
            "leave = os._exit\n"
            "os._exit = lambda code: (dump(), leave(code))  # the front leaves this way once answered\n"
            "sys.argv = sys.argv[1:]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=project,
            timeout=BOUND,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        names: list[str] = json.loads(out.read_text(encoding="utf-8"))
        return names

    empty = project / "empty.py"
    empty.write_text("", encoding="utf-8")
    at_startup = set(imports(str(empty)))  # site's .pth files, sitecustomize, runpy: not the front's
    imported = imports(script[0], "memories", "--json")
    foreign = sorted(
        name
        for name in set(imported) - at_startup
        if name.split(".")[0] not in sys.stdlib_module_names and name not in ALLOWED
    )
    assert foreign == []
    assert "korg_bridge.recall.engine.front" in imported
    # What made the front slow before: none of it on this path (docs/engine.md).
    heavy = {"pathlib", "json", "socket", "signal", "enum", "re", "typing", "dataclasses", "struct"}
    assert sorted(heavy & (set(imported) - at_startup)) == []


@pytest.mark.parametrize("mode", ["on", "auto", "ON", "yes"])
def test_a_bad_engine_mode_is_a_config_error_naming_the_choices(
    mode: str, env: dict[str, str], project: Path
) -> None:
    done = run({**env, "KORG_RECALL_ENGINE": mode + "x"}, "memories", cwd=project)
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr.startswith("korg-recall: error: KORG_RECALL_ENGINE=")
    assert "off (never use an engine), on" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_person_at_a_terminal_sees_the_same_screen_with_an_engine(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    from tests.helpers.terminal import run_on_terminal

    made = run(env, "remember", "--content", "the deploy uses blue green", "--type", "user", cwd=project)
    assert made.returncode == 0, made.stderr
    screens = []
    for environment in (off(env), env):
        for args in (["memories"], ["hooks", "status"], ["recall", "--query", "deploy"]):
            session = run_on_terminal(
                [*korg_recall(), *args], env=environment, cwd=project, stderr_apart=True, timeout=BOUND
            )
            screens.append((session.code, session.screen, session.stderr))
    half = len(screens) // 2
    assert screens[half:] == screens[:half]
