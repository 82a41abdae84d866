"""``project_root``: the canonical git root of a directory, shared by a repository's worktrees,
answered from the file system alone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from korg_bridge.recall.project import find_git_root, project_root
from tests.helpers.memory import git_repo

pytestmark = pytest.mark.no_store


def test_a_subfolder_belongs_to_its_repository(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / "src" / "deep").mkdir(parents=True)
    assert project_root(str(repo / "src" / "deep")) == str(repo.resolve())


def test_a_worktree_belongs_to_its_main_repository(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    subprocess.run(
        ["git", "worktree", "add", "-q", str(tmp_path / "wt")],
        cwd=repo,
        check=True,
        timeout=30,
        capture_output=True,
    )
    (tmp_path / "wt" / "pkg").mkdir()
    assert project_root(str(tmp_path / "wt" / "pkg")) == str(repo.resolve())


def test_a_submodule_style_git_file_without_commondir_is_its_own_project(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / ".git" / "modules" / "lib").mkdir(parents=True)
    (outer / "lib").mkdir()
    (outer / "lib" / ".git").write_text("gitdir: ../.git/modules/lib\n")
    assert project_root(str(outer / "lib")) == str((outer / "lib").resolve())


def test_a_broken_git_file_still_marks_a_project(tmp_path: Path) -> None:
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / ".git").write_text("not a pointer")
    assert project_root(str(tmp_path / "odd")) == str((tmp_path / "odd").resolve())


def test_outside_git_the_directory_is_its_own_project(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert find_git_root(str(plain)) is None
    assert project_root(str(plain)) == str(plain.resolve())


def test_symlinks_are_resolved(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    os.symlink(repo, tmp_path / "link")
    assert project_root(str(tmp_path / "link")) == str(repo.resolve())
