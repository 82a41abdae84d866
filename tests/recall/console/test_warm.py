"""A long-lived process keeps its store open (korg-recall serve): opening the same store again in
that process must not drop the locks its open connection holds, or another process's last
connection deletes the WAL under it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from korg_bridge.errors import ConfigError
from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore

CHILD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("INSERT INTO meta (key, value) VALUES ('from-child', 'yes')")
conn.close()  # the last connection, as far as it knows, checkpoints and deletes the WAL
"""


def test_opening_a_store_again_keeps_the_first_connections_locks(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    kept = SqliteStore(path)  # migrated, WAL mode: holds a shared lock on the file while open
    try:
        with kept.reading() as tx:
            tx.execute("SELECT count(*) FROM memory").fetchone()
        SqliteStore(path).close()  # a second open in this process (the console's health page does)
        wal = Path(f"{path}-wal")
        subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True, timeout=60)
        assert wal.exists(), "the child deleted the WAL: this process's lock on the store was lost"
        with kept.reading() as tx:
            assert tx.execute("SELECT value FROM meta WHERE key = 'from-child'").fetchone()[0] == "yes"
    finally:
        kept.close()


def test_a_file_that_is_not_sqlite_is_still_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    path.write_text("these are my notes, not a database\n" * 10)
    before = path.read_bytes()
    with pytest.raises(ConfigError, match="is not a SQLite database"):
        SqliteStore(path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["memory.sqlite"]


def test_opening_the_history_index_again_keeps_the_first_connections_locks(tmp_path: Path) -> None:
    from korg_bridge.recall.history.index import Index

    path = tmp_path / "index.sqlite"
    kept = Index(path)  # a tenant's index in korg-recall serve
    try:
        kept.read(lambda conn: conn.execute("SELECT count(*) FROM events").fetchone())
        Index(path).close()  # another tenant's, in the same process
        child = CHILD.replace(
            "INTO meta (key, value) VALUES ('from-child', 'yes')",
            "OR REPLACE INTO meta (key, value) VALUES ('from-child', 'yes')",
        )
        subprocess.run([sys.executable, "-c", child, str(path)], check=True, timeout=60)
        assert Path(f"{path}-wal").exists(), (
            "the child deleted the WAL: this process's lock on the index was lost"
        )
        found = kept.read(
            lambda conn: conn.execute("SELECT value FROM meta WHERE key = 'from-child'").fetchone()
        )
        assert found[0] == "yes"
    finally:
        kept.close()
