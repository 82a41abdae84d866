"""One writer of the mirror soak (``test_memory_mirror_soak.py``): a real process that runs random
memory operations through korg-recall's own entry point, in process (a child per call would
spend the test's minute starting Python), and journals every write korg-recall acknowledged.

Run as ``python _soak_worker.py PLAN.json``. Each journal line is one acknowledged write
(``remember``, ``revise``, ``retire``, ``restore``, ``purge``, ``import``) or one hand edit of a
mirror file (``hand``: not acknowledged by anyone, so not counted as a write), with the token
its text carries so that the test can look for it afterwards.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from korg_bridge.recall.cli.app import main

_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"


def call(*argv: str) -> dict[str, Any] | None:
    """``korg-recall ARGV`` in this process: its JSON result, or None when it failed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    if code != 0:
        return None
    try:
        value: dict[str, Any] = json.loads(out.getvalue())
    except ValueError:
        return None
    return value


class Worker:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.number = int(plan["worker"])
        self.rng = random.Random(int(plan["seed"]))
        self.shared: list[str] = list(plan["shared"])
        self.export = str(plan["export"])
        self.mirror = Path(plan["mirror"])
        self.journal = open(plan["journal"], "a", encoding="utf-8")  # noqa: SIM115 - closed in run()
        self.own: dict[str, str] = {}  # id -> live | retired
        self.count = 0

    def token(self) -> str:
        self.count += 1
        return f"tok{self.number}q{self.count}z"

    def words(self, n: int) -> str:
        return " ".join(
            "".join(self.rng.choice(_CONSONANTS) + self.rng.choice(_VOWELS) for _ in range(3))
            for _ in range(n)
        )

    def text(self, token: str) -> str:
        return f"Fact {token} {self.words(6)}."

    def note(self, **entry: Any) -> None:
        self.journal.write(json.dumps(entry) + "\n")
        self.journal.flush()

    def run(self, ops: int) -> None:
        try:
            for _ in range(ops):
                self.step()
        finally:
            self.journal.close()

    def step(self) -> None:
        r = self.rng.random()
        live = [mid for mid, state in self.own.items() if state == "live"]
        retired = [mid for mid, state in self.own.items() if state == "retired"]
        if r < 0.16 or not live:
            self.remember()
        elif r < 0.36:
            self.revise(self.rng.choice(self.shared))
        elif r < 0.48:
            self.revise(self.rng.choice(live))
        elif r < 0.64:
            self.hand_edit(self.rng.choice(self.shared if self.rng.random() < 0.6 else live))
        elif r < 0.69:
            self.forget(self.rng.choice(live), "retire")
        elif r < 0.74 and retired:
            self.restore(self.rng.choice(retired))
        elif r < 0.78:
            self.forget(self.rng.choice(live + retired), "purge")
        elif r < 0.81:
            done = call("import", self.export)
            if done is not None:
                self.note(op="import")
        else:
            call("memories", "--scope", "user")

    def remember(self) -> None:
        token = self.token()
        done = call("remember", "--content", self.text(token), "--type", "note", "--scope", "user")
        if done is not None and done.get("status") == "created":
            self.own[str(done["id"])] = "live"
            self.note(op="remember", id=done["id"], version=done["version"], token=token)

    def revise(self, memory_id: str) -> None:
        token = self.token()
        argv = ["revise", "--id", memory_id, "--content", self.text(token)]
        if self.rng.random() < 0.5:
            read = call("memories", "--ids", memory_id, "--scope", "user")
            if read is not None:
                argv += ["--expected-version", str(read["memories"][0]["version"])]
        done = call(*argv)
        if done is not None and done.get("status") == "revised":
            if memory_id in self.own:
                self.own[memory_id] = "live"
            self.note(op="revise", id=memory_id, version=done["version"], token=token)

    def hand_edit(self, memory_id: str) -> None:
        """What a person's editor does: rewrite the file in place, adding a sentence (the file
        always grows, so even an edit landing within the clock tick of korg-recall's own write
        changes what a scan compares)."""
        found = list(self.mirror.glob(f"user/*--{memory_id}.md"))
        if not found:
            return
        token = self.token()
        try:
            text = found[0].read_text(encoding="utf-8")
            fd = os.open(found[0], os.O_WRONLY | os.O_TRUNC)
        except OSError:
            return  # renamed or removed meanwhile, as an editor would find it
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text.rstrip("\n") + f" Edited {token} {self.words(2)}.\n")
        self.note(op="hand", id=memory_id, token=token)

    def forget(self, memory_id: str, mode: str) -> None:
        done = call("forget", "--id", memory_id, "--mode", mode)
        if done is not None and done.get("status") == f"{mode}d":
            self.own[memory_id] = "retired" if mode == "retire" else "purged"
            self.note(op=mode, id=memory_id)

    def restore(self, memory_id: str) -> None:
        done = call("restore", "--id", memory_id)
        if done is not None and done.get("status") == "restored":
            self.own[memory_id] = "live"
            self.note(op="restore", id=memory_id, version=done["version"])


if __name__ == "__main__":
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    Worker(plan).run(int(plan["ops"]))
