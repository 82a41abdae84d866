"""Helpers of the memory-store tests: korg-recall as a subprocess or in process, git projects,
and looking at a store's bytes from outside."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from _sqlite import connect

from korg_bridge.recall.cli import main

SUBPROCESS_BOUND = 60.0
"""Seconds one korg-recall child may take: far above any memory call."""


def korg_recall() -> list[str]:
    """The installed console script (what a user and the bridge run), else the module."""
    found = shutil.which("korg-recall", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "korg_bridge.recall.cli"]


def run(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = SUBPROCESS_BOUND
) -> subprocess.CompletedProcess[str]:
    """``korg-recall ARGS`` as a child process (stdin /dev/null, as under the bridge)."""
    return subprocess.run(
        [*korg_recall(), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON result of a successful call (and nothing on stderr)."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    value: dict[str, Any] = json.loads(proc.stdout)
    return value


def failed(proc: subprocess.CompletedProcess[str], code: int, phrase: str) -> str:
    """The one-line error of a failed call, after checking its exit code and the phrase it names."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("korg-recall: error: "), proc.stderr
    assert phrase in lines[0], lines[0]
    return lines[0]


def call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``korg-recall ARGV`` in this process: (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def answer(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """The JSON result of a successful in-process call."""
    code, out, err = call(capsys, *argv)
    assert code == 0, err
    value: dict[str, Any] = json.loads(out)
    return value


def git_repo(path: Path) -> Path:
    """A git repository at ``path`` with one commit (so worktrees can be added)."""
    path.mkdir(parents=True, exist_ok=True)
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for argv in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *argv], cwd=path, env=env, check=True, timeout=30, capture_output=True)
    return path


def store_file(home: Path) -> Path:
    """The default store path for the isolated home of ``tests/conftest.py``."""
    return home / ".local" / "share" / "korg-recall" / "memory.sqlite"


def rows(store: Path, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """Rows of a query on the store, read from outside korg-recall."""
    conn = connect(store)
    try:
        return list(conn.execute(sql, tuple(params)))
    finally:
        conn.close()


def dump(store: Path) -> list[str]:
    """Every table's content (an SQL dump): two equal dumps mean nothing in the store changed."""
    conn: sqlite3.Connection = connect(store)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
