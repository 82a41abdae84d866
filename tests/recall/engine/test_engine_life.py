"""The engine's life and its failures: two tenants' calls interleaved, a stale socket, an engine of
another version, fingerprint, store or index, an engine or child that dies mid-call (kill -9 at
many points of ``remember``), the peer check, permissions, idle exit, --status/--stop, and
``KORG_RECALL_ENGINE=auto`` starting exactly one."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from korg_bridge.recall.engine import protocol as front
from tests.helpers.engine import Running, calls, engine_dir, korg_recall, spares, start, sweep
from tests.recall.engine.conftest import BOUND, alive, answered, off, run, wait_for

# --- who may talk to it, and what it refuses ------------------------------------------------------


def test_the_engine_folder_is_owner_only_and_its_socket_and_description_too(engine: Running) -> None:
    assert stat.S_IMODE(engine.folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((engine.folder / "engine.sock").stat().st_mode) == 0o600
    assert stat.S_IMODE((engine.folder / "engine.json").stat().st_mode) == 0o600
    info = engine.info()
    assert info["pid"] == engine.pid, info
    # Python's own thread, and one onnxruntime starts when it is imported (idle); no pool.
    assert isinstance(info["threads"], int) and info["threads"] <= 2, info


def _request(env: Mapping[str, str], **changes: object) -> tuple[bytes, object]:
    """A request as the front makes it, with ``changes``, sent to the engine: its reply."""
    conn = front.connect(engine_dir(env))
    assert conn is not None
    with contextlib.closing(conn):
        request = {
            "protocol": front.PROTOCOL,
            "version": front.version(),
            "fingerprint": front.code_identity(),
            "index": str(engine_dir(env).parent / "index.sqlite"),
            "store": front.configured_store(env),
            "argv": ["remember", "--content", "must never land", "--type", "user"],
            "cwd": os.getcwd(),
            "umask": 0o022,
            "env": dict(env),
            "stdio": [{"encoding": "utf-8", "errors": "strict"}] * 3,
            **changes,
        }
        with open(os.devnull, "rb") as nothing, open(os.devnull, "wb") as sink:
            socket.send_fds(
                conn, [front.frame(front.REQUEST, request)], [nothing.fileno(), sink.fileno(), sink.fileno()]
            )
            conn.settimeout(BOUND)
            return front.read_frame(conn)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"version": "0.0.0-other"}, "another version"),
        ({"fingerprint": "0" * 32}, "another fingerprint"),
        ({"store": "/elsewhere/memory.sqlite"}, "another store"),
        ({"index": "/elsewhere/index.sqlite"}, "another index"),
        ({"protocol": 99}, "another protocol"),
    ],
)
def test_an_engine_refuses_a_call_of_another_version_fingerprint_store_or_index(
    engine: Running, env: dict[str, str], project: Path, change: dict[str, object], reason: str
) -> None:
    assert _request(env, **change) == (front.REFUSE, {"reason": reason})
    listed = run(off(env), "memories", "--json", cwd=project)
    assert "must never land" not in listed.stdout


def test_a_call_for_another_store_runs_in_its_own_process_with_the_right_answer(
    engine: Running, env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    other = {**env, "KORG_RECALL_STORE": str(tmp_path / "other" / "memory.sqlite")}
    made = run(other, "remember", "--content", "kept in the other store", "--type", "user", cwd=project)
    assert made.returncode == 0, made.stderr
    assert not answered(other, project)
    assert "kept in the other store" in run(other, "memories", "--json", cwd=project).stdout
    assert "kept in the other store" not in run(env, "memories", "--json", cwd=project).stdout
    assert answered(env, project)


def test_a_call_for_another_index_never_reaches_the_engine(
    engine: Running, env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    other = {**env, "KORG_RECALL_INDEX": str(tmp_path / "elsewhere" / "index.sqlite")}
    assert not answered(other, project)
    assert answered(env, project)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_a_connection_from_another_user_is_refused_by_the_peer_check(engine: Running) -> None:
    sock = engine.folder / "engine.sock"
    os.chmod(sock, 0o666)  # only SO_PEERCRED is left to stop the other user
    # Reached through an O_PATH descriptor: the folders above are root's own.
    handle = os.open(sock, os.O_PATH)
    try:
        code = (
            "import os, socket, sys\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "conn = socket.socket(socket.AF_UNIX)\n"
            "conn.settimeout(30)\n"
            "conn.connect(f'/proc/self/fd/{sys.argv[1]}')\n"
            "try:\n"
            "    conn.sendall(b'Q' + (2).to_bytes(4, 'big') + b'{}')\n"
            "    print(repr(conn.recv(100)))\n"
            "except (ConnectionResetError, BrokenPipeError):\n"
            "    print('reset')\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(handle)],
            capture_output=True,
            text=True,
            timeout=BOUND,
            pass_fds=(handle,),
        )
    finally:
        os.close(handle)
        os.chmod(sock, 0o600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("b''", "reset"), done.stdout  # closed without a word, nothing forked
    assert calls(engine.pid) == []


def test_a_front_never_uses_an_engine_folder_others_may_enter(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    os.chmod(engine.folder, 0o755)
    try:
        assert not answered(env, project)
    finally:
        os.chmod(engine.folder, 0o700)
    assert answered(env, project)


# --- stale, long, and switched off ----------------------------------------------------------------


def test_a_stale_socket_means_the_call_runs_itself_and_a_new_engine_replaces_it(
    env: dict[str, str], project: Path
) -> None:
    where = engine_dir(env)
    where.mkdir(parents=True, mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(where / "engine.sock"))
    stale.close()  # the file stays; nobody listens
    done = run(env, "memories", "--json", cwd=project)
    assert done.returncode == 0 and done.stderr == ""
    assert not answered(env, project)
    engine = start(env)
    try:
        assert answered(env, project)
    finally:
        engine.stop()


def test_a_socket_path_too_long_means_no_engine_and_calls_run_themselves(
    env: dict[str, str], tmp_path: Path, project: Path
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "index.sqlite"
    long_env = {**env, "KORG_RECALL_INDEX": str(deep)}
    refused = subprocess.run(
        [*korg_recall(), "engine"], capture_output=True, text=True, env=long_env, timeout=BOUND, cwd=project
    )
    assert refused.returncode == 1
    assert "over the system's 107" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert run(long_env, "memories", "--json", cwd=project).returncode == 0


def test_off_never_hands_a_call_over(engine: Running, env: dict[str, str], project: Path) -> None:
    assert not answered(off(env), project)


# --- dying mid-call -------------------------------------------------------------------------------


def _big_ledger(path: Path, events: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for seq in range(1, events + 1):
            record = {"seq": seq, "source_agent": "agent:t", "tool_name": "Bash"}
            record["args"] = {"command": f"echo walrus {seq} " + "padding " * 20}
            out.write(json.dumps(record) + "\n")


def test_a_read_whose_child_dies_before_printing_is_run_again_in_process(
    engine: Running, env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    ledgers = tmp_path / "big"
    ledgers.mkdir()
    _big_ledger(ledgers / "big.jsonl", 40_000)
    big = {**env, "KORG_RECALL_LEDGER": str(ledgers)}
    proc = subprocess.Popen(
        [*korg_recall(), "index", "--no-embed", "--json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=big,
        cwd=project,
    )
    assert wait_for(lambda: calls(engine.pid))
    for pid in calls(engine.pid):
        os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=BOUND)
    assert proc.returncode == 0, err
    assert err == ""
    assert json.loads(out)["events_added"] in (0, 40_000)  # the child may have committed before it died
    hits = json.loads(run(big, "recall", "--query", "walrus", "--json", cwd=project).stdout)["hits"]
    assert hits


def test_kill_9_at_many_points_of_remember_lands_every_acknowledged_write_exactly_once(
    env: dict[str, str], project: Path
) -> None:
    """Children and the engine killed at random moments: a write acknowledged (exit 0) is there once;
    one reported lost (exit 4, one line) is there at most once; nothing is ever there twice."""
    rng = random.Random(22)
    engine = start(env)
    outcomes: dict[str, subprocess.CompletedProcess[str]] = {}
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set():
            time.sleep(rng.uniform(0.0, 0.25))
            for pid in calls(engine.pid, spares=True):  # a call's child, or the spare about to be one
                if rng.random() < 0.5:
                    with_suppress_kill(pid)

    def with_suppress_kill(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        for number in range(24):
            text = f"fact number {number} about the walrus pipeline"
            outcomes[text] = run(env, "remember", "--content", text, "--type", "user", cwd=project)
            if number == 16:  # the engine itself, mid-run: later calls find a dead socket
                os.kill(engine.pid, signal.SIGKILL)
    finally:
        stop.set()
        thread.join(BOUND)
        engine.stop()
    listed = json.loads(run(off(env), "memories", "--json", cwd=project).stdout)["lines"]
    lost = 0
    for text, done in outcomes.items():
        count = sum(line.endswith(text) for line in listed)
        assert count <= 1, (text, listed)
        if done.returncode == 0:
            assert count == 1, (text, done.stderr)
        else:
            lost += 1
            assert done.returncode == front.LOST_EXIT, done.stderr
            assert done.stderr.startswith("korg-recall: error: the engine stopped during the call; its write")
            assert "korg-recall memories" in done.stderr and len(done.stderr.splitlines()) == 1
    assert lost < len(outcomes)


# --- concurrency and isolation --------------------------------------------------------------------


def test_interleaved_calls_of_two_tenants_never_see_each_others_environment(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    tenants = {"alpha": "ann", "beta": "bob"}
    procs = []
    for round_ in range(4):
        for tenant, actor in tenants.items():
            tenant_env = {**env, "KORG_BRIDGE_TENANT": tenant, "KORG_BRIDGE_ACTOR": actor}
            procs.append(
                (
                    tenant,
                    subprocess.Popen(
                        [
                            *korg_recall(),
                            "remember",
                            "--content",
                            f"{tenant} plan {round_}",
                            "--type",
                            "user",
                        ],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                        env=tenant_env,
                        cwd=project,
                    ),
                )
            )
    for _tenant, proc in procs:
        _out, err = proc.communicate(timeout=BOUND)
        assert proc.returncode == 0, err
    for tenant in tenants:
        tenant_env = {**env, "KORG_BRIDGE_TENANT": tenant}
        lines = json.loads(run(tenant_env, "memories", "--json", cwd=project).stdout)["lines"]
        assert sorted(line.rsplit(" ", 3)[-3:][0] for line in lines) == [tenant] * 4, lines
    data = Path(env["XDG_DATA_HOME"]) / "korg-recall" / "tenants"
    for tenant, actor in tenants.items():
        log = (data / tenant / "memory-ops.jsonl").read_text(encoding="utf-8")
        other = next(name for name in tenants.values() if name != actor)
        assert actor in log and other not in log


def test_calls_run_concurrently_in_the_engine(engine: Running, env: dict[str, str], project: Path) -> None:
    procs = [
        subprocess.Popen(
            [*korg_recall(), "recall", "--query", "deploy", "--json"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=project,
        )
        for _ in range(6)
    ]
    outs = [proc.communicate(timeout=BOUND) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outs
    assert len({out for out, _ in outs}) == 1


def test_a_spare_waits_for_each_next_call_and_one_killed_is_replaced(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    """The engine forks the child of the next call ahead of it (named korg-spare for ps); a spare
    killed from outside costs nothing but a fork: the next call is still the engine's, and the
    engine's process group (Ctrl-C at its terminal) is not the spare's."""

    assert wait_for(lambda: len(spares(engine.pid)) == 1)
    spare = spares(engine.pid)[0]
    assert os.getpgid(spare) == spare != os.getpgid(engine.pid)
    assert answered(env, project)  # the spare took that call; another waits for the next
    assert wait_for(lambda: spares(engine.pid) not in ([], [spare]))
    victim = spares(engine.pid)[0]
    os.kill(victim, signal.SIGKILL)
    # Gone and reaped first: a process this size keeps its sockets open while the kernel tears its
    # memory down, and a call handed to it in those milliseconds is run by its front instead (the
    # right answer, not the engine's: a CI run under load saw it once).
    assert wait_for(lambda: not os.path.exists(f"/proc/{victim}"))
    assert answered(env, project)
    assert wait_for(lambda: len(spares(engine.pid)) == 1)
    assert wait_for(lambda: not calls(engine.pid))  # every call's child ended and was reaped


def test_spares_rehearse_on_a_scratch_history_of_their_own_and_answers_stay_the_same(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    """After its first few calls the engine makes a scratch history and store in its folder; each spare
    then runs a recall there before its call arrives. Nothing of it reaches a call -- the answers,
    the stderr (``--debug`` included) and the user's store are a fresh process's -- and the scratch
    folder goes with the engine."""
    import sqlite3

    from korg_bridge.recall.engine.server import REHEARSE_AFTER
    from korg_bridge.recall.history.index import NOTE_EVERY_S

    scratch = engine_dir(env) / "rehearsal"
    made = run(env, "remember", "--content", "the deploy uses blue green", "--type", "project", cwd=project)
    assert made.returncode == 0, made.stderr
    for _ in range(REHEARSE_AFTER - 1):
        assert answered(env, project)
    assert wait_for(lambda: (scratch / "ready").is_file(), timeout=BOUND)
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o700

    def rehearsed_at() -> str:
        with contextlib.closing(sqlite3.connect(scratch / "index.sqlite")) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'last_refresh'").fetchone()
        return str(row[0])

    before = rehearsed_at()
    assert answered(env, project)  # served by a spare forked before the scratch was ready

    def rehearsed_again() -> bool:
        """Each call's spare is followed by one that rehearses; the refresh time it shows is
        written at most once a second, so calls go on until a rehearsal wrote it."""
        if rehearsed_at() != before:
            return True
        time.sleep(NOTE_EVERY_S / 4)
        assert answered(env, project)
        return False

    assert wait_for(rehearsed_again, timeout=BOUND)  # the spares after it rehearsed
    for args in (
        ["recall", "--query", "deploy", "--json"],
        ["--debug", "recall", "--query", "deploy", "--mode", "hybrid"],
        ["memories", "--json"],
        ["context"],
    ):
        served = run(env, *args, cwd=project)
        alone = run(off(env), *args, cwd=project)
        assert (served.returncode, served.stdout, served.stderr) == (
            alone.returncode,
            alone.stdout,
            alone.stderr,
        ), args
    listed = json.loads(run(off(env), "memories", "--json", cwd=project).stdout)
    assert "blue green" in json.dumps(listed) and "5433" not in json.dumps(listed)  # no scratch memory
    engine.stop()
    assert not scratch.exists()


def test_a_bad_rehearsal_switch_stops_the_engine_at_once_naming_it(env: dict[str, str]) -> None:
    done = subprocess.run(
        [*korg_recall(), "engine", "--idle-exit", "1s"],
        env={**env, "KORG_RECALL_ENGINE_REHEARSE": "maybe"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "KORG_RECALL_ENGINE_REHEARSE='maybe' is not a yes/no value" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_no_rehearsal_when_switched_off(env: dict[str, str], project: Path) -> None:
    quiet = {**env, "KORG_RECALL_ENGINE_REHEARSE": "0"}
    running = start(quiet)
    try:
        for _ in range(3):
            assert answered(quiet, project)
        time.sleep(0.5)
        assert not (engine_dir(env) / "rehearsal").exists()
    finally:
        running.stop()


# --- starting and stopping ------------------------------------------------------------------------


def test_status_and_stop_describe_and_end_the_engine(env: dict[str, str], project: Path) -> None:
    before = json.loads(run(env, "engine", "--status", cwd=project).stdout)
    assert before["running"] is False
    engine = start(env)
    try:
        status = json.loads(run(env, "engine", "--status", cwd=project).stdout)
        assert status["running"] is True and status["pid"] == engine.pid
        assert status["index"] == str(engine.folder.parent / "index.sqlite")
        stopped = json.loads(run(env, "engine", "--stop", cwd=project).stdout)
        assert stopped == {"stopped": True, "pid": engine.pid, "folder": str(engine.folder)}
        assert engine.proc.wait(BOUND) == 0
        assert not (engine.folder / "engine.sock").exists()
        assert json.loads(run(env, "engine", "--status", cwd=project).stdout)["running"] is False
    finally:
        engine.stop()


def test_a_second_engine_for_the_same_index_is_refused(engine: Running, env: dict[str, str]) -> None:
    done = subprocess.run([*korg_recall(), "engine"], capture_output=True, text=True, env=env, timeout=BOUND)
    assert done.returncode == 1
    assert done.stderr.startswith("korg-recall: error: an engine already runs for this index")


def test_an_idle_engine_exits_after_its_idle_time(env: dict[str, str], project: Path) -> None:
    engine = start(env, "--idle-exit", "5s")
    try:
        assert answered(env, project)
        assert engine.proc.wait(BOUND) == 0
        assert not (engine.folder / "engine.sock").exists()
    finally:
        engine.stop()


def test_auto_starts_one_detached_niced_engine_for_many_first_calls(
    env: dict[str, str], project: Path
) -> None:
    auto = {
        **env,
        "KORG_RECALL_ENGINE": "auto",
        "KORG_RECALL_ENGINE_WAIT": "60",
        "KORG_RECALL_ENGINE_IDLE": "1m",
    }
    try:
        procs = [
            subprocess.Popen(
                [*korg_recall(), "memories", "--json"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=auto,
                cwd=project,
            )
            for _ in range(4)
        ]
        for proc in procs:
            _out, err = proc.communicate(timeout=BOUND)
            assert proc.returncode == 0 and err == "", err
        status = json.loads(run(env, "engine", "--status", cwd=project).stdout)
        assert status["running"] is True
        pid = int(status["pid"])
        assert os.getsid(pid) == pid  # a session of its own: the bridge's process group is not its
        assert os.getpriority(os.PRIO_PROCESS, pid) >= front.NICE
        log = (engine_dir(env) / "engine.log").read_text(encoding="utf-8")
        assert log.count("engine listening on") == 1, log
        assert answered(auto, project)
    finally:
        sweep(engine_dir(env).parent)
    assert wait_for(lambda: not json.loads(run(env, "engine", "--status", cwd=project).stdout)["running"])
    assert wait_for(lambda: not alive(pid))
