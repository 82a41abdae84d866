"""The store file: schema from named migrations, durability pragmas, a backup before migrating an
existing store, version rows written and read back verbatim (on both backends; the team store's
schema and its checks on opening are in test_memory_pg.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from korg_bridge.errors import ConfigError
from korg_bridge.recall.history.migrations import migrate
from korg_bridge.recall.memory.backend.sqlite.schema import MIGRATIONS, TABLES
from korg_bridge.recall.memory.backend.sqlite.store import Store, newest_backup
from korg_bridge.recall.memory.records import Version, new_id
from korg_bridge.recall.memory.rows import head, insert_version, lineage
from korg_bridge.recall.paths import default_store_path
from tests.helpers.memory import PgTarget, opened

SQLITE_FILE = pytest.mark.sqlite_only("the SQLite file: its schema, pragmas, backups, corruption")


def version(**fields: object) -> Version:
    base: dict[str, object] = {
        "id": "mabcdefghij",
        "version": 1,
        "scope": "user",
        "type": "note",
        "title": "A title",
        "body": "A body.",
        "content_hash": "h",
        "actor": "import",
        "recorded_at": "2025-01-02T03:04:05.678901Z",
    }
    base.update(fields)
    return Version(**base)  # type: ignore[arg-type]


@SQLITE_FILE
def test_a_blank_database_migrates_to_the_store_schema(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "blank.sqlite", isolation_level=None)
    try:
        assert migrate(conn, MIGRATIONS) == [name for name, _ in MIGRATIONS]
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert names >= TABLES
        columns = [row[1] for row in conn.execute("PRAGMA table_info(memory)")]
        assert columns[:4] == ["rowid", "id", "version", "scope"]
        assert conn.execute("SELECT length(value) FROM meta WHERE key = 'forget_secret'").fetchone() == (64,)
        assert migrate(conn, MIGRATIONS) == []
    finally:
        conn.close()


@SQLITE_FILE
def test_the_store_is_wal_with_full_sync_and_secure_delete(tmp_path: Path) -> None:
    with Store(tmp_path / "m.sqlite") as store:
        pragma = store.conn.execute
        assert pragma("PRAGMA journal_mode").fetchone() == ("wal",)
        assert pragma("PRAGMA synchronous").fetchone() == (2,)
        assert pragma("PRAGMA secure_delete").fetchone() == (1,)


@SQLITE_FILE
def test_a_write_that_need_not_be_durable_commits_without_a_sync_and_leaves_full_sync_after(
    tmp_path: Path,
) -> None:
    """A recall's use counts: lost to a power cut at worst, so not worth a wait for the disk; every
    other write, before and after it, syncs as before -- also when it fails."""
    with Store(tmp_path / "m.sqlite") as store:
        with store.write(durable=False) as tx:
            assert tx.execute("PRAGMA synchronous").fetchone() == (1,)
            insert_version(tx, version())
        assert store.conn.execute("PRAGMA synchronous").fetchone() == (2,)
        with pytest.raises(RuntimeError), store.write(durable=False):
            raise RuntimeError("a failed write")
        assert store.conn.execute("PRAGMA synchronous").fetchone() == (2,)
        with store.reading() as tx:
            assert head(tx, "mabcdefghij") is not None


@SQLITE_FILE
def test_migrating_an_existing_store_takes_a_backup_first(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrate(conn, MIGRATIONS[:1])
        conn.execute(
            "INSERT INTO memory (id, version, scope, type, content_hash, state, actor, recorded_at) "
            "VALUES ('mabcdefghij', 1, 'user', 'note', 'h', 'live', 'user', '2025-01-01T00:00:00.000000Z')"
        )
    finally:
        conn.close()
    assert newest_backup(path) is None
    with Store(path) as store:
        assert [row[0] for row in store.conn.execute("SELECT name FROM _migrations")] == [
            n for n, _ in MIGRATIONS
        ]
    backup = newest_backup(path)
    assert backup is not None and backup.name.startswith("m.sqlite.bak-")
    copy = sqlite3.connect(backup)
    try:
        assert copy.execute("SELECT id FROM memory").fetchall() == [("mabcdefghij",)]
        assert copy.execute("SELECT count(*) FROM _migrations").fetchone() == (1,)
    finally:
        copy.close()


@SQLITE_FILE
def test_a_corrupt_store_names_its_newest_backup(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    Store(path).close()
    (tmp_path / "m.sqlite.bak-20260101T000000Z").write_bytes(b"old")
    (tmp_path / "m.sqlite.bak-20260301T000000Z").write_bytes(b"newer")
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"\xff" * 4000)
    with pytest.raises(ConfigError) as caught:
        Store(path)
    assert caught.value.exit_code == 3
    assert str(tmp_path / "m.sqlite.bak-20260301T000000Z") in caught.value.message


def test_versions_are_stored_and_read_back_verbatim(store: Path | PgTarget) -> None:
    first = version(
        tags=["a", "b"],
        pinned=True,
        source={"session": "s1", "ref": "e12"},
        provenance=[{"actor": "x", "at": "2025-01-02T03:04:05.678901Z", "source": None}],
        superseded_by=2,
        superseded_at="2025-02-02T00:00:00.000000Z",
    )
    second = version(
        version=2, body="A newer body.", recorded_at="2025-02-02T00:00:00.000000Z", conflict=True
    )
    with opened(store) as handle, handle.write() as conn:
        insert_version(conn, first)
        insert_version(conn, second)
        stored = lineage(conn, "mabcdefghij")
        assert [v.to_dict() for v in stored] == [first.to_dict(), second.to_dict()]
        assert Version.from_dict(first.to_dict()).to_dict() == first.to_dict()
        current = head(conn, "mabcdefghij")
        assert current is not None and current.version == 2


@pytest.mark.no_store
def test_the_default_store_lives_under_xdg_data_home(tmp_path: Path) -> None:
    assert default_store_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "korg-recall" / "memory.sqlite"
    assert default_store_path({"HOME": str(tmp_path), "XDG_DATA_HOME": "relative"}) == (
        tmp_path / ".local" / "share" / "korg-recall" / "memory.sqlite"
    )
    assert (
        default_store_path({"HOME": str(tmp_path), "KORG_RECALL_STORE": "~/m.sqlite"})
        == tmp_path / "m.sqlite"
    )


@pytest.mark.no_store
def test_ids_are_m_and_ten_base32_characters() -> None:
    ids = {new_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(
        len(i) == 11 and i[0] == "m" and set(i[1:]) <= set("abcdefghijklmnopqrstuvwxyz234567") for i in ids
    )


@SQLITE_FILE
def test_backups_taken_in_the_same_second_never_replace_each_other(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    with Store(path) as store:
        first = store._backup(store.conn, "test")
        second = store._backup(store.conn, "test")
    assert first != second
    assert first.exists() and second.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if ".partial" in p.name) == []


@SQLITE_FILE
def test_finishing_an_interrupted_creation_takes_no_backup(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrate(conn, MIGRATIONS[:2])  # a first process killed between its migrations
    finally:
        conn.close()
    with Store(path) as store:
        assert store.conn.execute("SELECT count(*) FROM _migrations").fetchone() == (len(MIGRATIONS),)
    assert newest_backup(path) is None


@SQLITE_FILE
def test_a_brief_lists_the_heads_from_the_index_made_for_it(tmp_path: Path) -> None:
    """The brief's listing names only what ``memory_brief`` holds -- the source's kind as the
    store's very expression for it -- so SQLite reads the index, never a row (a row read per head
    was most of a ``context`` call)."""
    from korg_bridge.recall.interop.brief import candidates_sql
    from korg_bridge.recall.memory.backend.sqlite.schema import BRIEF_INDEX

    with Store(tmp_path / "m.sqlite") as store:
        for n in range(50):
            with store.write() as tx:
                insert_version(tx, version(id=f"m{n:010d}", scope="user" if n % 2 else "project:/p"))
        with store.reading() as tx:
            kind = tx.source_field("kind")
            made = store.conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (BRIEF_INDEX,)
            ).fetchone()
            assert made is not None and kind in made[0]
            sql = candidates_sql(2, skip_auto_memory=True, source_kind=kind)
            params = ("user", "project:/p", "2026-01-01T00:00:00.000000Z")
            plan = " ".join(row[3] for row in tx.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            assert f"USING INDEX {BRIEF_INDEX} " in plan, plan
            assert len(tx.execute(sql, params).fetchall()) == 50
