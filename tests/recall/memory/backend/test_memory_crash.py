"""Crash safety: ``kill -9`` at any moment of a write never loses an acknowledged memory (one
whose JSON result was printed) and never corrupts the store; concurrent writers all land.

The writers are real ``korg-recall remember`` processes (without the bridge, which adds
nothing here but start-up time). Each is killed after a random delay drawn from the measured
run time, so kills land everywhere: during start-up, inside the transaction, between commit
and the mirror, during the log append, after the result was printed.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cli import korg_recall, ok, run_recall
from tests.helpers.memory import exists, git_repo, rows

ITERATIONS = 200
LANES = 4
"""Writers running at once: the kills also land while others hold or wait for the write lock."""


def spawn(cwd: Path, content: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*korg_recall(), "remember", "--content", content, "--type", "note"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        cwd=cwd,
    )


def measured_run_time(cwd: Path) -> float:
    """Seconds a remember takes here with :data:`LANES` of them running at once (the slowest of
    two rounds): the range the kill delays are drawn from."""
    slowest = 0.0
    for round_ in range(2):
        started = time.monotonic()
        procs = [spawn(cwd, f"warm-up fact {round_}-{n} about kiwis") for n in range(LANES)]
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        slowest = max(slowest, time.monotonic() - started)
    return slowest


def acknowledged(out: str) -> str | None:
    """The id of a result printed in full, else None (killed before it acknowledged)."""
    try:
        result = json.loads(out)
    except ValueError:
        return None
    return result.get("id") if isinstance(result, dict) else None


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    yield git_repo(tmp_path / "shop")


@pytest.mark.sqlite_only(
    "the file, its WAL and the log file after kills; the team store's drill: test_memory_pg.py"
)
def test_kill_9_at_random_moments_loses_no_acknowledged_memory_and_corrupts_nothing(
    repo: Path, store: Path
) -> None:
    span = measured_run_time(repo)
    seed = random.randrange(1 << 30)
    acked: list[str] = []
    killed = 0
    lock = threading.Lock()

    def lane(number: int) -> None:
        nonlocal killed
        rng = random.Random(seed + number)
        for i in range(number, ITERATIONS, LANES):
            proc = spawn(repo, f"Fact {i}: the crash drill writes note {i} with marker k{seed}-{i}.")
            try:
                out, _ = proc.communicate(timeout=rng.uniform(0.0, span * 1.2))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate(timeout=30)
                with lock:
                    killed += 1
            memory_id = acknowledged(out)
            if memory_id is not None:
                with lock:
                    acked.append(memory_id)

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(LANES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not any(thread.is_alive() for thread in threads)
    print(f"kills {killed}, acknowledged {len(acked)}, span {span:.2f}")
    assert killed > ITERATIONS // 10, f"too few kills ({killed}) to mean anything (seed {seed})"

    # The next process opens the store normally: no error, nothing moved aside; it appends the log
    # entries killed processes left queued, and repairs a torn last line of the log.
    after = ok(
        run_recall(
            "remember", "--content", "After the drill the store still opens.", "--type", "note", cwd=repo
        )
    )
    assert after["checks"]["oplog"] == "appended"
    assert rows(store, "PRAGMA integrity_check") == [("ok",)]
    live = {
        row[0] for row in rows(store, "SELECT id FROM memory WHERE superseded_by IS NULL AND state = 'live'")
    }
    missing = sorted(set(acked) - live)
    assert not missing, f"acknowledged but lost: {missing} (seed {seed})"
    assert sorted(p.name for p in store.parent.iterdir() if ".broken" in p.name or ".bak" in p.name) == []

    log = store.parent / "memory-ops.jsonl"
    verdict = ok(run_recall("verify", "--path", str(log), cwd=repo))
    assert verdict["intact"] is True, verdict["errors"]
    op_ids = [json.loads(line)["args"]["op_id"] for line in log.read_text().splitlines()]
    assert len(op_ids) == len(set(op_ids)), "a queued entry was appended twice"
    assert rows(store, "SELECT count(*) FROM oplog_pending") == [(0,)]
    # Every memory the store holds was logged.
    logged = {json.loads(line)["args"]["id"] for line in log.read_text().splitlines()}
    assert live <= logged


def test_two_processes_writing_at_once_both_land(repo: Path, store: Path) -> None:
    procs = [spawn(repo, f"Concurrent fact {n}: lane {n} wrote this at the same time.") for n in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert {r["status"] for r in results} == {"created"}
    ids = {r["id"] for r in results}
    live = {
        row[0] for row in rows(store, "SELECT id FROM memory WHERE superseded_by IS NULL AND state = 'live'")
    }
    assert ids <= live and len(ids) == 2


def test_the_same_fact_written_by_two_processes_at_once_is_stored_once(repo: Path, store: Path) -> None:
    procs = [spawn(repo, "Both writers say: the cache lives in /var/cache/shop.") for _ in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["status"] for r in results) == ["created", "exists"]
    assert len({r["id"] for r in results}) == 1
    assert exists(store)
