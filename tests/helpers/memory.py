"""Helpers of the memory-store tests: korg-recall as a subprocess or in process, git projects,
and looking at a store from outside -- a SQLite file, or a team store's tenant (:class:`PgTarget`)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.cli.app import main
from tests.helpers.sqlite import connect

SUBPROCESS_BOUND = 60.0
"""Seconds one korg-recall child may take: far above any memory call."""


def korg_recall() -> list[str]:
    """The installed console script (what a user and the bridge run), else the module."""
    found = shutil.which("korg-recall", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "korg_bridge.recall.cli.app"]


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


@dataclass(frozen=True)
class PgTarget:
    """A team store as a test sees it: the application role's URL and the test's own tenant."""

    url: str
    tenant: str
    roles: Any

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` (``?`` placeholders) as the application role, in this tenant."""
        import psycopg

        with psycopg.connect(self.url, connect_timeout=10) as conn:
            conn.execute(
                "SELECT set_config('korg.tenant', %s, true), set_config('search_path', 'korg_recall, public', true)",
                (self.tenant,),
            )
            found = [tuple(row) for row in conn.execute(sql.replace("?", "%s"), tuple(params) or None)]  # type: ignore[arg-type]
            conn.rollback()
        return found

    def as_owner(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run ``sql`` in this tenant as the tables' owner (what the application role may not do);
        the number of rows it changed."""
        import psycopg

        with psycopg.connect(self.roles.owner_url(), connect_timeout=10) as conn:
            conn.execute(
                "SELECT set_config('korg.tenant', %s, true), set_config('search_path', 'korg_recall, public', true)",
                (self.tenant,),
            )
            changed = conn.execute(sql.replace("?", "%s"), tuple(params) or None).rowcount  # type: ignore[arg-type]
        return changed

    def exists(self) -> bool:
        """Whether anything was ever written for this tenant (the team store's "a store exists")."""
        return bool(
            self.rows("SELECT (SELECT count(*) FROM memory) + (SELECT count(*) FROM memory_ops)")[0][0]
        )


def rows(store: Path | PgTarget, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """Rows of a query on the store, read from outside korg-recall (the same SQL on both backends)."""
    if isinstance(store, PgTarget):
        return store.rows(sql, params)
    conn = connect(store)
    try:
        return list(conn.execute(sql, tuple(params)))
    finally:
        conn.close()


TENANT_TABLES = ("memory", "memory_links", "memory_vectors", "memory_ops")


def dump(store: Path | PgTarget) -> list[str]:
    """Every table's content (an SQL dump, or the tenant's rows): equal dumps mean nothing changed."""
    if isinstance(store, PgTarget):
        return [
            f"{table}: {row!r}"
            for table in TENANT_TABLES
            for row in store.rows(f"SELECT * FROM {table} ORDER BY 1, 2")
        ]
    conn: sqlite3.Connection = connect(store)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def log_entries(store: Path | PgTarget) -> list[dict[str, Any]]:
    """The operation log's entries, oldest first: ``memory-ops.jsonl`` beside a SQLite store, the
    tenant's rows of ``memory_ops`` in a team store."""
    if isinstance(store, PgTarget):
        return [json.loads(text) for (text,) in store.rows("SELECT entry FROM memory_ops ORDER BY seq_id")]
    log = store.parent / "memory-ops.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def exists(store: Path | PgTarget) -> bool:
    """Whether the store exists: the SQLite file, or anything written for the team store's tenant."""
    return store.exists()


def holds(store: Path | PgTarget, needle: str) -> bool:
    """Whether ``needle`` is anywhere in the store: a SQLite file's (and its WAL's) bytes, or any
    column of any row of the tenant (the log's entries included)."""
    if isinstance(store, PgTarget):
        found = store.rows(
            "SELECT (SELECT count(*) FROM memory t WHERE strpos(t::text, ?) > 0) "
            "+ (SELECT count(*) FROM memory_links t WHERE strpos(t::text, ?) > 0) "
            "+ (SELECT count(*) FROM memory_ops t WHERE strpos(t::text, ?) > 0)",
            (needle, needle, needle),
        )
        return bool(found[0][0])
    data = store.read_bytes() if store.exists() else b""
    wal = Path(f"{store}-wal")
    data += wal.read_bytes() if wal.exists() else b""
    return needle.encode("utf-8") in data


def opened(store: Path | PgTarget) -> Any:
    """The store, opened in this process as korg-recall opens it."""
    if isinstance(store, PgTarget):
        from korg_bridge.recall.memory.backend.pg.store import PgStore

        return PgStore.open(store.url, {"KORG_RECALL_TENANT": store.tenant})
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore

    return SqliteStore(store)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
