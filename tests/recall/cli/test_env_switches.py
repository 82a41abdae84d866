"""The KORG_RECALL_* yes/no switches as korg-recall reads them: every one through the same parser,
so one value means the same thing for memories and for history (real processes)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import python_env, run_recall
from tests.helpers.models import MODEL_DIR, needs_model

BOUND = 60.0
SECRET = "postgres://admin:Zq8vT3mWx9Lp2Rk7@db.internal:5432/billing"
"""A password in a URL: the redactor's ``[redacted]`` replaces ``Zq8vT3mWx9Lp2Rk7``."""
PASSWORD = "Zq8vT3mWx9Lp2Rk7"


def _run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_recall(*args, base=python_env(), env=env, cwd=cwd, timeout=BOUND)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A ledger whose one event holds the secret."""
    ledger = tmp_path / "ledger.jsonl"
    event = {
        "seq": 1,
        "source_agent": "agent:test",
        "tool_name": "Bash",
        "args": {"command": f"psql {SECRET} -c 'select count(*) from invoices'"},
        "result": {"output": "42"},
        "success": True,
    }
    ledger.write_text(json.dumps(event) + "\n", encoding="utf-8")
    return ledger


@pytest.mark.parametrize("word", ["on", "yes", "TRUE", "1"])
def test_a_yes_word_shows_secrets_in_memories_and_history_alike(
    tmp_path: Path, history: Path, word: str
) -> None:
    env = {"KORG_RECALL_ALLOW_SECRETS": word}
    remembered = _run(
        tmp_path,
        env,
        "remember",
        "--type",
        "project",
        "--scope",
        "user",
        "--content",
        f"billing db is {SECRET}",
    )
    assert remembered.returncode == 0, remembered.stderr
    found = _run(tmp_path, env, "recall", "--query", "billing", "--ledger", str(history), "--top-n", "5")
    assert found.returncode == 0, found.stderr
    memory_part, _, history_part = found.stdout.partition("</memory>")
    assert PASSWORD in memory_part and PASSWORD in history_part
    assert "redacted" not in found.stdout


@pytest.mark.parametrize("word", ["off", "no", "0", ""])
def test_a_no_word_or_nothing_redacts_memories_and_history_alike(
    tmp_path: Path, history: Path, word: str
) -> None:
    env = {"KORG_RECALL_ALLOW_SECRETS": word}
    remembered = _run(
        tmp_path,
        env,
        "remember",
        "--type",
        "project",
        "--scope",
        "user",
        "--content",
        f"billing db is {SECRET}",
    )
    assert remembered.returncode == 0, remembered.stderr
    found = _run(tmp_path, env, "recall", "--query", "billing", "--ledger", str(history), "--top-n", "5")
    assert found.returncode == 0, found.stderr
    assert PASSWORD not in found.stdout
    assert found.stdout.count("[redacted]") >= 2


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("KORG_RECALL_ALLOW_SECRETS", ["recall", "--query", "billing", "--kinds", "history"]),
        ("KORG_RECALL_ALLOW_SECRETS", ["remember", "--type", "note", "--content", "a fact"]),
        ("KORG_RECALL_MIRROR", ["remember", "--type", "note", "--content", "a fact"]),
        ("KORG_RECALL_CLAUDE_MEMORY", ["memories"]),
    ],
)
def test_a_value_that_is_no_yes_or_no_is_exit_3_naming_the_variable(
    tmp_path: Path, history: Path, name: str, argv: list[str]
) -> None:
    env = {name: "maybe", "KORG_RECALL_LEDGER": str(history)}
    failed = _run(tmp_path, env, *argv)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert failed.stdout == ""
    assert failed.stderr.startswith(f"korg-recall: error: {name}='maybe' is not a yes/no value")
    assert failed.stderr.count("\n") == 1


@needs_model
def test_a_background_switch_that_is_no_yes_or_no_is_exit_3_when_vectors_are_missing(
    tmp_path: Path, history: Path
) -> None:
    env = {"KORG_RECALL_BACKGROUND": "later", "KORG_RECALL_MODEL_DIR": MODEL_DIR}
    failed = _run(tmp_path, env, "index", "--no-embed", "--ledger", str(history))
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert failed.stderr.startswith(
        "korg-recall: error: KORG_RECALL_BACKGROUND='later' is not a yes/no value"
    )
