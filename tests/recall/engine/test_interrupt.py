"""Ctrl-C reaches the call an engine runs as it reaches a fresh process: a person at a terminal
who interrupts a prompt sees the same exit and nothing is done."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.helpers.engine import Running, calls, korg_recall
from tests.recall.engine.conftest import BOUND, off, run


def _interrupt_at_the_prompt(
    env: dict[str, str], project: Path, engine: Running | None = None
) -> tuple[int, str]:
    """``forget --query walrus`` at a terminal, interrupted while it asks; (exit code, what the
    terminal showed)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*korg_recall(), "forget", "--query", "walrus"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=project,
        )
        os.close(slave)
        slave = -1
        shown = b""
        deadline = time.monotonic() + BOUND
        while b"[y/N]" not in shown:
            left = deadline - time.monotonic()
            assert left > 0, f"no prompt within {BOUND} s: {shown!r}"
            ready, _, _ = select.select([master], [], [], left)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the terminal closed: the process ended without asking
                    break
                if not chunk:
                    break
                shown += chunk
        assert b"[y/N]" in shown, shown
        if engine is not None:  # the prompt is the engine's child's, not a fallback's
            assert calls(engine.pid), "no call of the engine's is running"
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C at the terminal sends the command
        code = proc.wait(BOUND)
        try:
            while select.select([master], [], [], 0.2)[0]:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                shown += chunk
        except OSError:
            pass
        return code, shown.decode("utf-8", "replace")
    finally:
        os.close(master)
        if slave != -1:
            os.close(slave)


def test_ctrl_c_at_a_prompt_ends_the_call_as_it_ends_a_fresh_process(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    made = run(
        env, "remember", "--content", "the walrus lives in the north tank", "--type", "user", cwd=project
    )
    assert made.returncode == 0, made.stderr
    alone = _interrupt_at_the_prompt(off(env), project)
    served = _interrupt_at_the_prompt(env, project, engine)
    assert served[0] == alone[0] != 0, (alone, served)
    listed = json.loads(run(env, "memories", "--json", cwd=project).stdout)
    assert "walrus" in json.dumps(listed), "an interrupted forget must change nothing"
    stats = json.loads(run(env, "stats", "--json", cwd=project).stdout)["engine"]
    assert stats["answered"] is True
