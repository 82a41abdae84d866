"""Project memories find the same repository at another path; two machines pushing at once both get through."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.memory import git_repo, korg_recall
from tests.recall.sync.conftest import _machine
from tests.recall.sync.helpers import canonical


def _clone_of_app(path: Path) -> Path:
    repo = git_repo(path)
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + '[remote "origin"]\n\turl = https://github.com/ann/app.git\n')
    return repo


def test_a_project_memory_reaches_the_same_repository_cloned_at_another_path(
    tmp_path: Path, folder_remote: str
) -> None:
    a, b = _machine(tmp_path, "a"), _machine(tmp_path, "b")
    a.cwd = _clone_of_app(tmp_path / "a" / "src" / "app")
    b.cwd = _clone_of_app(tmp_path / "b" / "code" / "the-app")
    key = a.ok("sync", "init", "--remote", folder_remote)["join_key"]
    b.ok("sync", "init", "--remote", folder_remote, "--join", key)
    memory_id = a.ok("remember", "--content", "run the app with `make dev`", "--type", "project", "--json")[
        "id"
    ]
    a.sync()
    b.sync()
    listed = b.ok("memories", "--scope", "project", "--json")
    assert listed["total"] == 1 and memory_id in listed["lines"][0]
    read = b.ok("memories", "--ids", memory_id, "--scope", "project", "--json")["memories"][0]
    assert read["scope"] == f"project:{os.path.realpath(b.cwd)}"


def test_two_machines_syncing_at_the_same_moment_through_git_both_get_through(
    tmp_path: Path, bare_repo: str
) -> None:
    a, b = _machine(tmp_path, "a"), _machine(tmp_path, "b")
    key = a.ok("sync", "init", "--remote", bare_repo)["join_key"]
    b.ok("sync", "init", "--remote", bare_repo, "--join", key)
    for round_ in range(3):
        a.remember(f"fact {round_} told on a")
        b.remember(f"fact {round_} told on b")
        children = [
            subprocess.Popen(
                [*korg_recall(), "sync"],
                cwd=machine.cwd,
                env={**os.environ, **machine.env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for machine in (a, b)
        ]
        for child in children:
            _out, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
    for machine in (a, b, a):
        machine.sync()
    assert canonical(a.store) == canonical(b.store)
    assert len(canonical(a.store)) == 6
