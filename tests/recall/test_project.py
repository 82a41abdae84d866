"""Projects: the canonical git root of a session's cwd, and the ``project`` filter and context of hits."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.cli.app import main
from korg_bridge.recall.project import ProjectCache, project_root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a linked worktree and a submodule, laid out as git lays them out."""
    main_tree = tmp_path / "repo"
    (main_tree / ".git" / "worktrees" / "feature").mkdir(parents=True)
    (main_tree / "src" / "deep").mkdir(parents=True)
    worktree = tmp_path / "wt-feature"
    (worktree / "src").mkdir(parents=True)
    (worktree / ".git").write_text(f"gitdir: {main_tree / '.git' / 'worktrees' / 'feature'}\n")
    (main_tree / ".git" / "worktrees" / "feature" / "commondir").write_text("../..\n")
    module = main_tree / "vendor" / "lib"
    (main_tree / ".git" / "modules" / "lib").mkdir(parents=True)
    module.mkdir(parents=True)
    (module / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    return main_tree


def test_a_folder_inside_a_repository_belongs_to_its_root(repo: Path) -> None:
    assert project_root(str(repo / "src" / "deep")) == str(repo)
    assert project_root(str(repo)) == str(repo)


def test_every_worktree_of_a_repository_is_the_one_project(repo: Path, tmp_path: Path) -> None:
    assert project_root(str(tmp_path / "wt-feature" / "src")) == str(repo)


def test_a_submodule_is_its_own_project(repo: Path) -> None:
    assert project_root(str(repo / "vendor" / "lib")) == str(repo / "vendor" / "lib")


def test_a_symlinked_path_is_canonical(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(repo / "src", target_is_directory=True)
    assert project_root(str(tmp_path / "link")) == str(repo)


def test_a_path_missing_here_or_outside_any_repository_is_its_own_project(tmp_path: Path) -> None:
    assert project_root("/Users/someone/elsewhere/app/") == "/Users/someone/elsewhere/app"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert project_root(str(plain)) == str(plain.resolve())


def test_lookups_are_remembered_for_one_refresh(repo: Path) -> None:
    cache = ProjectCache()
    assert cache(str(repo / "src")) == str(repo)
    (repo / ".git").rename(repo / ".git-moved")
    assert cache(str(repo / "src")) == str(repo)  # the same refresh: not looked up again
    assert ProjectCache()(str(repo / "src")) == str(repo / "src")
    assert cache(None) is None


# --- through korg-recall -----------------------------------------------------------------------------

LINE = re.compile(
    r"^  · seq=\d+ score=\d\.\d\d agent=\S+ tool=\S+ ref=e\d+(?P<context>.*?) :: (?P<snippet>.*)$"
)


def transcript_line(cwd: str, text: str, **more: Any) -> str:
    record = {
        "type": "user",
        "sessionId": "5e55-1011",
        "cwd": cwd,
        "gitBranch": "feature/x",
        "message": {"role": "user", "content": text},
        **more,
    }
    return json.dumps(record) + "\n"


@pytest.fixture
def history(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ledgers = tmp_path / "history"
    ledgers.mkdir()
    (ledgers / "a.jsonl").write_text(
        transcript_line(str(tmp_path / "wt-feature" / "src"), "tune the parser cache")
        + transcript_line("/elsewhere/other app", "tune the other parser")
    )
    (ledgers / "agent-1.jsonl").write_text(
        transcript_line(str(repo), "tune as the parent asked", isSidechain=True, agentId="ab12")
    )
    monkeypatch.setenv("KORG_RECALL_INDEX", str(tmp_path / "index.sqlite"))
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    return ledgers


def recall(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["recall", "--mode", "keyword", *args]) == 0
    return capsys.readouterr().out


def test_the_project_flag_keeps_the_events_of_that_repository_and_its_worktrees(
    history: Path, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = recall(
        capsys, "--ledger", str(history), "--query", "tune parser", "--json", "--project", str(repo / "src")
    )
    found = json.loads(out)["hits"]
    assert sorted(hit["snippet"] for hit in found) == ["tune as the parent asked", "tune the parser cache"]
    assert {hit["project"] for hit in found} == {str(repo)}
    everywhere = json.loads(recall(capsys, "--ledger", str(history), "--query", "tune parser", "--json"))[
        "hits"
    ]
    assert len(everywhere) == 3


def test_hit_lines_carry_project_cwd_branch_and_sub_agent_after_the_ref(
    history: Path, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = recall(capsys, "--ledger", str(history), "--query", "tune")
    lines = {match["snippet"]: match["context"] for match in map(LINE.match, out.splitlines()[1:]) if match}
    cwd = tmp_path / "wt-feature" / "src"
    assert lines["tune the parser cache"] == f" project={repo} cwd={cwd} branch=feature/x"
    assert lines["tune the other parser"] == ' project="/elsewhere/other app" branch=feature/x'
    assert (
        lines["tune as the parent asked"] == f" project={repo} branch=feature/x subagent=ab12 sidechain=true"
    )


def test_json_hits_carry_every_context_field(
    history: Path, repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = recall(capsys, "--ledger", str(history), "--query", "parent asked", "--json", "--top-n", "1")
    [hit] = json.loads(out)["hits"]
    assert {
        key: hit[key] for key in ("project", "cwd", "git_branch", "subagent", "sidechain", "meta", "gone")
    } == {
        "project": str(repo),
        "cwd": str(repo),
        "git_branch": "feature/x",
        "subagent": "ab12",
        "sidechain": True,
        "meta": False,
        "gone": False,
    }
    assert hit["tool"] == "subagent_prompt"  # written by the parent agent, not typed


def test_a_project_given_as_a_relative_path_is_taken_from_the_working_directory(
    history: Path, repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo / "src" / "deep")
    out = recall(capsys, "--ledger", str(history), "--query", "tune", "--json", "--project", ".")
    assert {hit["project"] for hit in json.loads(out)["hits"]} == {str(repo)}
    assert os.getcwd() == str(repo / "src" / "deep")
