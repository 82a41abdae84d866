"""Claude Code's memory folder and the session-start brief on both backends: one person's SQLite
store takes the folder in; a team's store never does (it is not one person's files), and the brief
reads either store alike."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.cli import answer, call_recall


def _topic_file(config: Path, project: Path) -> None:
    folder = config / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(project)) / "memory"  # Claude Code's slug
    folder.mkdir(parents=True)
    (folder / "project_freeze.md").write_text(
        "---\nname: Release freeze\ndescription: Merges wait until March\ntype: project\n---\nOnly fixes.\n"
    )


def test_claudes_memory_folder_is_read_into_one_persons_store_only(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    backend: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    _topic_file(config, project.resolve())
    mine = str(
        answer(capsys, "remember", "--content", "Deploys need two approvals.", "--type", "feedback")["id"]
    )
    listed = answer(capsys, "memories", "--budget-tokens", "5000")
    titles = " ".join(listed["lines"])
    assert mine in titles
    assert ("Release freeze" in titles) == (backend == "sqlite")
    stats = answer(capsys, "memories", "--stats")
    assert ("claude" in stats) == (backend == "sqlite")
    code, brief, err = call_recall(capsys, "context")
    assert code == 0, err
    assert mine in brief and ("Release freeze" in brief) == (backend == "sqlite")
