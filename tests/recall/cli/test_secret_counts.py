"""How many secrets korg-recall says it redacted: each secret once, however often it is shown.

An event holds its output twice (the recorded result and the text it is searched by), so a
count of places said 6 for 3 secrets; a secret in two hits of one answer is one secret too.
Through the installed ``korg-recall``, as a user and the bridge run it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run_recall

SUBPROCESS_BOUND = 60.0
"""Seconds one korg-recall child may take: far above a query on a three-event ledger."""
SECRETS = {
    "anthropic": "sk-ant-api03-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "bearer": "Authorization: Bearer abcDEF1234567890ghiJKL",
    "url-password": "postgres://admin:hunter2secret@db.internal:5432/app",
}
HIDDEN = ("AbCdEfGhIjKlMnOp", "abcDEF1234567890ghiJKL", "hunter2secret")


def korg_recall(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_recall(*args, base=env, timeout=SUBPROCESS_BOUND)


def event(seq: int, command: str, output: str) -> dict[str, Any]:
    return {
        "seq": seq,
        "source_agent": "agent:korgex@0.2.2",
        "tool_name": "Bash",
        "args": {"command": command},
        "result": {"output": output},
        "success": True,
    }


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    ledger = tmp_path / "ledgers" / "s-9.jsonl"
    ledger.parent.mkdir()
    events = [event(n, f"echo credential {name}", SECRETS[name]) for n, name in enumerate(SECRETS, 1)]
    events.append(event(4, "echo credential again", SECRETS["anthropic"]))  # the same key, shown again
    ledger.write_text("".join(json.dumps(item) + "\n" for item in events), encoding="utf-8")
    found = {name: value for name, value in os.environ.items() if name != "KORG_RECALL_MODEL_DIR"}
    found.update(KORG_RECALL_LEDGER=str(ledger), KORG_RECALL_INDEX=str(tmp_path / "index.sqlite"))
    return found


def test_show_counts_each_redacted_secret_once(env: dict[str, str]) -> None:
    found = korg_recall("recall", "--query", "credential", "--top-n", "10", env=env)
    assert found.returncode == 0, found.stderr
    refs = re.findall(r"ref=(e\d+)", found.stdout)
    assert len(refs) == 4
    shown = korg_recall("show", *[f"--ref={ref}" for ref in refs], env=env)
    assert shown.returncode == 0, shown.stderr
    answer = json.loads(shown.stdout)
    assert answer["redacted"] == 3  # three secrets, each in two fields, one of them in two events
    assert all(fragment not in shown.stdout for fragment in HIDDEN)
    assert shown.stdout.count("[redacted]") == 8


def test_recall_counts_a_secret_in_two_hits_once(env: dict[str, str]) -> None:
    found = korg_recall("recall", "--query", "credential", "--top-n", "10", env=env)
    assert found.returncode == 0, found.stderr
    assert all(fragment not in found.stdout for fragment in HIDDEN)
    assert found.stdout.splitlines()[-1] == "[recall] 3 secret(s) redacted."
