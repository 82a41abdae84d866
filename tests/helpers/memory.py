"""Helpers of the memory-store tests: git projects, and looking at a store from outside -- a SQLite
file, or a team store's tenant (:class:`PgTarget`). Running korg-recall is :mod:`tests.helpers.cli`."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import BOUND, call_recall, run_recall
from tests.helpers.cli import answer as answer
from tests.helpers.cli import failed as failed
from tests.helpers.cli import korg_recall as korg_recall
from tests.helpers.cli import ok as ok
from tests.helpers.sqlite import connect

# The names these tests used before tests/helpers/cli.py held them; kept for tests written on other
# branches meanwhile. New tests import from tests.helpers.cli.
run = run_recall
call = call_recall
SUBPROCESS_BOUND = BOUND


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
