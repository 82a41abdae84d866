"""The parsing worker: the index it builds is the in-process one, whatever the worker does."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.ingest import worker as worker_module
from korg_bridge.recall.history.query.search import search
from tests.helpers.paths import FIXTURE_BINS, REPO

FAULTY_WORKER = FIXTURE_BINS / "faulty-worker"
SMALL_BATCH = 1500
"""Bytes per slice: many slices per file, so results often arrive a slice after their call."""


def _transcript(session: str, turns: int) -> str:
    lines = []
    for turn in range(turns):
        use_id = f"toolu_{session}_{turn}"
        lines.append(
            {
                "type": "user",
                "sessionId": session,
                "timestamp": f"2026-05-27T10:{turn % 60:02d}:00Z",
                "message": {"role": "user", "content": f"please check module {turn} of {session}"},
            }
        )
        lines.append(
            {
                "type": "assistant",
                "sessionId": session,
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"reading module_{turn}.py"},
                        {
                            "type": "tool_use",
                            "id": use_id,
                            "name": "Read",
                            "input": {"file_path": f"module_{turn}.py"},
                        },
                    ],
                },
            }
        )
        lines.append(
            {
                "type": "user",
                "sessionId": session,
                "timestamp": f"2026-05-27T10:{turn % 60:02d}:05Z",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": use_id, "content": f"def f{turn}(): pass"}
                    ],
                },
            }
        )
    return "".join(json.dumps(item) + "\n" for item in lines)


def _ledger(turns: int) -> str:
    return "".join(
        json.dumps(
            {
                "seq": n,
                "source_agent": "agent:test",
                "tool_name": "Bash",
                "args": {"command": f"pytest tests/test_{n}.py"},
                "result": {"output": f"{n} passed"},
                "success": n % 7 != 0,
            }
        )
        + "\n"
        for n in range(1, turns + 1)
    )


def _rollout(turns: int) -> str:
    """A Codex rollout: its session and cwd are named once, on the first line."""
    lines: list[dict[str, Any]] = [
        {"type": "session_meta", "payload": {"id": "019e0000-0000-7000-8000-00000000c0de", "cwd": "/w/app"}}
    ]
    for turn in range(turns):
        call = f"call_{turn}"
        lines.append(
            {"type": "event_msg", "payload": {"type": "user_message", "message": f"check module {turn}"}}
        )
        arguments = json.dumps({"cmd": f"cat module_{turn}.py"})
        lines.append(
            {
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": arguments,
                    "call_id": call,
                },
            }
        )
        output = f"Process exited with code 0\nOutput:\ndef g{turn}(): pass"
        lines.append(
            {
                "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": call, "output": output},
            }
        )
    return "".join(json.dumps({"timestamp": "2026-05-11T08:00:00Z", **line}) + "\n" for line in lines)


POISON_LINES = (
    json.dumps({"seq": 2**70, "source_agent": "agent:test", "tool_name": "Bash"})
    + "\n"
    + json.dumps(
        {
            "seq": 1,
            "source_agent": "agent:test",
            "tool_name": "Bash",
            "result": json.loads("[" * 300 + "]" * 300),
        }
    )
    + "\n"
)
"""Lines the index cannot hold: skipped alike by the worker and by this process."""


@pytest.fixture
def ledgers(tmp_path: Path) -> Path:
    root = tmp_path / "ledgers"
    (root / "claude").mkdir(parents=True)
    for number in range(3):
        (root / "claude" / f"s{number}.jsonl").write_text(_transcript(f"s{number}", 40))
    (root / "flat.jsonl").write_text(_ledger(120) + "{not json\n" + POISON_LINES + _ledger(5))
    (root / "codex.jsonl").write_text(_rollout(30))
    return root


def _contents(path: Path) -> dict[str, Any]:
    """Everything an index holds but its ids: the same ledgers must give the same contents."""
    conn = sqlite3.connect(path)
    try:
        events = conn.execute(
            'SELECT s.path, e."offset", e.seq, e.shape, e.session, e.agent, e.tool, e.args, e.result,'
            " e.success, e.timestamp, e.ts, e.triggered_by, e.extra, e.tool_use_id, e.text, e.body, e.project"
            ' FROM events e JOIN sources s ON s.id = e.source_id ORDER BY s.path, e."offset", e.id'
        ).fetchall()
        sources = conn.execute(
            'SELECT path, inode, dev, size, mtime_ns, "offset", line_no, skipped, ignored, head_len, head_sha,'
            " parse_state FROM sources ORDER BY path"
        ).fetchall()
        skipped = conn.execute(
            "SELECT s.path, k.line_no, k.reason FROM skipped_lines k JOIN sources s ON s.id = k.source_id"
            " ORDER BY s.path, k.line_no"
        ).fetchall()
        pending = conn.execute("SELECT count(*) FROM pending_patches").fetchone()[0]
        fts = conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH 'module'").fetchone()[0]
    finally:
        conn.close()
    return {"events": events, "sources": sources, "skipped": skipped, "pending": pending, "fts": fts}


def _build(path: Path, ledgers: Path, *, worker: bool) -> dict[str, Any]:
    with Index(path) as index:
        index.batch_bytes = SMALL_BATCH
        index.worker_min_bytes = 0 if worker else 1 << 60
        report = index.refresh([ledgers])
        assert report.events_added > 0
        hits = search(index, "module", mode="keyword", top_n=5, min_score=0, sources=[ledgers])
        assert hits
    return _contents(path)


@pytest.fixture
def in_process(tmp_path: Path, ledgers: Path) -> dict[str, Any]:
    return _build(tmp_path / "in-process.sqlite", ledgers, worker=False)


def test_worker_builds_exactly_the_index_parsing_in_process_builds(
    tmp_path: Path, ledgers: Path, in_process: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert _build(tmp_path / "worker.sqlite", ledgers, worker=True) == in_process
    assert "worker" not in caplog.text
    assert in_process["pending"] == 0
    assert len(in_process["events"]) == 3 * 40 * 3 + 125 + 30 * 2
    assert [(line, reason.split(" (")[0]) for _path, line, reason in in_process["skipped"]] == [
        (121, "not valid JSON"),
        (122, "seq is beyond a 64-bit integer"),
        (123, "JSON nested deeper than 100 levels"),
    ]
    codex = [event for event in in_process["events"] if event[3] == "codex"]
    assert {(event[5], event[17]) for event in codex} == {("codex#019e0000", "/w/app")}
    assert all(event[8] is not None for event in codex if event[6] == "exec_command")


def test_worker_that_cannot_start_leaves_the_work_to_this_process(
    tmp_path: Path,
    ledgers: Path,
    in_process: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with caplog.at_level(logging.WARNING):
        assert _build(tmp_path / "worker.sqlite", ledgers, worker=True) == in_process
    assert "cannot start" in caplog.text


@pytest.mark.parametrize(
    ("mode", "after", "says"),
    [
        ("exit", 1, "exited"),
        ("exit", 0, "exited early"),
        ("garbage", 3, "instead of a batch"),
        ("error", 2, "disk on fire"),
        ("stall", 2, "no batch for"),
    ],
)
def test_worker_that_fails_midway_loses_no_event_and_duplicates_none(
    tmp_path: Path,
    ledgers: Path,
    in_process: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    mode: str,
    after: int,
    says: str,
) -> None:
    monkeypatch.setattr(sys, "executable", str(FAULTY_WORKER))
    monkeypatch.setattr(worker_module, "FRAME_TIMEOUT_S", 1.0)
    monkeypatch.setenv("FAULTY_WORKER_MODE", mode)
    monkeypatch.setenv("FAULTY_WORKER_AFTER", str(after))
    with caplog.at_level(logging.WARNING):
        assert _build(tmp_path / "worker.sqlite", ledgers, worker=True) == in_process
    assert "parsing worker failed" in caplog.text
    assert says in caplog.text


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie an init that reaps slowly has not collected."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc: ask the kernel, zombies included
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] in (b"Z", b"X")


def test_refresh_stopped_early_ends_its_worker_at_once(
    tmp_path: Path, ledgers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = tmp_path / "worker.pid"
    monkeypatch.setattr(sys, "executable", str(FAULTY_WORKER))
    monkeypatch.setenv("FAULTY_WORKER_MODE", "stall")
    monkeypatch.setenv("FAULTY_WORKER_AFTER", "3")
    monkeypatch.setenv("FAULTY_WORKER_PIDFILE", str(pidfile))

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with Index(tmp_path / "index.sqlite") as index:
        index.batch_bytes = SMALL_BATCH
        index.worker_min_bytes = 0
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            index.refresh([ledgers], progress=interrupt)
        assert time.monotonic() - started < worker_module.FRAME_TIMEOUT_S
        assert index.stats()["events"] > 0
    assert _gone(int(pidfile.read_text()))


def test_a_frozen_application_parses_in_process(
    tmp_path: Path, ledgers: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)  # as PyInstaller and cx_Freeze set it
    monkeypatch.setattr(sys, "executable", str(FAULTY_WORKER))  # any start would be seen
    monkeypatch.setenv("FAULTY_WORKER_MODE", "error")
    monkeypatch.setenv("FAULTY_WORKER_AFTER", "0")
    with caplog.at_level(logging.WARNING), Index(tmp_path / "index.sqlite") as index:
        index.worker_min_bytes = 0
        assert index.refresh([ledgers]).events_added > 0
    assert "worker" not in caplog.text


def test_small_refresh_parses_in_process(
    tmp_path: Path, ledgers: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Any worker start would be seen: this "interpreter" only reports an error.
    monkeypatch.setattr(sys, "executable", str(FAULTY_WORKER))
    monkeypatch.setenv("FAULTY_WORKER_MODE", "error")
    monkeypatch.setenv("FAULTY_WORKER_AFTER", "0")
    with caplog.at_level(logging.WARNING), Index(tmp_path / "index.sqlite") as index:
        assert index.refresh([ledgers]).events_added > 0
    assert "worker" not in caplog.text


def test_ending_the_indexing_process_group_ends_its_worker(tmp_path: Path, ledgers: Path) -> None:
    # What the bridge does to a korg-recall call that times out or is cancelled.
    pidfile = tmp_path / "worker.pid"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from korg_bridge.recall.history.index import Index\n"
        f"sys.executable = {str(FAULTY_WORKER)!r}\n"
        f"index = Index(Path({str(tmp_path / 'index.sqlite')!r}))\n"
        f"index.batch_bytes, index.worker_min_bytes = {SMALL_BATCH}, 0\n"
        f"index.refresh([Path({str(ledgers)!r})])\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FAULTY_WORKER_MODE": "stall",
        "FAULTY_WORKER_AFTER": "1",
        "FAULTY_WORKER_PIDFILE": str(pidfile),
    }
    indexer = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdin=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert indexer.poll() is None and time.monotonic() < deadline, "the worker never started"
            time.sleep(0.02)
        worker_pid = int(pidfile.read_text())
        os.killpg(indexer.pid, signal.SIGKILL)
        indexer.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not _gone(worker_pid):
            assert time.monotonic() < deadline, "the worker outlived its process group"
            time.sleep(0.02)
    finally:
        if indexer.poll() is None:
            indexer.kill()
            indexer.wait(timeout=10)


def test_worker_that_never_reads_its_work_does_not_hang_the_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Many files with long names: a work list bigger than a pipe holds.
    root = tmp_path / "many"
    root.mkdir()
    for number in range(400):
        (root / f"{'x' * 200}-{number}.jsonl").write_text(_ledger(2))
    monkeypatch.setattr(sys, "executable", str(FAULTY_WORKER))
    monkeypatch.setattr(worker_module, "FRAME_TIMEOUT_S", 1.0)
    monkeypatch.setenv("FAULTY_WORKER_MODE", "deaf")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING), Index(tmp_path / "index.sqlite") as index:
        index.worker_min_bytes = 0
        assert index.refresh([root]).events_added == 800
    assert time.monotonic() - started < 30
    assert "took no work" in caplog.text
