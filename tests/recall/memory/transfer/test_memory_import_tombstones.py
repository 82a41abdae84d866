"""Tombstones win on import (issue #19, item 7): an export from another machine never brings back a
memory this store purged, a retired one stays retired unless the file restores it later, and the
report says what was skipped and why. "This store" is the backend's; the other machine is a file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import answer
from tests.helpers.memory import PgTarget, dump, log_entries, rows

VERSIONS = "SELECT id, version, state, body, superseded_by FROM memory ORDER BY id, version"


@contextmanager
def elsewhere(monkeypatch: pytest.MonkeyPatch, path: Path) -> Iterator[None]:
    """Run the calls inside on another machine's store (a SQLite file), then come back."""
    mine = os.environ.get("KORG_RECALL_STORE")
    monkeypatch.setenv("KORG_RECALL_STORE", str(path))
    try:
        yield
    finally:
        if mine is None:
            monkeypatch.delenv("KORG_RECALL_STORE")
        else:
            monkeypatch.setenv("KORG_RECALL_STORE", mine)


def remember(capsys: pytest.CaptureFixture[str], text: str) -> str:
    return str(answer(capsys, "remember", "--content", text, "--type", "project", "--scope", "user")["id"])


def export(capsys: pytest.CaptureFixture[str], target: Path) -> Path:
    answer(capsys, "export", "--output", str(target))
    return target


def shared(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[str, Path]:
    """A memory of this store, copied to the other machine by an export."""
    memory_id = remember(capsys, "Backups run nightly at 01:00 on the staging cluster.")
    first = export(capsys, tmp_path / "first.jsonl")
    other = tmp_path / "other" / "memory.sqlite"
    with elsewhere(monkeypatch, other):
        assert answer(capsys, "import", str(first))["new"] == 1
    return memory_id, other


def skipped_for(report: dict[str, Any], memory_id: str, word: str) -> list[str]:
    return [reason for reason in report["skipped"] if memory_id in reason and word in reason]


def test_a_newer_export_from_another_machine_never_recreates_a_purged_memory(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    project: Path,
    store: Path | PgTarget,
    tmp_path: Path,
) -> None:
    memory_id, other = shared(capsys, monkeypatch, tmp_path)
    answer(capsys, "forget", "--id", memory_id, "--mode", "purge")
    with elsewhere(monkeypatch, other):  # meanwhile, the other machine changed it
        answer(capsys, "revise", "--id", memory_id, "--content", "Backups run nightly at 02:00 on staging.")
        newer = export(capsys, tmp_path / "newer.jsonl")
    before = rows(store, VERSIONS)
    report = answer(capsys, "import", str(newer))
    assert (report["extended"], report["new"], report["versions"]) == (0, 0, 0)
    assert skipped_for(report, memory_id, "purged")
    assert rows(store, VERSIONS) == before
    assert {state for (state,) in rows(store, "SELECT state FROM memory")} == {"purged"}
    entry = [e for e in log_entries(store) if e["tool_name"] == "memory.import"][-1]
    assert entry["args"]["skipped"] == 1


def test_a_retired_memory_stays_retired_when_the_file_does_not_restore_it(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    project: Path,
    store: Path | PgTarget,
    tmp_path: Path,
) -> None:
    memory_id, other = shared(capsys, monkeypatch, tmp_path)
    answer(capsys, "forget", "--id", memory_id)
    with elsewhere(monkeypatch, other):  # a revision, by someone who never saw it retired
        answer(capsys, "revise", "--id", memory_id, "--content", "Backups run nightly at 03:00 on staging.")
        newer = export(capsys, tmp_path / "newer.jsonl")
    before = rows(store, VERSIONS)
    report = answer(capsys, "import", str(newer))
    assert skipped_for(report, memory_id, "retired")
    assert rows(store, VERSIONS) == before
    listed = answer(capsys, "memories", "--scope", "user")
    assert listed["total"] == 0


@pytest.mark.parametrize("restored_later", [True, False])
def test_a_retired_memory_comes_back_only_with_a_restore_later_than_its_retirement(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    project: Path,
    store: Path | PgTarget,
    tmp_path: Path,
    restored_later: bool,
) -> None:
    memory_id, other = shared(capsys, monkeypatch, tmp_path)
    if restored_later:
        answer(capsys, "forget", "--id", memory_id)
    with elsewhere(monkeypatch, other):  # the other machine retired it too, then brought it back
        answer(capsys, "forget", "--id", memory_id)
        answer(capsys, "restore", "--id", memory_id)
        newer = export(capsys, tmp_path / "newer.jsonl")
    if not restored_later:
        answer(capsys, "forget", "--id", memory_id)  # retired here after that restore
    before = dump(store)
    report = answer(capsys, "import", str(newer))
    head = rows(store, "SELECT version, state FROM memory WHERE superseded_by IS NULL")
    if restored_later:
        assert (report["extended"], report["versions"], report["skipped"]) == (1, 1, [])
        assert head == [(2, "live")]
        assert answer(capsys, "memories", "--scope", "user")["total"] == 1
    else:
        assert skipped_for(report, memory_id, "retired") and report["versions"] == 0
        assert head == [(1, "retired")]
        assert [line for line in dump(store) if "memory_ops" not in line and "oplog" not in line] == [
            line for line in before if "memory_ops" not in line and "oplog" not in line
        ]


def test_foreign_texts_of_forgotten_memories_are_skipped_with_the_reason(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    path = tmp_path / "mem0.json"
    path.write_text(
        '[{"id": "a", "memory": "Prefers dark roast coffee"}, {"id": "b", "memory": "Is allergic to peanuts"}]',
        encoding="utf-8",
    )
    answer(capsys, "import", str(path), "--scope", "user")
    coffee, peanuts = (
        rows(store, "SELECT id FROM memory WHERE body = ?", (text,))[0][0]
        for text in ("Prefers dark roast coffee", "Is allergic to peanuts")
    )
    answer(capsys, "forget", "--id", coffee)
    answer(capsys, "forget", "--id", peanuts, "--mode", "purge")
    path.write_text(  # the same texts, and one changed under a forgotten id
        '[{"id": "a", "memory": "Prefers dark roast coffee"}, {"id": "b", "memory": "Is allergic to peanuts and kiwi"},'
        ' {"id": "c", "memory": "Prefers dark roast coffee"}]',
        encoding="utf-8",
    )
    before = dump(store)
    report = answer(capsys, "import", str(path), "--scope", "user")
    assert (report["created"], report["exists"]) == (0, 0)
    assert len(skipped_for(report, coffee, "retired")) == 2
    assert report["memories_touched"] == 0
    assert [line for line in dump(store) if "memory_ops" not in line and "oplog" not in line] == [
        line for line in before if "memory_ops" not in line and "oplog" not in line
    ]


def test_a_markdown_file_naming_a_forgotten_memory_is_not_imported(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    memory_id = remember(capsys, "Deploys need two approvals from the platform team.")
    folder = tmp_path / "md"
    answer(capsys, "export", "--format", "markdown", "--output", str(folder))
    answer(capsys, "forget", "--id", memory_id, "--mode", "purge")
    (written,) = folder.rglob("*.md")
    written.write_text(written.read_text(encoding="utf-8").replace("two approvals", "three approvals"))
    report = answer(capsys, "import", str(folder))
    assert report["created"] == 0 and skipped_for(report, memory_id, "purged")
    assert {state for (state,) in rows(store, "SELECT state FROM memory")} == {"purged"}
