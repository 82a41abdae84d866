"""The background indexer, as real processes: detached, single, niced, killable, resumable.

Every test here switches the indexer on (``KORG_RECALL_BACKGROUND=1``; the
suite's default is off) and the ``settle`` fixture makes sure none outlives
its test: it asks a running one to stop and waits for the lock, killing the
recorded pid only if that fails. Waits are bounded polls, never bare sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.history.index import Index
from korg_bridge.recall.semantic import indexer
from korg_bridge.recall.semantic.embedpass import embedded_by
from tests.helpers.cli import run_recall
from tests.helpers.models import MODEL_DIR, needs_model
from tests.helpers.paths import REPO

BOUND_S = 120.0
"""Any one wait: far above what the work takes on a loaded two-core machine."""


def wait_for(check: Callable[[], bool], timeout: float = BOUND_S, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


def prompt(seq: int, text: str) -> str:
    record = {"seq": seq, "source_agent": "agent:test", "tool_name": "user_prompt", "args": {"prompt": text}}
    return json.dumps(record) + "\n"


TOPICS = ("the cache", "the login page", "the billing export", "the search index", "the deploy script")


def history(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        prompt(seq, f"step {seq}: fix {TOPICS[seq % len(TOPICS)]} issue number {seq}") for seq in range(count)
    ]
    (folder / "history.jsonl").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KORG_RECALL_MODEL_DIR": MODEL_DIR,
        "KORG_RECALL_INDEX": str(tmp_path / "index.sqlite"),
        "KORG_RECALL_LEDGER": str(tmp_path / "ledgers"),
        "KORG_RECALL_BACKGROUND": "1",
    }


@pytest.fixture
def index_path(env: dict[str, str]) -> Iterator[Path]:
    path = Path(env["KORG_RECALL_INDEX"])
    yield path
    settle(path)


def settle(path: Path) -> None:
    """Leave no indexer running: ask it to stop, wait for the lock, kill the recorded pid as a last resort."""
    if not indexer.held(path):
        return
    with Index(path) as index:
        indexer.request_stop(index, True)
        stopped = indexer.wait_idle(path, 30)
        if not stopped:
            pid = indexer.state(index, path).get("pid")
            if isinstance(pid, int):
                os.kill(pid, signal.SIGKILL)
            indexer.wait_idle(path, 10)
        indexer.request_stop(index, False)


def korg_recall(args: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return run_recall(*args, base=env, cwd=REPO, timeout=BOUND_S)


def stats(env: Mapping[str, str]) -> dict[str, Any]:
    done = korg_recall(["stats"], env)
    assert done.returncode == 0, done.stderr
    described: dict[str, Any] = json.loads(done.stdout)
    return described


def counters(path: Path) -> dict[str, int]:
    with Index(path) as index:
        return index.read(embedded_by)


def stored_ids(path: Path) -> list[int]:
    import numpy as np

    with Index(path) as index:
        rows = index.read(lambda conn: conn.execute("SELECT ids FROM vector_chunks").fetchall())
    return sorted(int(x) for (blob,) in rows for x in np.frombuffer(blob, dtype="<i8"))


def event_count(path: Path) -> int:
    with Index(path) as index:
        return int(index.read(lambda conn: conn.execute("SELECT count(*) FROM events").fetchone()[0]))


def recorded(path: Path) -> dict[str, Any]:
    with Index(path) as index:
        return indexer.state(index, path)


@needs_model
def test_index_no_embed_starts_a_detached_indexer_that_fills_every_vector_and_exits(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 300)
    started = time.monotonic()
    done = korg_recall(["index", "--no-embed"], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["embedding"]["indexer"] == "started"
    assert time.monotonic() - started < BOUND_S  # it returned although the indexer holds no pipe of ours
    wait_for(lambda: recorded(index_path).get("state") == "done", what="the indexer to finish")
    assert not indexer.held(index_path)
    described = stats(env)
    assert described["embedding"]["coverage"] == 1.0
    assert described["embedding"]["indexer"]["state"] == "done"
    assert described["embedding"]["indexer"]["embedded"] == 300
    assert counters(index_path) == {"indexer": 300}
    assert stored_ids(index_path) == list(range(1, 301))


@needs_model
def test_a_burst_of_queries_never_embeds_an_event_while_the_indexer_converges(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 1200)
    assert korg_recall(["index", "--no-embed"], env).returncode == 0
    seen: list[dict[str, Any]] = []
    for query in ("fix the cache", "login page", "billing export issue", "deploy script", "search index"):
        done = korg_recall(["recall", "--query", query, "--mode", "hybrid", "--json"], env)
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout)["embedding"])
    wait_for(lambda: not indexer.held(index_path), what="the indexer to finish")
    assert all(item.get("indexer") in ("running", "started", None) for item in seen)
    assert [item["embedded"] for item in seen] == sorted(item["embedded"] for item in seen)
    assert counters(index_path) == {"indexer": 1200}  # every vector came from the indexer, none from a query
    assert stats(env)["embedding"]["coverage"] == 1.0


@needs_model
def test_killing_the_indexer_mid_way_loses_nothing_and_a_restart_resumes(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 1500)
    assert korg_recall(["index", "--no-embed"], {**env, "KORG_RECALL_BACKGROUND": "0"}).returncode == 0
    child = subprocess.Popen(
        [sys.executable, "-m", "korg_bridge.recall.semantic.indexer", str(index_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=REPO,
    )
    try:
        wait_for(lambda: recorded(index_path).get("embedded", 0) > 0, what="the first committed slice")
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=BOUND_S)
    before = counters(index_path)["indexer"]
    assert 0 < before < 1500
    assert recorded(index_path)["state"] == "interrupted"
    assert not indexer.held(index_path)  # the kernel dropped the dead process's lock
    assert stored_ids(index_path) == sorted(set(stored_ids(index_path)))  # no event stored twice

    done = korg_recall(["recall", "--query", "cache", "--json"], env)  # auto: keyword, and a restart
    assert json.loads(done.stdout)["embedding"]["indexer"] == "started"
    wait_for(lambda: recorded(index_path).get("state") == "done", what="the restarted indexer")
    assert counters(index_path) == {"indexer": 1500}
    assert recorded(index_path)["embedded"] == 1500 - before  # only what was still missing
    assert stored_ids(index_path) == list(range(1, 1501))


@needs_model
def test_a_second_indexer_exits_at_once_while_the_lock_is_held(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 20)
    assert korg_recall(["index", "--no-embed"], {**env, "KORG_RECALL_BACKGROUND": "0"}).returncode == 0
    with indexer.Lock(index_path) as lock:
        assert lock.acquire()
        assert indexer.held(index_path)
        done = subprocess.run(
            [sys.executable, "-m", "korg_bridge.recall.semantic.indexer", str(index_path)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            cwd=REPO,
            timeout=BOUND_S,
            check=False,
        )
        assert done.returncode == 0
        assert indexer.start(index_path, env) == "running"
    assert counters(index_path) == {}


@needs_model
def test_the_indexer_runs_in_a_session_of_its_own_at_a_lower_priority(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 3000)
    assert korg_recall(["index", "--no-embed"], env).returncode == 0
    wait_for(lambda: isinstance(recorded(index_path).get("pid"), int), what="the indexer's pid")
    pid = int(recorded(index_path)["pid"])
    try:
        assert os.getsid(pid) == pid != os.getsid(0)  # the caller's process group can end without it
        assert os.getpriority(os.PRIO_PROCESS, pid) >= min(
            19, os.getpriority(os.PRIO_PROCESS, 0) + indexer.NICE
        )
    except ProcessLookupError:
        pytest.fail("the indexer finished before it could be looked at; give it more events")


@needs_model
def test_index_takes_over_from_a_running_indexer(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 3000)
    assert korg_recall(["index", "--no-embed"], env).returncode == 0
    wait_for(lambda: recorded(index_path).get("embedded", 0) > 0, what="the indexer's first slice")
    done = korg_recall(["index"], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["embedding"]["not_embedded"] == 0
    assert recorded(index_path)["state"] == "stopped"
    assert sum(counters(index_path).values()) == 3000
    assert stored_ids(index_path) == list(range(1, 3001))


def test_an_indexer_without_a_model_records_why_for_stats(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 5)
    empty = tmp_path / "no-model"
    empty.mkdir()
    broken = {**env, "KORG_RECALL_MODEL_DIR": str(empty)}
    assert korg_recall(["index", "--no-embed"], broken).returncode == 0
    done = subprocess.run(
        [sys.executable, "-m", "korg_bridge.recall.semantic.indexer", str(index_path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=broken,
        cwd=REPO,
        timeout=BOUND_S,
        check=False,
    )
    assert done.returncode == 1
    assert "holds no usable model" in done.stderr
    state = recorded(index_path)
    assert state["state"] == "failed" and "holds no usable model" in state["error"]


def test_the_switch_keeps_recall_from_spawning_anything(tmp_path: Path, env: dict[str, str]) -> None:
    assert indexer.start(tmp_path / "index.sqlite", {**env, "KORG_RECALL_BACKGROUND": "0"}) == "off"
    assert not indexer.lock_path(tmp_path / "index.sqlite").exists()
    assert [indexer.background_enabled({"KORG_RECALL_BACKGROUND": v}) for v in ("0", "off", "1", "")] == [
        False,
        False,
        True,
        True,
    ]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@needs_model
def test_an_indexer_whose_lock_file_is_deleted_stops_so_no_second_one_runs_beside_it(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 3000)
    assert korg_recall(["index", "--no-embed"], env).returncode == 0
    wait_for(lambda: recorded(index_path).get("embedded", 0) > 0, what="the indexer's first slice")
    pid = int(recorded(index_path)["pid"])
    indexer.lock_path(index_path).unlink()
    wait_for(lambda: not alive(pid), what="the indexer to notice and stop")
    assert 0 < counters(index_path)["indexer"] < 3000
    assert stored_ids(index_path) == sorted(set(stored_ids(index_path)))


@needs_model
def test_a_run_in_process_embeds_everything_and_records_done(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 30)
    assert korg_recall(["index", "--no-embed"], {**env, "KORG_RECALL_BACKGROUND": "0"}).returncode == 0
    assert indexer.run(index_path, env) == 0
    state = recorded(index_path)
    assert (state["state"], state["embedded"], state["running"]) == ("done", 30, False)
    assert state["model"] == "sentence-transformers/all-MiniLM-L6-v2-int8"


@needs_model
def test_a_run_asked_to_stop_embeds_nothing_and_says_so(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 30)
    assert korg_recall(["index", "--no-embed"], {**env, "KORG_RECALL_BACKGROUND": "0"}).returncode == 0
    with Index(index_path) as index:
        indexer.request_stop(index, True)
    assert indexer.run(index_path, env) == 0
    assert recorded(index_path)["state"] == "stopped"
    assert counters(index_path) == {}


def test_the_indexer_module_takes_exactly_one_index_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert indexer.main([]) == 2
    assert "usage: python -m korg_bridge.recall.semantic.indexer INDEX" in capsys.readouterr().err


@needs_model
def test_start_spawns_one_detached_indexer_and_waiting_for_it_reaps_it(
    tmp_path: Path, env: dict[str, str], index_path: Path
) -> None:
    history(tmp_path / "ledgers", 600)
    assert korg_recall(["index", "--no-embed"], {**env, "KORG_RECALL_BACKGROUND": "0"}).returncode == 0
    assert indexer.start(index_path, env) == "started"
    wait_for(lambda: indexer.held(index_path), what="the indexer to take its lock")
    assert indexer.start(index_path, env) == "running"
    assert indexer.wait_idle(index_path, BOUND_S)
    assert recorded(index_path)["state"] == "done"
    assert index_path not in indexer._spawned.values()  # reaped: no zombie left by a long-lived caller


@needs_model
def test_index_in_process_asks_a_running_indexer_to_stop_and_embeds_the_rest(
    tmp_path: Path, env: dict[str, str], index_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from korg_bridge.recall.cli import app as cli

    history(tmp_path / "ledgers", 3000)
    assert korg_recall(["index", "--no-embed"], env).returncode == 0
    wait_for(lambda: recorded(index_path).get("embedded", 0) > 0, what="the indexer's first slice")
    for name in ("KORG_RECALL_MODEL_DIR", "KORG_RECALL_INDEX", "KORG_RECALL_LEDGER"):
        monkeypatch.setenv(name, env[name])
    assert cli.main(["index"]) == 0
    assert recorded(index_path)["state"] == "stopped"
    assert stored_ids(index_path) == list(range(1, 3001))
