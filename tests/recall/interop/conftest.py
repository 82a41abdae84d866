"""Fixtures of the Claude Code interop tests: keyword-only, a Claude config folder of our own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.claude import ClaudeHome


@pytest.fixture(autouse=True)
def _keyword_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model: every write runs the keyword check only (a model load costs ~1 s per process)."""
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.delenv("KORG_RECALL_MODEL", raising=False)


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClaudeHome:
    """An empty Claude Code config folder, named by ``CLAUDE_CONFIG_DIR`` for every call."""
    home = ClaudeHome(tmp_path / "claude-config")
    home.root.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home.root))
    return home
