"""After commit: each write hands one committed change to the projections (log, mirror, write-back)
and then to the in-process listeners the console and the engine subscribe to."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from korg_bridge.recall.memory import projections
from korg_bridge.recall.memory.projections import CommittedChange
from korg_bridge.recall.memory.scopes import Context
from tests.helpers.memory import PgTarget, answer, log_entries


@pytest.fixture
def heard() -> Iterator[list[CommittedChange]]:
    """The changes a listener subscribed for this test hears (unsubscribed after it)."""
    changes: list[CommittedChange] = []
    stop = projections.subscribe(changes.append)
    yield changes
    stop()


def _said(changes: list[CommittedChange]) -> list[tuple[str, list[tuple[str, int, str, str]]]]:
    return [(c.op, [(t.memory_id, t.version, t.state, t.status) for t in c.touched]) for c in changes]


def test_a_listener_hears_every_committed_write_with_its_ids_versions_states_and_log_entries(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, heard: list[CommittedChange]
) -> None:
    made = answer(capsys, "remember", "--content", "Pelicans migrate in autumn.", "--type", "project")
    again = answer(capsys, "remember", "--content", "Pelicans migrate in autumn.", "--type", "project")
    memory_id = str(made["id"])
    answer(capsys, "revise", "--id", memory_id, "--content", "Pelicans migrate in late autumn.")
    answer(capsys, "forget", "--id", memory_id)
    answer(capsys, "restore", "--id", memory_id)
    answer(capsys, "forget", "--id", memory_id, "--mode", "purge")
    assert again["status"] == "exists"
    assert _said(heard) == [
        ("remember", [(memory_id, 1, "live", "created")]),
        ("remember", [(memory_id, 1, "live", "exists")]),
        ("revise", [(memory_id, 2, "live", "revised")]),
        ("forget", [(memory_id, 2, "retired", "retired")]),
        ("restore", [(memory_id, 3, "live", "restored")]),
        ("forget", [(memory_id, 3, "purged", "purged")]),
    ]
    ctx = Context.from_env(os.environ)
    assert {(c.actor, c.tenant) for c in heard} == {(ctx.actor, os.environ.get("KORG_RECALL_TENANT"))}
    assert {t.scope for c in heard for t in c.touched} == {ctx.project}
    logged = [entry["args"]["op_id"] for entry in log_entries(store)]
    assert [t.op_id for c in heard for t in c.touched] == logged
    assert (heard[-1].ids, heard[-1].purged) == ((), (memory_id,))


def test_a_write_that_changes_nothing_is_not_news(
    capsys: pytest.CaptureFixture[str], project: Path, heard: list[CommittedChange]
) -> None:
    made = answer(capsys, "remember", "--content", "Pelicans migrate in autumn.", "--type", "project")
    heard.clear()
    answer(capsys, "revise", "--id", str(made["id"]), "--content", "Pelicans migrate in autumn.")
    answer(capsys, "restore", "--id", str(made["id"]))
    answer(capsys, "forget", "--id", str(made["id"]))
    answer(capsys, "forget", "--id", str(made["id"]))
    assert [c.op for c in heard] == ["forget"]


def test_a_listener_that_fails_does_not_fail_the_write_nor_silence_the_next(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    heard: list[CommittedChange],
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(change: CommittedChange) -> None:
        raise RuntimeError("listener bug")

    stop = projections.subscribe(broken)
    try:
        made = answer(capsys, "remember", "--content", "Pelicans migrate in autumn.", "--type", "project")
    finally:
        stop()
    assert made["status"] == "created" and made["checks"]["oplog"] == "appended"
    assert [c.op for c in heard] == ["remember"]
    assert "a listener of committed memory changes failed on remember" in caplog.text


@pytest.mark.sqlite_only("approval and the mirror's checks are the same on both; one store is enough")
def test_an_approval_is_heard_once_for_all_the_proposals_it_makes_live(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    heard: list[CommittedChange],
) -> None:
    monkeypatch.setenv("KORG_RECALL_WRITES", "confirm")
    monkeypatch.setenv("KORG_RECALL_ACTOR", "agent-7")
    first = answer(capsys, "remember", "--content", "Pelicans migrate in autumn.", "--type", "project")
    second = answer(capsys, "remember", "--content", "Herons fish at dawn.", "--type", "project")
    monkeypatch.setenv("KORG_RECALL_ACTOR", "user")
    approved = answer(capsys, "memories", "--approve", str(first["id"]), "--approve", str(second["id"]))
    assert [c.op for c in heard] == ["remember", "remember", "approve"]
    assert [t.state for c in heard[:2] for t in c.touched] == ["pending", "pending"]
    assert _said(heard[2:]) == [
        ("approve", [(str(first["id"]), 1, "live", "approved"), (str(second["id"]), 1, "live", "approved")])
    ]
    assert heard[2].actor == "user"
    assert list(approved["checks"]) == ["oplog", "mirror"]


@pytest.mark.sqlite_only("the Markdown mirror is a folder of files beside a SQLite store")
def test_a_hand_edit_of_the_mirror_is_heard_when_it_is_taken_in_and_its_file_follows(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path, heard: list[CommittedChange]
) -> None:
    made = answer(
        capsys, "remember", "--content", "The staging database is reset every Monday.", "--type", "project"
    )
    memory_id = str(made["id"])
    (path,) = (store.parent / "memories").rglob(f"*--{memory_id}.md")
    path.write_text(path.read_text().replace("every Monday", "every Sunday night"))
    revised = answer(capsys, "revise", "--id", memory_id, "--old-text", "Sunday", "--new-text", "Saturday")
    assert _said(heard) == [
        ("remember", [(memory_id, 1, "live", "created")]),
        ("mirror_edit", [(memory_id, 2, "live", "revised")]),
        ("revise", [(memory_id, 3, "live", "revised")]),
    ]
    assert heard[1].actor == "user"
    assert (revised["checks"]["oplog"], revised["checks"]["mirror"]) == ("appended", "up to date")
    (path,) = (store.parent / "memories").rglob(f"*--{memory_id}.md")  # renamed: its title follows the body
    assert "version: 3\n" in path.read_text() and "every Saturday night" in path.read_text()
    logged = [(entry["tool_name"], entry["args"]["op_id"]) for entry in log_entries(store)]
    assert logged == [(f"memory.{c.op}", c.touched[0].op_id) for c in heard]


@pytest.mark.no_store
def test_no_module_of_the_memory_package_imports_interop_or_the_cli() -> None:
    """The memory package is joined to Claude Code's folders by the composition root alone
    (recall/cli/wiring.py); every import counts, at module level, in a function or for typing."""
    import ast

    import korg_bridge

    package = Path(korg_bridge.__file__).parent
    crossing: list[str] = []
    for path in sorted((package / "recall" / "memory").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            crossing += [
                f"{path.relative_to(package)}: {name}"
                for name in names
                if name.startswith(("korg_bridge.recall.interop", "korg_bridge.recall.cli"))
            ]
    assert crossing == []
