"""The index never touches a file that is not its own.

``KORG_RECALL_INDEX`` can be mis-set to any file. Only a SQLite database carrying
korg-recall's application id (or, written before it, our ``_migrations`` table) may be
moved aside and rebuilt, and never onto an earlier backup; anything else is a config error
(exit 3) and stays byte for byte, inode for inode, as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from korg_bridge.errors import ConfigError
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.migrations import APPLICATION_ID
from korg_bridge.recall.history.ownership import move_aside
from tests.helpers.cli import run_recall
from tests.helpers.paths import REPO

SUBPROCESS_BOUND = 60.0


def _fingerprint(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_ino, st.st_size


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p != path)


def _ledger(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "s.jsonl"
    lines = [
        {"seq": n, "source_agent": "agent:t", "tool_name": "user_prompt", "args": {"prompt": f"walrus {n}"}}
        for n in range(1, 30)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _build(path: Path, ledgers: Path) -> None:
    with Index(path) as built:
        built.refresh([ledgers])


def _recall(index: Path, ledgers: Path) -> subprocess.CompletedProcess[str]:
    env = {"KORG_RECALL_INDEX": str(index), "KORG_RECALL_LEDGER": str(ledgers)}
    return run_recall(
        "recall",
        "--query",
        "walrus",
        env=env,
        drop=["KORG_RECALL_MODEL_DIR"],
        cwd=REPO,
        timeout=SUBPROCESS_BOUND,
    )


def _assert_refused(exc: ConfigError, path: Path) -> None:
    assert exc.exit_code == 3
    assert str(path) in exc.message
    assert "not a korg-recall index" in exc.message
    assert "Set KORG_RECALL_INDEX to another path" in exc.message


# --- files that are not ours ---------------------------------------------------------------------


def test_a_users_ledger_at_the_index_path_is_refused_twice_and_never_changes(tmp_path: Path) -> None:
    ledgers = tmp_path / "ledgers"
    users_file = _ledger(ledgers)
    before = _fingerprint(users_file)
    for _ in range(2):  # the second call once overwrote the first call's .broken
        done = _recall(users_file, ledgers)
        assert done.returncode == 3, done.stderr
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1
        assert f"{users_file} holds a file that is not a korg-recall index" in done.stderr
        assert "KORG_RECALL_INDEX" in done.stderr
    assert _fingerprint(users_file) == before
    assert _siblings(users_file) == []


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_programs_sqlite_database_is_refused_and_untouched(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as foreign:
        foreign.execute(f"PRAGMA journal_mode = {journal}")
        foreign.execute("CREATE TABLE users (name TEXT)")
        foreign.execute("INSERT INTO users VALUES ('ada')")
        foreign.commit()
    before = _fingerprint(path)
    with pytest.raises(ConfigError) as info:
        Index(path)
    _assert_refused(info.value, path)
    assert "another program" in info.value.message
    assert _fingerprint(path) == before
    assert _siblings(path) == []  # not even a -wal or -shm was created beside it


def test_a_database_with_another_application_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as other:
        other.execute("PRAGMA application_id = 42")
        other.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        other.commit()
    before = _fingerprint(path)
    with pytest.raises(ConfigError) as info:
        Index(path)
    _assert_refused(info.value, path)
    assert "0x2a" in info.value.message
    assert _fingerprint(path) == before


def test_a_foreign_migrations_table_is_not_taken_for_ours(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as foreign:
        foreign.execute("CREATE TABLE _migrations (version INTEGER)")  # another framework's bookkeeping
        foreign.commit()
    before = _fingerprint(path)
    with pytest.raises(ConfigError) as info:
        Index(path)
    _assert_refused(info.value, path)
    assert _fingerprint(path) == before


@pytest.mark.parametrize("kind", ["directory", "device"])
def test_a_directory_or_a_device_at_the_index_path_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "index.sqlite" if kind == "directory" else Path(os.devnull)
    if kind == "directory":
        path.mkdir()
    with pytest.raises(ConfigError) as info:
        Index(path)
    _assert_refused(info.value, path)
    assert f"a {kind}" in info.value.message


# --- our own databases ---------------------------------------------------------------------------


def test_a_new_index_carries_korg_recalls_application_id_in_its_header(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    _build(path, tmp_path / "none")
    header = path.read_bytes()[:100]  # closed: the WAL is checkpointed into the file
    assert int.from_bytes(header[68:72], "big") == APPLICATION_ID
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)


def test_an_index_from_before_the_application_id_is_recognised_and_stamped(tmp_path: Path) -> None:
    ledgers = tmp_path / "ledgers"
    _ledger(ledgers)
    path = tmp_path / "index.sqlite"
    _build(path, ledgers)
    with contextlib.closing(sqlite3.connect(path)) as conn:  # as the previous version left it
        conn.execute("PRAGMA application_id = 0")
        conn.execute("DELETE FROM _migrations WHERE name = 'm006_application_id'")
        conn.commit()
    with Index(path) as index:
        assert index.stats()["events"] == 29
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)


def test_an_old_index_of_a_newer_version_is_moved_aside_by_its_migrations_table(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "index.sqlite"
    _build(path, tmp_path / "none")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA application_id = 0")
        conn.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_future', 'later')")
        conn.commit()
    with caplog.at_level(logging.WARNING, logger="korg_bridge.recall.history.index"), Index(path):
        pass
    assert "moving it aside" in caplog.text
    [backup] = [name for name in _siblings(path) if name.startswith("index.sqlite.broken-")]
    with contextlib.closing(sqlite3.connect(tmp_path / backup)) as kept:
        assert ("m999_future",) in kept.execute("SELECT name FROM _migrations").fetchall()


def test_a_corrupt_index_of_ours_is_kept_aside_whole_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledgers = tmp_path / "ledgers"
    _ledger(ledgers)
    path = tmp_path / "index.sqlite"
    _build(path, ledgers)
    ruined = path.read_bytes()[:4096] + b"\xde\xad\xbe\xef" * 4096  # its header page still says ours
    path.write_bytes(ruined)
    with caplog.at_level(logging.WARNING, logger="korg_bridge.recall.history.index"), Index(path) as rebuilt:
        rebuilt.refresh([ledgers])
        assert rebuilt.stats()["events"] == 29
    backups = [name for name in _siblings(path) if name.startswith("index.sqlite.broken-")]
    assert len(backups) == 1
    assert (tmp_path / backups[0]).read_bytes() == ruined


def test_moving_aside_never_overwrites_an_earlier_backup(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    _build(path, tmp_path / "none")
    # Backups already taken this second and the next ones (a slow machine may cross a second).
    now = time.time()
    decoys = {}
    for second in range(60):
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now + second))
        for suffix in ("", "-1"):
            decoy = tmp_path / f"index.sqlite.broken-{stamp}{suffix}"
            decoy.write_text(f"earlier backup {stamp}{suffix}")
            decoys[decoy] = decoy.read_text()
    st = path.stat()
    target = move_aside(path, (st.st_dev, st.st_ino))
    assert target.name.endswith("-2")
    assert not path.exists()
    assert all(decoy.read_text() == text for decoy, text in decoys.items())
    with contextlib.closing(sqlite3.connect(target)) as kept:
        assert kept.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)


def test_a_file_swapped_in_after_the_check_is_not_moved(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    _build(path, tmp_path / "none")
    st = path.stat()
    path.rename(tmp_path / "elsewhere.sqlite")  # still alive: its inode cannot be reused by the new file
    path.write_text("a user's notes, written at the path meanwhile\n")
    with pytest.raises(ConfigError) as info:
        move_aside(path, (st.st_dev, st.st_ino))
    _assert_refused(info.value, path)
    assert path.read_text() == "a user's notes, written at the path meanwhile\n"
    assert _siblings(path) == ["elsewhere.sqlite"]
