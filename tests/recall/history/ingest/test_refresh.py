"""Refresh correctness: files rewritten in place, files that go and come back, parser state."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.cli.app import main
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.query.search import search


def prompt(seq: int, text: str) -> str:
    record = {"seq": seq, "source_agent": "agent:t", "tool_name": "user_prompt", "args": {"prompt": text}}
    return json.dumps(record) + "\n"


def found(index: Index, query: str, sources: list[Path]) -> list[str]:
    hits = search(index, query, mode="keyword", top_n=20, min_score=0, sources=sources)
    return sorted(hit.snippet for hit in hits)


def set_mtime(path: Path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


# --- rewritten in place --------------------------------------------------------------------------


def test_a_copytruncated_file_grown_past_its_old_offset_is_read_again(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "app.jsonl"
    ledger.write_text(prompt(1, "rotated away alpha") + prompt(2, "rotated away beta"))
    index.refresh([ledgers])
    inode = ledger.stat().st_ino
    with ledger.open("r+") as handle:  # logrotate copytruncate: same inode, emptied, then written again
        handle.truncate(0)
    with ledger.open("a") as handle:
        handle.write("".join(prompt(n, f"fresh line {n}") for n in range(1, 5)))
    assert ledger.stat().st_ino == inode
    report = index.refresh([ledgers])
    assert (report.events_removed, report.events_added) == (2, 4)
    assert found(index, "rotated", [ledgers]) == []
    assert found(index, "fresh", [ledgers]) == [f"fresh line {n}" for n in range(1, 5)]


def test_a_same_size_rewrite_in_place_is_read_again(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "app.jsonl"
    ledger.write_text(prompt(1, "original words"))
    set_mtime(ledger, 1_700_000_000_000_000_000)
    index.refresh([ledgers])
    with ledger.open("r+") as handle:
        handle.write(prompt(1, "replaced words"))  # the same length
    set_mtime(ledger, 1_700_000_001_000_000_000)
    report = index.refresh([ledgers])
    assert (report.events_removed, report.events_added) == (1, 1)
    assert found(index, "words", [ledgers]) == ["replaced words"]


def test_a_rewrite_that_changes_the_first_bytes_is_caught_by_the_fingerprint(
    index: Index, ledgers: Path
) -> None:
    ledger = ledgers / "app.jsonl"
    ledger.write_text(prompt(1, "head one"))
    index.refresh([ledgers])
    with ledger.open("r+") as handle:  # longer, so neither smaller nor the same size
        handle.write(prompt(1, "head two, a little longer") + prompt(2, "and more"))
    report = index.refresh([ledgers])
    assert (report.events_removed, report.events_added) == (1, 2)
    assert found(index, "head", [ledgers]) == ["head two, a little longer"]


def test_an_append_is_read_from_the_stored_offset(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "app.jsonl"
    ledger.write_text("".join(prompt(n, f"line {n} " + "pad " * 300) for n in range(1, 6)))
    index.refresh([ledgers])
    with ledger.open("a") as handle:
        handle.write(prompt(6, "appended"))
    report = index.refresh([ledgers])
    assert (report.events_removed, report.events_added) == (0, 1)


# --- gone and back -------------------------------------------------------------------------------


def test_a_file_that_comes_back_unchanged_is_not_read_twice(
    index: Index, ledgers: Path, tmp_path: Path
) -> None:
    ledger = ledgers / "s.jsonl"
    ledger.write_text(prompt(1, "wandering words"))
    index.refresh([ledgers])
    aside = tmp_path / "aside.jsonl"
    ledger.rename(aside)
    assert index.refresh([ledgers]).files_gone == 1
    assert [
        hit.gone
        for hit in search(index, "wandering", mode="keyword", top_n=5, min_score=0, sources=[ledgers])
    ] == [True]
    aside.rename(ledger)
    report = index.refresh([ledgers])
    assert (report.events_added, report.events_removed, report.files_changed) == (0, 0, 1)
    [hit] = search(index, "wandering", mode="keyword", top_n=5, min_score=0, sources=[ledgers])
    assert not hit.gone
    assert index.stats()["gone"] == {"files": 0, "events": 0}


def test_a_file_that_comes_back_different_replaces_its_events(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "s.jsonl"
    ledger.write_text(prompt(1, "before words"))
    index.refresh([ledgers])
    ledger.unlink()
    index.refresh([ledgers])
    ledger.write_text(prompt(1, "after words") + prompt(2, "after more"))
    report = index.refresh([ledgers])
    assert (report.events_removed, report.events_added) == (1, 2)
    assert found(index, "words", [ledgers]) == ["after words"]


# --- what the parser remembers -------------------------------------------------------------------


def codex_line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2026-05-11T08:27:00.000Z", "type": kind, "payload": payload}) + "\n"


def test_a_codex_session_named_once_stays_known_to_later_refreshes(index: Index, ledgers: Path) -> None:
    rollout = ledgers / "session.jsonl"  # no id in the name: only session_meta says it
    meta = {"id": "019e0000-aaaa-7bbb-8ccc-123456789abc", "cwd": "/work/app", "git": {"branch": "main"}}
    rollout.write_text(codex_line("session_meta", meta))
    index.refresh([ledgers])
    with rollout.open("a") as handle:
        handle.write(codex_line("event_msg", {"type": "user_message", "message": "rename the flag"}))
    index.refresh([ledgers])
    [hit] = search(index, "rename", mode="keyword", top_n=5, min_score=0, sources=[ledgers])
    assert (hit.agent, hit.session, hit.project) == ("codex#019e0000", meta["id"], "/work/app")
    assert hit.context == {"git_branch": "main"}  # the cwd is the project itself: said once


# --- korg-recall prune --gone --------------------------------------------------------------------


def test_deleted_transcripts_stay_findable_until_prune_gone(
    tmp_path: Path, ledgers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KORG_RECALL_INDEX", str(tmp_path / "cli.sqlite"))
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    (ledgers / "old.jsonl").write_text(prompt(1, "cleaned up by the client"))
    (ledgers / "new.jsonl").write_text(prompt(1, "still on disk"))
    query = ["recall", "--ledger", str(ledgers), "--mode", "keyword", "--query"]
    assert main([*query, "cleaned"]) == 0
    capsys.readouterr()
    (ledgers / "old.jsonl").unlink()  # what cleanupPeriodDays does
    assert main([*query, "cleaned"]) == 0
    [line] = capsys.readouterr().out.splitlines()[1:]
    assert " gone=true :: cleaned up by the client" in line
    assert main(["prune"]) == 2
    assert "pass --gone" in capsys.readouterr().err
    assert main(["prune", "--gone", "--ledger", str(ledgers)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["files_pruned"], answer["events_removed"], answer["paths"]) == (
        1,
        1,
        [str(ledgers / "old.jsonl")],
    )
    assert main([*query, "cleaned"]) == 0
    assert capsys.readouterr().out == "[recall · keyword] no relevant matches.\n"
