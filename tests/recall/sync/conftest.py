"""Two machines (two HOMEs, two stores) and a remote: a bare git repository or a plain folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.memory import run


@dataclass
class Machine:
    """One machine: its own HOME (store, mirror, sync state), korg-recall run as a child."""

    name: str
    home: Path
    cwd: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "KORG_RECALL_ACTOR": f"ann-on-{self.name}",
        }

    @property
    def data(self) -> Path:
        return self.home / ".local" / "share" / "korg-recall"

    @property
    def store(self) -> Path:
        return self.data / "memory.sqlite"

    def run(self, *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return run(*args, cwd=self.cwd, env={**self.env, **(extra or {})})

    def ok(self, *args: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
        proc = self.run(*args, extra=extra)
        assert proc.returncode == 0, (proc.returncode, proc.stderr)
        value: dict[str, Any] = json.loads(proc.stdout)
        return value

    def remember(self, text: str, **flags: str) -> str:
        argv = ["remember", "--content", text, "--type", "note", "--scope", "user", "--json"]
        for name, value in flags.items():
            argv += [f"--{name.replace('_', '-')}", value]
        return str(self.ok(*argv)["id"])

    def sync(self) -> dict[str, Any]:
        return self.ok("sync")

    def read(self, memory_id: str) -> dict[str, Any]:
        found = self.ok("memories", "--ids", memory_id, "--scope", "user", "--json")
        return dict(found["memories"][0]) if "memories" in found else found


def _machine(tmp_path: Path, name: str) -> Machine:
    home = tmp_path / name
    work = home / "work"
    work.mkdir(parents=True)
    return Machine(name, home, work)


@pytest.fixture
def bare_repo(tmp_path: Path) -> str:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True, timeout=30, capture_output=True)
    return str(path)


@pytest.fixture
def folder_remote(tmp_path: Path) -> str:
    path = tmp_path / "shared-folder"
    path.mkdir()
    return str(path)


@pytest.fixture(params=["git", "folder"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "git":
        return str(request.getfixturevalue("bare_repo"))
    return str(request.getfixturevalue("folder_remote"))


@pytest.fixture
def pair(tmp_path: Path, remote: str) -> tuple[Machine, Machine]:
    """Machines A and B set up on ``remote`` (B joined with A's key)."""
    a, b = _machine(tmp_path, "a"), _machine(tmp_path, "b")
    key = a.ok("sync", "init", "--remote", remote)["join_key"]
    b.ok("sync", "init", "--remote", remote, "--join", key)
    return a, b


def all_git_objects(repo: str) -> bytes:
    """Every object of a git repository, contents included (``cat-file --batch-all-objects``)."""
    done = subprocess.run(
        ["git", "-C", repo, "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
        timeout=60,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    return done.stdout
