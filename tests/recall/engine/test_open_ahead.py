"""A spare opens the index and the store before its call arrives, and the call takes those
connections -- only while the path still names the file they were opened on, and only when
opening would change and say nothing; otherwise the call opens as a fresh process does."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from korg_bridge.recall import opened
from korg_bridge.recall.engine.ahead import open_ahead
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
from korg_bridge.recall.paths import index_file
from tests.helpers.engine import spares, start
from tests.recall.engine.conftest import off, run, wait_for, wreck_schema


def made(env: dict[str, str], project: Path, text: str) -> tuple[Path, Path]:
    """A store holding ``text`` and an index, made by a process without an engine."""
    done = run(off(env), "remember", "--content", text, "--type", "project", cwd=project)
    assert done.returncode == 0, done.stderr
    assert run(off(env), "recall", "--query", "deploy", cwd=project).returncode == 0
    return Path(env["XDG_DATA_HOME"]) / "korg-recall" / "memory.sqlite", Path(index_file(env))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _nothing_left_offered() -> Iterator[None]:
    """What a test opened ahead in this process goes with the test."""
    yield
    opened.clear()


def test_a_call_takes_what_was_opened_for_its_file_once_and_never_for_a_file_replaced_since(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    store, index = made(env, project, "the deploy uses blue green")
    open_ahead(str(index), str(store))
    ahead = opened._OPENED[os.path.abspath(store)].conn
    with contextlib.closing(SqliteStore(store)) as first:
        assert first.conn is ahead  # taken
    with contextlib.closing(SqliteStore(store)) as second:
        assert second.conn is not ahead  # once
    # The index replaced at its path since the spare opened it: the call opens the new file,
    # and the old one's connection is let go of, not closed.
    taken = opened._OPENED[os.path.abspath(index)].conn
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(index, copy)
    os.replace(copy, index)
    fresh = Index(index)
    try:
        assert fresh._conn is not taken
        assert taken in opened._LET_GO and taken.execute("SELECT 1").fetchone() == (1,)
    finally:
        fresh.close()
    # Its schema changed since (another korg-recall migrated it): opened anew, so the call's own
    # checks see the schema (a newer one is refused there).
    open_ahead(str(index), str(store))
    with contextlib.closing(sqlite3.connect(store)) as other:
        other.execute("CREATE TABLE from_a_newer_version (x)")
    assert opened.take(store) is None
    # A file removed since: nothing is taken either.
    open_ahead(str(index), str(store))
    os.unlink(store)
    assert opened.take(store) is None


def test_a_store_replaced_at_its_path_keeps_its_log_when_the_call_refuses_the_old_connection(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """SQLite's last close of a file deletes its log by name: closing the connection to the file
    that was at the path would risk the new file's log, with commits not yet in the file (the
    SQLite here notices a moved file and keeps the log; the connection is let go of either way,
    as the keeper does)."""
    store, index = made(env, project, "the deploy uses blue green")
    open_ahead(str(index), str(store))
    aside = tmp_path / "aside.sqlite"
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{store}{suffix}", f"{aside}{suffix}")
    writer = sqlite3.connect(store, isolation_level=None)  # a new file, its commits in its log
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("CREATE TABLE kept (body TEXT)")
    writer.execute("INSERT INTO kept VALUES ('written after the swap')")
    assert opened.take(store) is None
    opened.clear()
    assert Path(f"{store}-wal").stat().st_size > 0
    writer.close()
    with contextlib.closing(sqlite3.connect(store)) as reader:
        assert reader.execute("SELECT body FROM kept").fetchall() == [("written after the swap",)]


def test_nothing_is_opened_ahead_that_the_calls_own_open_would_change_or_refuse(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    store, index = made(env, project, "the deploy uses blue green")
    # Not in WAL mode: the call's open switches it (a write), so the spare does not open it.
    with contextlib.closing(sqlite3.connect(store, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    before = digest(store)
    open_ahead(str(index), str(store))
    assert os.path.abspath(store) not in opened._OPENED
    assert os.path.abspath(index) in opened._OPENED
    assert digest(store) == before and not Path(f"{store}-wal").exists()
    opened.clear()
    # Another program's file, a missing file, a team store's URL: nothing, and no error.
    foreign = tmp_path / "foreign.sqlite"
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = digest(foreign)
    open_ahead(str(foreign), str(tmp_path / "missing.sqlite"))
    open_ahead(str(tmp_path / "absent.sqlite"), "postgresql://localhost/korg")
    assert not opened._OPENED
    assert digest(foreign) == before and not (tmp_path / "missing.sqlite").exists()


def test_an_engines_spare_holds_both_files_and_a_store_swapped_under_it_is_read_anew(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    store, index = made(env, project, "the deploy uses blue green")
    other_env = {**env, "XDG_DATA_HOME": str(tmp_path / "other-data")}
    other, _ = made(other_env, project, "the deploy uses canary releases")
    engine = start(env, cwd=project)
    try:

        def holding() -> bool:
            found = spares(engine.pid)
            if len(found) != 1:
                return False
            with contextlib.suppress(OSError):
                fds = os.listdir(f"/proc/{found[0]}/fd")
                held = {os.path.realpath(f"/proc/{found[0]}/fd/{fd}") for fd in fds}
                return {str(store), str(index)} <= held
            return False

        assert wait_for(holding)
        served = run(env, "memories", "--json", cwd=project)
        assert "blue green" in served.stdout, served.stderr
        assert wait_for(holding)
        aside = tmp_path / "aside.sqlite"
        for suffix in ("", "-wal", "-shm"):  # a restore swaps the file with its log, as a person would
            with contextlib.suppress(FileNotFoundError):
                os.rename(f"{store}{suffix}", f"{aside}{suffix}")
        shutil.copyfile(other, store)  # closed by its last writer: the whole store is in the file
        served = run(env, "memories", "--json", cwd=project)
        assert served.returncode == 0, served.stderr
        # The new store, and the old one's Markdown file taken in as a person's edit (it is not
        # among the new store's files), as a fresh process takes it in.
        shown = "\n".join(json.loads(served.stdout)["lines"])
        assert "canary" in shown and "blue green" in shown, shown
        served = run(env, "memories", "--json", cwd=project)
        alone = run(off(env), "memories", "--json", cwd=project)
        assert (served.returncode, served.stdout, served.stderr) == (
            alone.returncode,
            alone.stdout,
            alone.stderr,
        )
    finally:
        assert engine.stop() == 0


def test_a_file_damaged_after_it_was_opened_ahead_is_never_taken_and_its_connection_is_closed(
    env: dict[str, str], project: Path
) -> None:
    """The connection holds the schema it read before the damage: a call taking it would answer
    where a fresh process, reading the schema anew, reports the file corrupt."""
    store, index = made(env, project, "the deploy uses blue green")
    hour_ago = time.time() - 3600
    os.utime(store, (hour_ago, hour_ago))  # written long ago: an unchanged time proves no write since
    open_ahead(str(index), str(store))
    offered = opened._OPENED[os.path.abspath(store)]
    assert offered.settled
    opened.refresh()
    assert opened._OPENED[os.path.abspath(store)] is offered  # nothing written since: kept as it was
    wreck_schema(store)
    before = digest(store)
    assert opened.take(store) is None
    assert offered.conn not in opened._LET_GO  # the same file: closed, so no log stays beside it
    with pytest.raises(sqlite3.ProgrammingError):
        offered.conn.execute("SELECT 1")
    assert digest(store) == before


def test_a_file_swapped_in_while_it_was_opened_ahead_is_never_offered_for_the_new_one(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """A connection cannot say which file it has open: the file at the path is looked at before
    the open and again after it. A swap in between (a restore) left the connection to the old file
    recorded as the new one's, and a call answered from the old store (seen once in six runs of
    the engine test above)."""
    store, _index = made(env, project, "the deploy uses blue green")
    other_env = {**env, "XDG_DATA_HOME": str(tmp_path / "other-data")}
    other, _ = made(other_env, project, "the deploy uses canary releases")
    before = os.stat(store)
    old = SqliteStore(store).conn  # the open, then the swap before the offer's look
    aside = tmp_path / "aside.sqlite"
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{store}{suffix}", f"{aside}{suffix}")
    shutil.copyfile(other, store)
    opened.offer(str(store), old, lambda: True, (before.st_dev, before.st_ino))
    assert opened.take(store) is None
    assert old in opened._LET_GO  # not closed: its file is no longer at the path
    with contextlib.closing(SqliteStore(store)) as now:
        titles = [row[0] for row in now.conn.execute("SELECT title FROM memory")]
    assert titles == ["the deploy uses canary releases"]


def test_a_spare_looks_again_at_a_file_written_after_its_look(env: dict[str, str], project: Path) -> None:
    """A write within the kernel clock's tick may leave a file's time as it was: a look right after
    a write proves nothing until it is made again (as a waiting spare does)."""
    store, index = made(env, project, "the deploy uses blue green")
    os.utime(store)  # as if just written (a checkpoint's time)
    open_ahead(str(index), str(store))
    assert not opened._OPENED[os.path.abspath(store)].settled
    time.sleep(opened.COARSE_S)
    opened.refresh()
    assert opened._OPENED[os.path.abspath(store)].settled
    wreck_schema(store)
    opened.refresh()  # written since: looked at again, and no longer offered
    assert os.path.abspath(store) not in opened._OPENED
    assert opened.take(store) is None
