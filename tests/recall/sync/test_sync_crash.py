"""kill -9 at any point of a sync, then sync again: no operation lost, none applied twice."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

from tests.helpers.memory import korg_recall
from tests.recall.sync.conftest import Machine
from tests.recall.sync.helpers import canonical, remember_many


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _kill_sync_after(machine: Machine, delay: float) -> None:
    """Start ``korg-recall sync`` on ``machine`` and kill -9 it after ``delay`` seconds; a git it
    started is left to finish on its own (as after a real kill), and waited for."""
    proc = subprocess.Popen(
        [*korg_recall(), "sync"],
        cwd=machine.cwd,
        env={**os.environ, **machine.env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        children = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 60
        while any(_alive(child) for child in children) and time.monotonic() < deadline:
            time.sleep(0.05)


def test_kill_9_at_random_points_of_syncs_loses_nothing_and_applies_nothing_twice(
    pair: tuple[Machine, Machine],
) -> None:
    a, b = pair
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    first = remember_many(
        a.env, a.store, [f"fact {n} about the build of component {n * 7}" for n in range(80)]
    )
    a.ok("forget", "--id", first[0], "--mode", "retire", "--json")
    mine = remember_many(b.env, b.store, [f"note {n} written on b about service {n * 3}" for n in range(20)])
    for round_ in range(8):
        victim = (b, a)[round_ % 2]
        _kill_sync_after(victim, rng.uniform(0.05, 2.5))
        if round_ == 3:
            remember_many(a.env, a.store, [f"late fact {n} of round three" for n in range(10)])
            a.sync()
            b.sync()
            b.ok("revise", "--id", first[5], "--content", "fact 5, revised on b mid-way", "--json")
    for machine in (a, b, a, b):
        machine.sync()
    exported_a, exported_b = canonical(a.store), canonical(b.store)
    assert exported_a == exported_b, f"seed {seed}"
    ids = {row["id"] for row in exported_a}
    assert set(first) | set(mine) <= ids, f"seed {seed}"
    assert len(ids) == 80 + 20 + 10, f"seed {seed}"
    assert a.read(first[5])["body"] == "fact 5, revised on b mid-way"
    assert b.read(first[0])["state"] == "retired"
