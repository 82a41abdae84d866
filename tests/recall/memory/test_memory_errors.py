"""Bad input: one clear line on stderr naming what is wrong and what to do, the exit code from the
introspect table, nothing written -- and a store that is not usable as it is stays untouched.

The tests of bad arguments run on both backends; those about a store *file* that cannot be used
run on SQLite, and their team-store counterparts (unreachable server, wrong password, missing
pgvector, a newer schema) are in ``test_memory_pg_failures.py``."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from tests.helpers.cli import failed, ok, run_recall
from tests.helpers.memory import git_repo

SQLITE_FILE = pytest.mark.sqlite_only(
    "about the SQLite file itself; the team store's failures have their own tests"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "shop")


def remember(
    repo: Path, text: str = "A fact.", *flags: str, env: dict[str, str] | None = None
) -> dict[str, object]:
    return ok(run_recall("remember", "--content", text, "--type", "note", *flags, cwd=repo, env=env))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_body_over_8_kb_is_refused_with_advice_to_split_it(repo: Path, store: Path) -> None:
    failed(
        run_recall("remember", "--content", "word " * 1700, "--type", "note", cwd=repo),
        2,
        "Split it into several memories",
    )
    assert not store.exists()


def test_an_unknown_id_is_a_usage_error_for_every_tool(repo: Path) -> None:
    remember(repo)
    for argv in (
        ["revise", "--id", "maaaaaaaaaa", "--content", "x"],
        ["forget", "--id", "maaaaaaaaaa"],
        ["memories", "--ids", "maaaaaaaaaa"],
        ["restore", "--id", "maaaaaaaaaa"],
    ):
        failed(run_recall(*argv, cwd=repo), 2, "no memory maaaaaaaaaa")


@SQLITE_FILE
def test_an_unknown_id_before_anything_was_remembered_creates_no_store(repo: Path, store: Path) -> None:
    failed(run_recall("forget", "--id", "maaaaaaaaaa", cwd=repo), 2, "nothing has been remembered yet")
    assert not store.parent.exists()


def test_a_malformed_id_is_refused_saying_what_an_id_looks_like(repo: Path) -> None:
    remember(repo)
    failed(
        run_recall("revise", "--id", "../etc", "--content", "x", cwd=repo),
        2,
        "invalid memory id '../etc': ids look like",
    )
    failed(run_recall("memories", "--ids", "m1", cwd=repo), 2, "invalid memory id 'm1'")


def test_old_text_must_occur_exactly_once(repo: Path) -> None:
    made = remember(repo, "Use tabs in Makefiles and tabs in Go files.")
    failed(
        run_recall("revise", "--id", str(made["id"]), "--old-text", "spaces", "--new-text", "x", cwd=repo),
        2,
        "old_text not found",
    )
    failed(
        run_recall("revise", "--id", str(made["id"]), "--old-text", "tabs", "--new-text", "x", cwd=repo),
        2,
        "occurs 2 times",
    )
    failed(
        run_recall("revise", "--id", str(made["id"]), "--old-text", "tabs", cwd=repo),
        2,
        "old_text and new_text go together",
    )
    failed(
        run_recall(
            "revise",
            "--id",
            str(made["id"]),
            "--content",
            "x",
            "--old-text",
            "a",
            "--new-text",
            "b",
            cwd=repo,
        ),
        2,
        "either content or old_text",
    )


def test_bad_metadata_is_named(repo: Path) -> None:
    failed(
        run_recall("remember", "--content", "x", "--type", "note", "--valid-from", "soonish", cwd=repo),
        2,
        "invalid valid_from",
    )
    failed(
        run_recall("remember", "--content", "x", "--type", "opinion", cwd=repo), 2, "--type must be one of"
    )
    failed(run_recall("remember", "--content", "   ", "--type", "note", cwd=repo), 2, "content is empty")
    failed(run_recall("forget", cwd=repo), 2, "pass either id")
    failed(run_recall("memories", "--cursor", "later", cwd=repo), 2, "bad cursor")


@SQLITE_FILE
def test_a_corrupt_store_is_a_config_error_naming_the_file_and_it_stays_untouched(
    repo: Path, store: Path
) -> None:
    remember(repo)
    with open(store, "r+b") as handle:  # wreck the schema page after the header
        handle.seek(100)
        handle.write(b"\xff" * 3000)
    before = digest(store)
    message = failed(run_recall("memories", cwd=repo), 3, str(store))
    assert "corrupt" in message or "malformed" in message
    assert "no backup of it exists" in message
    assert digest(store) == before
    failed(run_recall("remember", "--content", "another", "--type", "note", cwd=repo), 3, str(store))
    assert digest(store) == before
    assert sorted(p.name for p in store.parent.iterdir() if p.name.startswith("memory.sqlite")) == [
        "memory.sqlite"
    ]


@SQLITE_FILE
def test_a_file_that_is_not_sqlite_is_never_overwritten(repo: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my own notes, not a database\n" * 10)
    before = digest(notes)
    failed(
        run_recall("memories", cwd=repo, env={"KORG_RECALL_STORE": str(notes)}), 3, "is not a SQLite database"
    )
    failed(
        run_recall(
            "remember", "--content", "x", "--type", "note", cwd=repo, env={"KORG_RECALL_STORE": str(notes)}
        ),
        3,
        str(notes),
    )
    assert digest(notes) == before


@SQLITE_FILE
def test_another_programs_database_is_refused(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.close()
    before = digest(other)
    failed(
        run_recall("memories", cwd=repo, env={"KORG_RECALL_STORE": str(other)}),
        3,
        "belongs to another program",
    )
    assert digest(other) == before


@SQLITE_FILE
def test_a_store_path_that_is_a_directory_is_a_config_error(repo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    failed(
        run_recall(
            "remember", "--content", "x", "--type", "note", cwd=repo, env={"KORG_RECALL_STORE": str(folder)}
        ),
        3,
        "is a directory",
    )


@SQLITE_FILE
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_store_path_that_is_a_fifo_is_a_config_error_not_a_hang(repo: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "memory.fifo"
    os.mkfifo(fifo)
    proc = run_recall(
        "remember",
        "--content",
        "x",
        "--type",
        "note",
        cwd=repo,
        env={"KORG_RECALL_STORE": str(fifo)},
        timeout=30,
    )
    failed(proc, 3, "not a regular file")


@pytest.mark.no_store
def test_a_url_of_another_scheme_is_refused_naming_the_two_forms(repo: Path) -> None:
    failed(
        run_recall("memories", cwd=repo, env={"KORG_RECALL_STORE": "mysql://db/memories"}),
        3,
        "a SQLite file path or a postgresql:// URL",
    )


def test_bad_environment_values_name_the_variable(repo: Path) -> None:
    failed(run_recall("memories", cwd=repo, env={"KORG_RECALL_WRITES": "sometimes"}), 3, "KORG_RECALL_WRITES")
    failed(run_recall("memories", cwd=repo, env={"KORG_RECALL_MIRROR": "maybe"}), 3, "KORG_RECALL_MIRROR")


@SQLITE_FILE
def test_a_store_from_a_newer_version_is_refused(repo: Path, store: Path) -> None:
    remember(repo)
    with sqlite3.connect(store) as conn:
        conn.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_future', 'now')")
    conn.close()
    failed(run_recall("memories", cwd=repo), 3, "newer korg-recall")
