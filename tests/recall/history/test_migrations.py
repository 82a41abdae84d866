"""The recall index schema comes from named migrations, checked here on a blank database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from korg_bridge.recall.history.migrations import MIGRATIONS, Migration, SchemaMismatch, applied, migrate
from tests.helpers.sqlite import connect


def _schema(conn: sqlite3.Connection) -> dict[str, str]:
    return {
        name: " ".join(sql.split())
        for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")
    }


def test_blank_database_gets_every_table_index_and_the_fts_table(tmp_path: Path) -> None:
    conn = connect(tmp_path / "index.sqlite", isolation_level=None)
    assert migrate(conn) == [name for name, _ in MIGRATIONS]
    schema = _schema(conn)
    for table in ("_migrations", "sources", "events", "events_fts", "pending_patches", "meta"):
        assert table in schema
    for index in (
        "events_source_offset",
        "events_tool",
        "events_tool_use",
        "pending_patches_key",
    ):
        assert index in schema
    assert "content='events', content_rowid='id'" in schema["events_fts"]
    assert "tokenize='porter unicode61 remove_diacritics 2'" in schema["events_fts"]
    assert "id INTEGER PRIMARY KEY AUTOINCREMENT" in schema["events"]
    assert "events_ts" not in schema  # time filters never use one


def test_fts_buffers_large_segments_where_sqlite_allows_it(tmp_path: Path) -> None:
    conn = connect(tmp_path / "index.sqlite", isolation_level=None)
    migrate(conn)
    config = dict(conn.execute("SELECT k, v FROM events_fts_config").fetchall())
    assert config.get("hashsize", 16 * 1024 * 1024) == 16 * 1024 * 1024


def test_events_table_has_the_columns_search_and_show_rely_on(tmp_path: Path) -> None:
    conn = connect(tmp_path / "index.sqlite", isolation_level=None)
    migrate(conn)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(events)")]
    assert columns == [
        "id",
        "source_id",
        "offset",
        "seq",
        "shape",
        "session",
        "agent",
        "tool",
        "args",
        "result",
        "success",
        "timestamp",
        "ts",
        "triggered_by",
        "extra",
        "tool_use_id",
        "text",
        "body",
        "project",
    ]
    sources = [row[1] for row in conn.execute("PRAGMA table_info(sources)")]
    assert sources == [
        "id",
        "path",
        "inode",
        "dev",
        "size",
        "mtime_ns",
        "offset",
        "line_no",
        "skipped",
        "ignored",
        "indexed_at",
        "head_len",
        "head_sha",
        "parse_state",
        "gone_at",
    ]
    skipped = [row[1] for row in conn.execute("PRAGMA table_info(skipped_lines)")]
    assert skipped == ["source_id", "line_no", "reason"]
    pending = [row[1] for row in conn.execute("PRAGMA table_info(pending_patches)")]
    assert pending == [
        "id",
        "source_id",
        "tool_use_id",
        "result",
        "success",
        "timestamp",
        "preview",
        "full_text",
    ]
    fts = [row[1] for row in conn.execute("PRAGMA table_info(events_fts)")]
    assert fts == ["text", "body"]


def test_upgrading_an_index_of_the_old_reading_rules_reads_everything_again(tmp_path: Path) -> None:
    conn = connect(tmp_path / "index.sqlite", isolation_level=None)
    names = [name for name, _ in MIGRATIONS]
    migrate(conn, MIGRATIONS[: names.index("m007_full_text_kinds_projects")])
    conn.execute("INSERT INTO sources (id, path) VALUES (1, '/l.jsonl')")
    conn.execute(
        "INSERT INTO events (source_id, \"offset\", seq, shape, tool, text) VALUES (1, 0, 1, 'legacy', 'x', 'old')"
    )
    conn.execute("INSERT INTO events_fts (rowid, text) SELECT id, text FROM events")
    assert migrate(conn)[0] == "m007_full_text_kinds_projects"
    assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM sources").fetchone() == (0,)
    conn.execute(
        "INSERT INTO events (source_id, \"offset\", seq, shape, tool, text) VALUES (1, 0, 1, 'legacy', 'x', 'new')"
    )
    assert conn.execute("SELECT max(id) FROM events").fetchone() == (2,)  # a ref is never reused


def test_migrations_are_recorded_in_order_and_not_applied_twice(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    migrate(connect(path, isolation_level=None))
    conn = connect(path, isolation_level=None)
    assert applied(conn) == [name for name, _ in MIGRATIONS]
    assert migrate(conn) == []


def test_blank_database_has_no_applied_migrations(tmp_path: Path) -> None:
    assert applied(connect(tmp_path / "index.sqlite", isolation_level=None)) == []


def test_unknown_migration_name_means_a_newer_or_foreign_schema(tmp_path: Path) -> None:
    conn = connect(tmp_path / "index.sqlite", isolation_level=None)
    migrate(conn)
    conn.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_from_the_future', 'now')")
    with pytest.raises(SchemaMismatch, match="m999_from_the_future"):
        migrate(conn)


def test_failing_migration_is_rolled_back_and_not_recorded(tmp_path: Path) -> None:
    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    conn = connect(tmp_path / "index.sqlite", isolation_level=None)
    steps: list[Migration] = [("m001_ok", ("CREATE TABLE ok (x)",)), ("m002_broken", broken)]
    with pytest.raises(RuntimeError):
        migrate(conn, steps)
    assert applied(conn) == ["m001_ok"]
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "ok" in names
    assert "half_done" not in names
    assert not conn.in_transaction


def test_new_migrations_apply_on_top_of_old_ones(tmp_path: Path) -> None:
    conn = connect(tmp_path / "index.sqlite", isolation_level=None)
    migrate(conn, MIGRATIONS[:1])
    assert migrate(conn) == [name for name, _ in MIGRATIONS[1:]]
