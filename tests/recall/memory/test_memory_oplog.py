"""The operation log: every write appended to a hash-chained korg-ledger@v1 journal that
``korg-recall verify`` checks, without a title, body, key or tag in it -- and entries left queued
by a crash appended exactly once.

A SQLite store's log is ``memory-ops.jsonl`` beside it (``verify --path``); a team store's is
its ``memory_ops`` table, one chain per tenant (``verify --store URL``). The queue between a
SQLite transaction and the file has no counterpart in a team store, whose entries are written
in the operation's own transaction."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import BOUND, answer, korg_recall, ok, run_recall
from tests.helpers.memory import PgTarget, log_entries, rows
from tests.helpers.sqlite import connect

FILE_QUEUE = pytest.mark.sqlite_only("the queue between a SQLite transaction and the log file")


def log_of(store: Path) -> Path:
    return store.parent / "memory-ops.jsonl"


def entries(store: Path | PgTarget) -> list[dict[str, object]]:
    return log_entries(store)


def verify_flags(store: Path | PgTarget) -> list[str]:
    """``verify``'s flags for the store's log: the file, or the team store (its tenant from the env)."""
    return ["--store", store.url] if isinstance(store, PgTarget) else ["--path", str(log_of(store))]


def test_every_write_is_logged_and_the_log_verifies(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    made = answer(capsys, "remember", "--content", "Orchid sensor calibrates at 41 percent.", "--type", "project",
                  "--title", "Orchid calibration", "--tags", "greenhouse-secret-tag", "--key", "orchid-key")  # fmt: skip
    memory_id = str(made["id"])
    answer(capsys, "remember", "--content", "Orchid sensor calibrates at 41 percent.", "--type", "project")
    answer(capsys, "revise", "--id", memory_id, "--old-text", "41", "--new-text", "43")
    answer(capsys, "forget", "--id", memory_id)
    answer(capsys, "restore", "--id", memory_id)
    answer(capsys, "forget", "--id", memory_id, "--mode", "purge")
    logged = entries(store)
    assert [(e["tool_name"], e["result"]) for e in logged] == [
        ("memory.remember", {"status": "created"}),
        ("memory.remember", {"status": "exists"}),
        ("memory.revise", {"status": "revised"}),
        ("memory.forget", {"status": "retired"}),
        ("memory.restore", {"status": "restored"}),
        ("memory.forget", {"status": "purged"}),
    ]
    assert all(e["source_agent"] == "agent" and e["args"]["id"] == memory_id for e in logged)  # type: ignore[index]
    raw = json.dumps(logged)
    for needle in ("Orchid", "orchid", "calibrat", "greenhouse", "41 percent", "43 percent"):
        assert needle not in raw, needle
    report = ok(run_recall("verify", *verify_flags(store), cwd=project))
    assert (report["intact"], report["events"]) == (True, 6)


def test_tampering_with_one_entry_is_detected(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    for n in range(3):
        answer(capsys, "remember", "--content", f"Fact number {n} about herons.", "--type", "note")
    if isinstance(store, PgTarget):  # the application role cannot change the log; its owner can
        store.as_owner(
            'UPDATE memory_ops SET entry = replace(entry, \'"status": "created"\', \'"status": "exists"\') '
            "WHERE seq_id = 2"
        )
    else:
        lines = log_of(store).read_text().splitlines()
        lines[1] = lines[1].replace('"status": "created"', '"status": "exists"')
        log_of(store).write_text("\n".join(lines) + "\n")
    proc = run_recall("verify", *verify_flags(store), cwd=project)
    assert proc.returncode == 1, proc.stderr  # not intact: verify fails, so `verify && …` stops
    report = json.loads(proc.stdout)
    assert report["intact"] is False
    assert any(error.startswith("seq 2: entry_hash mismatch") for error in report["errors"])


@FILE_QUEUE
def test_entries_left_queued_by_a_crash_are_appended_once(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    answer(
        capsys, "remember", "--content", "Queued entries are appended by the next process.", "--type", "note"
    )
    last = entries(store)[-1]
    conn = connect(store)
    # One entry as if a process died after appending it but before deleting its queue row, and
    # one as if it died before appending it.
    queued_twice = {
        k: v for k, v in last.items() if k not in ("schema_version", "seq_id", "prev_hash", "entry_hash")
    }
    fresh = json.loads(json.dumps(queued_twice))
    fresh["args"]["op_id"] = "feedfacefeedfacefeedface"
    with conn:
        conn.execute(
            "INSERT INTO oplog_pending (op_id, entry) VALUES (?, ?)",
            (last["args"]["op_id"], json.dumps(queued_twice)),
        )  # type: ignore[index]
        conn.execute(
            "INSERT INTO oplog_pending (op_id, entry) VALUES (?, ?)",
            (fresh["args"]["op_id"], json.dumps(fresh)),
        )
    conn.close()
    answer(capsys, "memories")
    op_ids = [e["args"]["op_id"] for e in entries(store)]  # type: ignore[index]
    assert op_ids.count(last["args"]["op_id"]) == 1  # type: ignore[index]
    assert op_ids[-1] == "feedfacefeedfacefeedface"
    assert rows(store, "SELECT count(*) FROM oplog_pending") == [(0,)]
    assert ok(run_recall("verify", "--path", str(log_of(store)), cwd=project))["intact"] is True


@FILE_QUEUE
def test_a_log_that_cannot_be_appended_to_never_hides_a_committed_write(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    answer(capsys, "remember", "--content", "First fact, logged.", "--type", "note")
    with log_of(store).open("a") as handle:
        handle.write('{"not": "a chained entry"}\n')
    made = answer(capsys, "remember", "--content", "Second fact, committed anyway.", "--type", "note")
    assert made["status"] == "created"
    assert str(made["checks"]["oplog"]).startswith("queued: ")  # type: ignore[index]
    assert rows(store, "SELECT count(*) FROM oplog_pending") == [(1,)]
    assert answer(capsys, "memories", "--stats")["oplog_queued"] == 1


def store_flag(store: Path | PgTarget) -> list[str]:
    """``verify --store``: the log checked against what the store itself recorded of it."""
    return ["--store", store.url if isinstance(store, PgTarget) else str(store)]


def not_intact(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    report = json.loads(proc.stdout)
    assert report["intact"] is False
    return list(report["errors"])


def test_cutting_the_last_entries_off_the_log_is_reported_and_stays_reported(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget
) -> None:
    for n in range(4):
        answer(capsys, "remember", "--content", f"Fact number {n} about kestrels.", "--type", "note")
    assert ok(run_recall("verify", *store_flag(store), cwd=project))["intact"] is True
    if isinstance(store, PgTarget):  # the application role cannot delete from the log; its owner can
        store.as_owner("DELETE FROM memory_ops WHERE seq_id > 2")
    else:
        lines = log_of(store).read_text().splitlines()
        log_of(store).write_text("\n".join(lines[:2]) + "\n")
    assert any(
        "seq 3-4 missing" in error
        for error in not_intact(run_recall("verify", *store_flag(store), cwd=project))
    )
    # The next write does not turn the shorter chain into one that verifies.
    answer(capsys, "remember", "--content", "Fact number 5 about kestrels.", "--type", "note")
    assert any(
        "seq 3-4 missing" in error
        for error in not_intact(run_recall("verify", *store_flag(store), cwd=project))
    )


@FILE_QUEUE
def test_a_deleted_log_is_reported_and_a_new_one_does_not_hide_it(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path
) -> None:
    for n in range(3):
        answer(capsys, "remember", "--content", f"Fact number {n} about ospreys.", "--type", "note")
    log_of(store).unlink()
    errors = not_intact(run_recall("verify", "--store", str(store), cwd=project))
    assert any("missing" in error and "seq 3" in error for error in errors), errors
    answer(capsys, "remember", "--content", "Fact number 4 about ospreys.", "--type", "note")
    assert len(entries(store)) == 1  # a new log, chained from the start ...
    errors = not_intact(run_recall("verify", "--store", str(store), cwd=project))
    assert any("entries lost for good" in error for error in errors), errors  # ... that does not verify


@FILE_QUEUE
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_log_replaced_by_a_fifo_or_a_directory_is_refused_at_once(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path, kind: str
) -> None:
    answer(capsys, "remember", "--content", "Fact number 1 about egrets.", "--type", "note")
    log_of(store).unlink()
    if kind == "fifo":
        os.mkfifo(log_of(store))
    else:
        log_of(store).mkdir()
    writers = [
        subprocess.Popen(
            [*korg_recall(), "remember", "--content", f"Fact number {n} about egrets.", "--type", "note"],
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in (2, 3)
    ]
    try:
        for writer in writers:  # neither hangs holding the store's lock, nor fails waiting for the other
            out, err = writer.communicate(timeout=BOUND)
            assert writer.returncode == 0, err
            oplog = json.loads(out)["checks"]["oplog"]
            assert oplog.startswith("queued: ") and (
                "FIFO" in oplog if kind == "fifo" else "directory" in oplog
            )
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.communicate(timeout=10)
    assert rows(store, "SELECT count(*) FROM oplog_pending") == [(2,)]  # kept for when the log is back
    errors = not_intact(run_recall("verify", "--store", str(store), cwd=project))
    assert any("not a log file" in error for error in errors), errors
