"""Fixtures of the memory-store tests: keyword-only by default, a git project to work in."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._memory import git_repo, store_file


@pytest.fixture(autouse=True)
def _keyword_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a model every write runs the keyword check only (a model load costs ~1 s per
    process); the semantic tests set KORG_RECALL_MODEL_DIR back themselves."""
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.delenv("KORG_RECALL_MODEL", raising=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository under ``tmp_path``, also the working directory of in-process calls."""
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    return repo


@pytest.fixture
def store(isolated_env: Path) -> Path:
    """Where the memory store of this test lives (``$XDG_DATA_HOME/korg-recall/memory.sqlite``)."""
    return store_file(isolated_env)
