"""A home holding the real agent sessions of ``../shared/peers``, as the agents left them: Claude
Code's projects folder (the gzipped compaction session unpacked), a Claude Code memory folder, and
Codex rollouts under ``~/.codex/sessions``. Copied into the test's folder: the peers stay read-only."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

from tests.helpers.paths import PEERS

__all__ = ["peer_home", "use_peer_home"]


def peer_home(root: Path) -> dict[str, str] | None:
    """Lay the sessions out under ``root``; the environment that points korg-recall at them (None:
    the peer data is absent)."""
    transcripts = PEERS / "transcripts"
    if not transcripts.is_dir():
        return None
    claude = root / ".claude"
    shutil.copytree(transcripts / "claude" / "projects", claude / "projects")
    for packed in (claude / "projects").rglob("*.jsonl.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    memory = PEERS / "claude-memory"
    if memory.is_dir():
        shutil.copytree(
            memory, claude / "projects" / "-home-dev-work-acme-api" / "memory", dirs_exist_ok=True
        )
    codex = root / ".codex" / "sessions" / "2026" / "05" / "11"
    codex.mkdir(parents=True)
    for rollout in (transcripts / "codex").glob("*.jsonl"):
        shutil.copy(rollout, codex / rollout.name)
    return {"HOME": str(root), "CLAUDE_CONFIG_DIR": str(claude), "CODEX_HOME": str(root / ".codex")}


def use_peer_home(root: Path, monkeypatch: Any) -> Path:
    """Point this test's environment at :func:`peer_home` under ``root`` (no model, no other
    ledgers) and move into a fresh working folder; that folder (skips when the peer data is absent)."""
    import pytest

    from tests.helpers.paths import peers_missing

    env = peer_home(root)
    if env is None:
        pytest.skip(peers_missing(PEERS))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KORG_RECALL_LEDGER", raising=False)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    work = root / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work
