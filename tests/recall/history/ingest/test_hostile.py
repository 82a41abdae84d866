"""``korg-recall`` on hostile histories: poison lines, device files, FIFOs, sockets, loops, huge lines.

Each case runs the real ``korg-recall`` process (what the bridge runs per tool call): one
bad line, or one odd file, must never cost more than itself.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.cli.app import main
from korg_bridge.recall.history.index import Index
from tests.helpers.cli import run_recall
from tests.helpers.paths import REPO

BOUND_S = 60.0
"""Seconds one korg-recall child may take: far above a query on a test ledger, far below a hang."""


def legacy(seq: Any, text: str, **more: Any) -> str:
    record = {"seq": seq, "source_agent": "agent:t", "tool_name": "user_prompt", "args": {"prompt": text}}
    return json.dumps({**record, **more})


def korg_recall(*args: str, index: Path) -> subprocess.CompletedProcess[str]:
    # keyword mode: the model is not what is tested here
    return run_recall(
        *args,
        env={"KORG_RECALL_INDEX": str(index)},
        drop=["KORG_RECALL_MODEL_DIR"],
        cwd=REPO,
        timeout=BOUND_S,
    )


def stats(index: Path) -> dict[str, Any]:
    done = korg_recall("stats", index=index)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


POISON = {
    "seq-beyond-int64": (legacy(2**70, "poison"), "seq is beyond a 64-bit integer"),
    "nested-500-deep": (
        legacy(2, "poison", result=json.loads("[" * 500 + "]" * 500)),
        "JSON nested deeper than 100 levels",
    ),
    "nested-100k-deep": ("[" * 100_000 + "]" * 100_000, "JSON nested deeper than 100 levels"),
    "not-json": ('{"seq": 2, "tool_name": ', "not valid JSON"),
}


@pytest.mark.parametrize("form", list(POISON))
def test_a_poison_line_is_skipped_named_in_stats_and_recall_goes_on(tmp_path: Path, form: str) -> None:
    line, reason = POISON[form]
    ledger = tmp_path / "ledgers" / "poisoned.jsonl"
    ledger.parent.mkdir()
    ledger.write_text(
        legacy(1, "before the poison") + "\n" + line + "\n" + legacy(3, "after the poison") + "\n"
    )
    index = tmp_path / "index.sqlite"
    indexed = korg_recall("index", "--ledger", str(ledger.parent), index=index)
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["skipped_lines"] == 1
    for _ in range(2):  # every later call too
        found = korg_recall(
            "recall", "--ledger", str(ledger.parent), "--query", "poison", "--json", index=index
        )
        assert found.returncode == 0, found.stderr
        assert sorted(hit["snippet"] for hit in json.loads(found.stdout)["hits"]) == [
            "after the poison",
            "before the poison",
        ]
    answer = stats(index)
    assert answer["skipped_lines"] == 1
    [skip] = answer["skipped"]
    assert (skip["path"], skip["line"]) == (str(ledger), 2)
    assert skip["reason"].startswith(reason)


def test_a_lone_surrogate_is_read_as_a_replacement_character_and_named_in_stats(tmp_path: Path) -> None:
    ledger = tmp_path / "ledgers" / "cut.jsonl"
    ledger.parent.mkdir()
    # What JavaScript writes when it cuts a string inside an emoji: an escaped lone surrogate.
    whole = "a whole emoji \U0001f600 is no repair"
    ledger.write_text(legacy(1, "emoji cut \ud83d here") + "\n" + legacy(2, whole) + "\n")
    index = tmp_path / "index.sqlite"
    found = korg_recall("recall", "--ledger", str(ledger.parent), "--query", "emoji", "--json", index=index)
    assert found.returncode == 0, found.stderr
    snippets = sorted(hit["snippet"] for hit in json.loads(found.stdout)["hits"])
    assert snippets == [whole, "emoji cut \ufffd here"]
    report = stats(index)
    assert report["skipped_lines"] == 0  # the event was kept ...
    [repaired] = report["repaired"]  # ... and the line that needed a repair is named
    assert (repaired["path"], repaired["line"]) == (str(ledger), 1)
    assert "lone UTF-16 surrogate" in repaired["reason"]


# --- files that are not ledgers ------------------------------------------------------------------


@pytest.mark.parametrize("special", ["fifo", "dev_zero", "unix_socket"])
@pytest.mark.parametrize("command", ["recall", "index"])
def test_a_ledger_that_is_no_regular_file_is_a_usage_error_at_once(
    tmp_path: Path, special: str, command: str, request: pytest.FixtureRequest
) -> None:
    path: Path = request.getfixturevalue(special)
    query = ["--query", "anything"] if command == "recall" else []
    done = korg_recall(command, "--ledger", str(path), *query, index=tmp_path / "index.sqlite")
    assert done.returncode == 2
    assert done.stdout == ""
    [message] = done.stderr.splitlines()
    assert message.startswith("korg-recall: error: ledger ")
    assert str(path) in message and "is not a regular file" in message


def test_a_folder_with_special_files_and_a_symlink_loop_is_read_around_them(
    tmp_path: Path, fifo: Path, unix_socket: Path
) -> None:
    folder = tmp_path
    (folder / "zero.jsonl").symlink_to("/dev/zero")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "sub").mkdir()
    (folder / "sub" / "up").symlink_to(folder, target_is_directory=True)
    (folder / "real.jsonl").write_text(legacy(1, "the only real ledger") + "\n")
    index = tmp_path / "index.sqlite"
    found = korg_recall("recall", "--ledger", str(folder), "--query", "real ledger", "--json", index=index)
    assert found.returncode == 0, found.stderr
    assert [hit["snippet"] for hit in json.loads(found.stdout)["hits"]] == ["the only real ledger"]
    assert sorted(stats(index)["passed_over"]) == sorted(
        str(folder / name) for name in ("loop.jsonl", "pipe.jsonl", "sock.jsonl", "zero.jsonl")
    )


@pytest.mark.parametrize("worker", [False, True], ids=["in-process", "parsing-worker"])
def test_a_line_over_the_length_cap_is_skipped_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], worker: bool
) -> None:
    monkeypatch.setattr(Index, "max_line_bytes", 4096)
    monkeypatch.setattr(Index, "worker_min_bytes", 0 if worker else 1 << 40)
    monkeypatch.setenv("KORG_RECALL_INDEX", str(tmp_path / "index.sqlite"))
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    ledger = tmp_path / "ledgers" / "big.jsonl"
    ledger.parent.mkdir()
    huge = legacy(2, "image " + "A" * 100_000)
    ledger.write_text(legacy(1, "small before") + "\n" + huge + "\n" + legacy(3, "small after") + "\n")
    assert main(["recall", "--ledger", str(ledger.parent), "--query", "small", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["hits"]) == 2
    assert main(["stats"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["skipped"] == [
        {
            "path": str(ledger),
            "line": 2,
            "reason": f"line of {len(huge):,} bytes is over the 4,096-byte limit",
        }
    ]
