"""Messages that help: what korg-recall says when a person (or an agent) asks for something it cannot
do as asked. Real processes; a real terminal (a pty) where what a person sees differs."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import korg_recall, python_env, run_recall
from tests.helpers.models import needs_fastembed
from tests.helpers.terminal import CTRL_C, run_on_terminal

BOUND = 120.0
"""Seconds a korg-recall child may take: far above any of these."""


def _run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_recall(*args, base=python_env(), env=env, cwd=cwd, timeout=BOUND)


def _ledger(path: Path, events: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for seq in range(1, events + 1):
            event = {
                "seq": seq,
                "source_agent": "agent:test",
                "tool_name": "Bash",
                "args": {"command": f"make build step {seq} of the release alpha beta {seq % 97}"},
                "result": {"output": f"step {seq} done " * 4},
                "success": True,
            }
            out.write(json.dumps(event) + "\n")
    return path


def _transcript(path: Path, cwd: str, prompts: int = 3) -> Path:
    """A Claude Code session whose prompts ran in ``cwd``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {
            "type": "user",
            "sessionId": "5f0c2a52-7d1e-4a53-9a55-0d6b6f1f7a01",
            "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "timestamp": f"2026-05-01T09:0{n}:00Z",
            "cwd": cwd,
            "message": {"role": "user", "content": f"make build step {n} of the release"},
        }
        for n in range(1, prompts + 1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _one_error_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("korg-recall: error: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


# --- empty queries and projects that are not there ---------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\t"])
@pytest.mark.parametrize("kinds", [["memory", "history"], ["history"], ["memory"]])
def test_an_empty_or_blank_query_is_a_usage_error_not_no_matches(
    tmp_path: Path, query: str, kinds: list[str]
) -> None:
    ledger = _ledger(tmp_path / "l" / "s.jsonl", 3)
    kind_flags = [word for kind in kinds for word in ("--kinds", kind)]
    err = _one_error_line(_run(tmp_path, "recall", "--query", query, "--ledger", str(ledger), *kind_flags), 2)
    assert "query is empty" in err


def test_a_project_folder_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    ledger = _transcript(tmp_path / "l" / "s.jsonl", str(tmp_path))
    missing = tmp_path / "no-such-project"
    for kinds in (["--kinds", "history"], [], ["--kinds", "memory"]):
        err = _one_error_line(
            _run(
                tmp_path,
                "recall",
                "--query",
                "build",
                "--project",
                str(missing),
                "--ledger",
                str(ledger),
                *kinds,
            ),
            2,
        )
        assert f"--project {missing}: no such folder here" in err


def test_an_existing_project_without_matches_still_says_no_relevant_matches(tmp_path: Path) -> None:
    ledger = _transcript(tmp_path / "l" / "s.jsonl", str(tmp_path / "elsewhere"))
    (tmp_path / "here").mkdir()
    found = _run(
        tmp_path, "recall", "--query", "build", "--project", str(tmp_path / "here"), "--ledger", str(ledger),
        "--kinds", "history",
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    assert found.stdout.startswith("[recall · keyword] no relevant matches.\n")


def test_a_project_absent_here_but_recorded_in_sessions_is_searched(tmp_path: Path) -> None:
    """Transcripts copied from another machine keep that machine's folders."""
    elsewhere = "/home/someone-else/src/billing"
    ledger = _transcript(tmp_path / "l" / "s.jsonl", elsewhere)
    found = _run(
        tmp_path,
        "recall",
        "--query",
        "build",
        "--project",
        elsewhere,
        "--ledger",
        str(ledger),
        "--kinds",
        "history",
    )
    assert found.returncode == 0, found.stderr
    assert "3 match(es)" in found.stdout


# --- the network -------------------------------------------------------------------------------------


@needs_fastembed
def test_model_pull_without_network_exits_5_and_says_how_to_bring_a_model_folder(tmp_path: Path) -> None:
    unreachable = "http://127.0.0.1:9"  # the discard port, closed: every connection is refused at once
    env = {name: unreachable for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")}
    env.update(NO_PROXY="", no_proxy="", HF_HOME=str(tmp_path / "hf"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env["KORG_RECALL_MODEL_DIR"] = ""
    err = _one_error_line(_run(tmp_path, "model", "pull", env=env), 5)
    assert "no download source could be reached" in err
    assert "KORG_RECALL_MODEL_DIR" in err


# --- Ctrl-C ------------------------------------------------------------------------------------------


def test_ctrl_c_during_index_prints_one_line_and_the_next_run_resumes(tmp_path: Path) -> None:
    events = 60_000
    ledger = _ledger(tmp_path / "big" / "s.jsonl", events)
    env = {**python_env(), "KORG_RECALL_INDEX": str(tmp_path / "index.sqlite"), "KORG_RECALL_MODEL_DIR": ""}
    session = run_on_terminal(
        [*korg_recall(), "index", "--ledger", str(ledger.parent)],
        env=env,
        cwd=tmp_path,
        steps=[("indexing [", CTRL_C)],
        timeout=BOUND,
    )
    assert session.code == 6, session.screen
    said = [line for line in session.screen.split("\n") if "korg-recall" in line]
    assert said == [
        "korg-recall: interrupted: index stopped; what it indexed (and embedded) is kept, and the next run "
        "resumes where this one stopped."
    ], session.screen
    assert "Traceback" not in session.screen
    again = _run(tmp_path, "index", "--ledger", str(ledger.parent), env=env)
    assert again.returncode == 0, again.stderr
    assert 0 < json.loads(again.stdout)["events_added"] < events  # resumed, not started over
    stats = _run(tmp_path, "stats", env=env)
    assert json.loads(stats.stdout)["events"] == events


# --- confirm mode: the person at the terminal confirms there -----------------------------------------


def _remember(cwd: Path, text: str) -> str:
    made = _run(cwd, "remember", "--content", text, "--type", "note", "--scope", "user")
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["id"])


def _live_ids(cwd: Path) -> list[str]:
    listed = _run(cwd, "memories", "--scope", "user")
    assert listed.returncode == 0, listed.stderr
    return [line.split()[0] for line in json.loads(listed.stdout)["lines"]]


def test_confirm_mode_tells_an_agent_a_command_that_works_at_a_terminal(tmp_path: Path) -> None:
    memory = _remember(tmp_path, "The staging database is reset every Sunday night.")
    held = {"KORG_RECALL_WRITES": "confirm", "KORG_RECALL_ACTOR": "alice"}
    err = _one_error_line(_run(tmp_path, "forget", "--id", memory, env=held), 3)
    named = re.search(r"`(korg-recall forget [^`]+)`", err)
    assert named is not None, err
    argv = shlex.split(named.group(1))[1:]
    session = run_on_terminal(
        [*korg_recall(), *argv],
        env={**python_env(), **held},
        cwd=tmp_path,
        steps=[("[y/N]", b"y\n")],
        timeout=BOUND,
    )
    assert session.code == 0, session.screen
    assert "holds what alice writes for a person's approval" in session.screen
    assert f"retired: {memory}" in session.screen
    assert memory not in _live_ids(tmp_path)


def test_confirm_mode_at_a_terminal_changes_nothing_on_no(tmp_path: Path) -> None:
    memory = _remember(tmp_path, "The staging database is reset every Sunday night.")
    held = {**python_env(), "KORG_RECALL_WRITES": "confirm", "KORG_RECALL_ACTOR": "alice"}
    session = run_on_terminal(
        [*korg_recall(), "forget", "--id", memory], env=held, cwd=tmp_path, steps=[("[y/N]", b"n\n")]
    )
    assert session.code == 0, session.screen
    assert "cancelled: nothing changed." in session.screen
    assert memory in _live_ids(tmp_path)


@pytest.mark.parametrize(("answer", "forgotten"), [(b"y\n", True), (b"\n", False)])
def test_forget_by_query_at_a_terminal_shows_the_matches_and_asks_once(
    tmp_path: Path, answer: bytes, forgotten: bool
) -> None:
    first = _remember(tmp_path, "Deploys to staging need the VPN.")
    second = _remember(tmp_path, "Deploys to production need two approvals.")
    keep = _remember(tmp_path, "The logo is teal.")
    session = run_on_terminal(
        [*korg_recall(), "forget", "--query", "deploys need"],
        env=python_env(),
        cwd=tmp_path,
        steps=[("[y/N]", answer)],
    )
    assert session.code == 0, session.screen
    assert "Retire these 2 memories? [y/N]" in session.screen
    assert first in session.screen and second in session.screen and "--confirm" not in session.screen
    live = _live_ids(tmp_path)
    assert (first not in live and second not in live) is forgotten
    assert keep in live
