"""The engine's keeper holds the index and the store open between calls, so a call's close is not
the last one (no checkpoint, no new log for the next call); it holds only korg-recall's own files,
lets go of a file replaced at its path without the close that would delete the new file's log,
and at the engine's end closes what it holds -- the logs checkpointed and gone, as before."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import struct
from pathlib import Path

from korg_bridge.recall.engine.keeper import Keeper
from korg_bridge.recall.engine.server import KEEPER_NAME
from korg_bridge.recall.paths import index_file
from tests.helpers.engine import Running, children, start
from tests.helpers.memory import holds
from tests.recall.engine.conftest import answered, off, run, wait_for, wreck_schema


def made_store(env: dict[str, str], project: Path) -> Path:
    done = run(
        off(env), "remember", "--content", "the deploy uses blue green", "--type", "project", cwd=project
    )
    assert done.returncode == 0, done.stderr
    return Path(env["XDG_DATA_HOME"]) / "korg-recall" / "memory.sqlite"


def not_checkpointed(path: Path) -> int:
    """Frames of ``path``'s log not yet copied into the file, from its shared-memory index as
    SQLite lays it out (``mxFrame`` of the header, ``nBackfill`` after its two copies) -- read,
    not asked: a connection asking would checkpoint itself."""
    shm = Path(f"{path}-shm").read_bytes()
    frames, done = struct.unpack_from("=I", shm, 16)[0], struct.unpack_from("=I", shm, 96)[0]
    return int(frames - done)


def test_a_kept_file_outlives_a_calls_close_and_is_checkpointed_then_released(
    env: dict[str, str], project: Path
) -> None:
    store = made_store(env, project)
    keeper = Keeper([(str(store), "store")])
    keeper.tend()
    assert str(store) in keeper.held
    with contextlib.closing(sqlite3.connect(store)) as call:  # a call's own connection
        call.execute("UPDATE memory SET use_count = use_count + 1")
        call.commit()
    log = Path(f"{store}-wal")
    assert log.exists()  # the call's close was not the last: no checkpoint, the log stays
    assert not_checkpointed(store) > 0
    keeper.tend()
    assert log.stat().st_size == 0  # every frame of the log is in the file, and the log emptied
    keeper.release()
    assert not keeper.held
    assert not log.exists() and not Path(f"{store}-shm").exists()


def test_a_file_that_is_not_korg_recalls_is_never_held(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.sqlite"
    writer = sqlite3.connect(theirs, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE notes (body TEXT)")
    writer.execute("INSERT INTO notes VALUES ('theirs')")
    log = Path(f"{theirs}-wal")
    before = log.read_bytes()
    keeper = Keeper([(str(theirs), "store"), (str(theirs), "index")])
    keeper.tend()
    assert not keeper.held
    keeper.release()
    assert log.read_bytes() == before
    writer.close()


def test_a_file_replaced_at_its_path_is_let_go_without_deleting_the_new_ones_log(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    """SQLite deletes a log by name at the last close: the keeper's close of the old file would
    take the new file's log, with writes not yet in the new file."""
    store = made_store(env, project)
    keeper = Keeper([(str(store), "store")])
    keeper.tend()
    aside = tmp_path / "aside.sqlite"
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{store}{suffix}", f"{aside}{suffix}")
    writer = sqlite3.connect(store, isolation_level=None)  # a new file at the path, its writes in its log
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE kept (body TEXT)")
    writer.execute("INSERT INTO kept VALUES ('written after the swap')")
    keeper.tend()
    assert not keeper.held and len(keeper.abandoned) == 1
    keeper.release()
    assert Path(f"{store}-wal").exists()
    writer.close()
    with contextlib.closing(sqlite3.connect(store)) as reader:
        assert reader.execute("SELECT body FROM kept").fetchall() == [("written after the swap",)]


def test_a_held_file_wrecked_in_place_is_let_go_and_its_log_removed_untouched(
    env: dict[str, str], project: Path
) -> None:
    """A fresh process leaves nothing beside a store it cannot read; the keeper, holding it from
    before the damage, must not leave the log and its index there either, nor write the file."""
    store = made_store(env, project)
    keeper = Keeper([(str(store), "store")])
    keeper.tend()
    assert str(store) in keeper.held and Path(f"{store}-wal").stat().st_size == 0
    wreck_schema(store)
    before = store.read_bytes()
    keeper.tend()
    assert not keeper.held and not keeper.abandoned
    assert sorted(p.name for p in store.parent.iterdir() if p.name.startswith("memory.sqlite")) == [
        "memory.sqlite"
    ]
    assert store.read_bytes() == before
    keeper.tend()  # not taken up again: it is not provably ours
    assert not keeper.held
    keeper.release()


def test_a_held_file_wrecked_with_writes_in_its_log_is_abandoned_not_closed(
    env: dict[str, str], project: Path
) -> None:
    """A last close would copy the log into a file that is no longer provably korg-recall's."""
    store = made_store(env, project)
    keeper = Keeper([(str(store), "store")])
    keeper.tend()
    with contextlib.closing(sqlite3.connect(store)) as call:
        call.execute("UPDATE memory SET use_count = use_count + 1")
        call.commit()
    log = Path(f"{store}-wal")
    written = log.read_bytes()
    assert written
    wreck_schema(store)
    before = store.read_bytes()
    keeper.tend()
    assert not keeper.held and len(keeper.abandoned) == 1
    assert store.read_bytes() == before and log.read_bytes() == written
    keeper.release()


def test_a_held_file_checkpointed_by_a_call_is_still_held(env: dict[str, str], project: Path) -> None:
    """A call's own checkpoint writes the file too: proven ours again, held on."""
    store = made_store(env, project)
    keeper = Keeper([(str(store), "store")])
    keeper.tend()
    with contextlib.closing(sqlite3.connect(store, isolation_level=None)) as call:
        call.execute("UPDATE memory SET use_count = use_count + 1")
        call.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    keeper.tend()
    assert str(store) in keeper.held and not keeper.abandoned
    keeper.release()
    assert not Path(f"{store}-wal").exists()


def keepers(engine: Running) -> list[int]:
    return children(engine.pid, KEEPER_NAME)


def test_an_engine_keeps_its_files_between_calls_and_releases_them_when_it_stops(
    env: dict[str, str], project: Path
) -> None:
    store = made_store(env, project)
    index = Path(index_file(env))
    engine = start(env, cwd=project)
    try:
        assert wait_for(lambda: len(keepers(engine)) == 1)
        keeper = keepers(engine)[0]
        assert os.getpgid(keeper) == keeper != os.getpgid(engine.pid)
        assert answered(env, project)
        found = run(env, "recall", "--query", "deploy", "--json", cwd=project)
        assert found.returncode == 0 and "blue green" in found.stdout, found.stderr
        held = {os.path.realpath(f"/proc/{keeper}/fd/{fd}") for fd in os.listdir(f"/proc/{keeper}/fd")}
        assert {str(store), str(index)} <= held
        assert Path(f"{store}-wal").exists() and Path(f"{index}-wal").exists()  # kept between calls
        assert wait_for(lambda: Path(f"{store}-wal").stat().st_size == 0)  # checkpointed after the calls
    finally:
        assert engine.stop() == 0
    assert not keepers(engine)
    for path in (store, index):
        assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()


def test_a_store_wrecked_under_an_engine_is_refused_and_left_as_a_fresh_process_leaves_it(
    env: dict[str, str], project: Path
) -> None:
    """Found by the engine pass of test_memory_errors: when the keeper held the store from before
    the damage, its log and index stayed beside the wrecked file until the engine stopped; and a
    call could take the connection its spare opened before the damage, whose schema was read
    then, and answer where a fresh process reports the store corrupt."""
    store = made_store(env, project)
    engine = start(env, cwd=project)
    try:
        assert answered(env, project)
        assert wait_for(lambda: Path(f"{store}-wal").exists())  # held: the keeper's connection
        wreck_schema(store)
        before = store.read_bytes()
        refused = run(env, "memories", cwd=project)
        assert refused.returncode == 3 and str(store) in refused.stderr, refused.stderr
        assert wait_for(
            lambda: (
                sorted(p.name for p in store.parent.iterdir() if p.name.startswith("memory.sqlite"))
                == ["memory.sqlite"]
            ),
            timeout=10,
        )
        assert store.read_bytes() == before
    finally:
        assert engine.stop() == 0
    assert store.read_bytes() == before


def test_a_keeper_killed_from_outside_costs_nothing_but_its_help(env: dict[str, str], project: Path) -> None:
    made_store(env, project)
    engine = start(env, cwd=project)
    try:
        assert wait_for(lambda: len(keepers(engine)) == 1)
        os.kill(keepers(engine)[0], signal.SIGKILL)
        assert wait_for(lambda: not keepers(engine))  # reaped
        made = run(env, "remember", "--content", "redis runs on port 6380", "--type", "project", cwd=project)
        assert made.returncode == 0, made.stderr
        found = run(env, "recall", "--query", "redis port", "--json", cwd=project)
        assert "6380" in found.stdout
        assert answered(env, project)
    finally:
        assert engine.stop() == 0


def test_a_purge_while_the_keeper_holds_the_store_leaves_no_byte_in_the_file_or_its_log(
    env: dict[str, str], project: Path
) -> None:
    """The purge's close is no longer the last (the keeper's is), so its log is not deleted: the
    purge's own checkpoint empties it, and the keeper's next one finds nothing to copy."""
    store = made_store(env, project)
    keeper = Keeper([(str(store), "store")])
    keeper.tend()
    made = run(
        off(env), "remember", "--content", "Wombat burrows under the north fence", "--type", "project", "--json",
        cwd=project,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    memory_id = json.loads(made.stdout)["id"]
    assert holds(store, "Wombat")
    done = run(off(env), "forget", "--id", memory_id, "--mode", "purge", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "purged"
    assert not holds(store, "Wombat") and not holds(store, "fence")
    keeper.tend()
    keeper.release()
    assert not holds(store, "Wombat")
