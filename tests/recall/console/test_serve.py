"""``korg-recall serve`` as a person runs it: one line saying where it listens, loopback unless
given tokens, and a SIGTERM that lets a request in flight finish."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers.console import free_port
from tests.helpers.memory import git_repo, korg_recall, run

BOUND_S = 30.0


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    return repo


def start(project: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*korg_recall(), "serve", *args],
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
        start_new_session=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    return proc, line


def stop(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise
    return proc.returncode, out, err


def test_serve_says_where_it_listens_answers_and_stops_cleanly_on_sigterm(project: Path) -> None:
    port = free_port()
    proc, line = start(project, "--http", f"127.0.0.1:{port}")
    try:
        assert (
            line
            == f"korg-recall: console at http://127.0.0.1:{port}/ (no token: this machine only); Ctrl-C stops.\n"
        )
        deadline = time.monotonic() + BOUND_S
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/api/v1/status", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the console never answered"
                time.sleep(0.1)
        assert response.status_code == 200 and response.json()["pending"] == 0
    finally:
        code, out, err = stop(proc)
    assert code == 0, err
    assert out == ""  # stdout is for results; a server has none
    assert "SIGTERM: stopping the console" in err and "Traceback" not in err


def test_a_non_loopback_address_without_a_token_file_is_refused_at_once(project: Path) -> None:
    done = run("serve", "--http", f"0.0.0.0:{free_port()}", cwd=project, timeout=BOUND_S)
    assert done.returncode == 2
    assert done.stderr.startswith(
        "korg-recall: error: refusing to serve the console on 0.0.0.0 without tokens"
    )
    assert "--token-file" in done.stderr and done.stdout == ""


def test_a_bad_listen_value_and_a_busy_port_are_one_line_errors(project: Path) -> None:
    bad = run("serve", "--http", "localhost:notaport", cwd=project, timeout=BOUND_S)
    assert bad.returncode == 2 and "invalid --http value" in bad.stderr
    port = free_port()
    first, _line = start(project, "--http", f"127.0.0.1:{port}")
    try:
        busy = run("serve", "--http", f"127.0.0.1:{port}", cwd=project, timeout=BOUND_S)
        assert busy.returncode == 3 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr
        assert "Traceback" not in busy.stderr
    finally:
        stop(first)


def test_with_a_token_file_it_listens_off_loopback_and_asks_for_a_token(
    project: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "tokens"
    token_file.write_text("a-long-token-0123456789abcdef acme ana\n")
    token_file.chmod(0o600)
    port = free_port()
    proc, line = start(project, "--http", f"0.0.0.0:{port}", "--token-file", str(token_file))
    try:
        assert "tokens:" in line and f":{port}/" in line
        deadline = time.monotonic() + BOUND_S
        while True:
            try:
                refused = httpx.get(f"http://127.0.0.1:{port}/api/v1/status", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert refused.status_code == 401
        allowed = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/status",
            headers={"authorization": "Bearer a-long-token-0123456789abcdef"},
            timeout=5,
        )
        assert allowed.json() == {"pending": 0, "tenant": "acme", "actor": "ana"}
    finally:
        code, _out, err = stop(proc)
    assert code == 0, err


def test_sigterm_ends_open_live_streams_and_the_server_exits_promptly(project: Path) -> None:
    import threading

    port = free_port()
    proc, _line = start(project, "--http", f"127.0.0.1:{port}")
    ended = threading.Event()
    opened = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", f"http://127.0.0.1:{port}/api/v1/events", timeout=BOUND_S) as response:
            opened.set()
            for _ in response.iter_lines():
                pass
        ended.set()

    try:
        deadline = time.monotonic() + BOUND_S
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        reader = threading.Thread(target=listen, daemon=True)
        reader.start()
        assert opened.wait(BOUND_S)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=BOUND_S) == 0
        assert time.monotonic() - started < 8  # the stream did not hold the stop for the full grace period
        assert ended.wait(BOUND_S)
        reader.join(timeout=BOUND_S)
    finally:
        stop(proc)
