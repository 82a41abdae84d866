"""The engine's watch over the mirror folders: a call skips listing a folder only when nothing
happened in it since a scan found it in line, and every change -- a person's edit, another
process's write, a folder made after the engine started -- is taken in by the next call."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from korg_bridge.recall.engine.watch import MirrorWatch
from tests.helpers.engine import Running
from tests.recall.engine.conftest import off, run

pytestmark = pytest.mark.skipif(not Path("/proc/self").exists(), reason="inotify is Linux's")


def _mirror_file(env: dict[str, str], memory_id: str) -> Path:
    root = Path(env["XDG_DATA_HOME"]) / "korg-recall" / "memories"
    found = [path for path in root.rglob("*.md") if memory_id in path.name]
    assert len(found) == 1, sorted(root.rglob("*"))
    return found[0]


def _watch(env: dict[str, str], project: Path) -> dict[str, object]:
    done = run(env, "stats", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    engine = json.loads(done.stdout)["engine"]
    assert engine["answered"], engine
    value: dict[str, object] = engine["mirror_watch"]
    return value


def _remember(env: dict[str, str], project: Path, text: str, kind: str = "user") -> str:
    done = run(env, "remember", "--content", text, "--type", kind, cwd=project)
    assert done.returncode == 0, done.stderr
    value: str = json.loads(done.stdout)["id"]
    return value


def _edit(path: Path, old: str, new: str) -> None:
    """A person's edit, in place, as an editor that writes through the file does it."""
    text = path.read_text(encoding="utf-8")
    assert old in text
    with path.open("r+", encoding="utf-8") as handle:
        handle.seek(0)
        handle.write(text.replace(old, new))
        handle.truncate()


def test_unchanged_folders_are_skipped_and_a_hand_edit_is_taken_in_by_the_next_call(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    ident = _remember(env, project, "the staging database is on port 5433")
    for _ in range(3):  # the first lists and finds the folder in line; the next ones skip it
        assert run(env, "memories", cwd=project).returncode == 0
    assert int(str(_watch(env, project)["skipped"])) >= 1
    _edit(_mirror_file(env, ident), "5433", "6543")
    shown = run(env, "memories", "--json", cwd=project)
    assert "6543" in shown.stdout and "5433" not in shown.stdout, shown.stdout
    alone = run(off(env), "memories", "--json", cwd=project)
    assert alone.stdout == shown.stdout


def test_a_write_by_a_process_without_the_engine_is_seen_by_the_next_engine_call(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    ident = _remember(env, project, "deploys go out on Tuesdays")
    for _ in range(2):
        run(env, "memories", cwd=project)
    done = run(off(env), "revise", "--id", ident, "--content", "deploys go out on Thursdays", cwd=project)
    assert done.returncode == 0, done.stderr
    _edit(_mirror_file(env, ident), "Thursdays", "Fridays")
    assert "Fridays" in run(env, "memories", "--json", cwd=project).stdout


def test_a_project_folder_made_after_the_engine_started_is_watched(
    engine: Running, env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-project"
    other.mkdir()
    (other / ".git").mkdir()
    ident = _remember(env, other, "the other project builds with make", kind="project")
    for _ in range(3):
        assert run(env, "memories", cwd=other).returncode == 0
    _edit(_mirror_file(env, ident), "make", "ninja")
    assert "ninja" in run(env, "memories", "--json", cwd=other).stdout


def test_the_watch_marks_a_folder_clean_only_at_the_generation_its_scan_began(tmp_path: Path) -> None:
    root = tmp_path / "memories"
    user = root / "user"
    user.mkdir(parents=True)
    (user / "a.md").write_text("one\n")
    watch = MirrorWatch(root)
    try:
        assert watch.status()["watching"] is True
        watch.drain()
        view = watch.child()
        assert not view.unchanged(str(user))  # never scanned: listed
        view.in_line(str(user))
        watch.drain()
        assert watch.child().unchanged(str(user))
        # A change after the fork of the scan's call: the scan may have missed it, so the file it
        # named is looked at by the next call (the folder is clean but for it).
        stale = watch.child()
        (user / "a.md").write_text("two\n")
        watch.drain()
        stale.in_line(str(user))
        watch.drain()
        assert not watch.child().unchanged(str(user))
        assert watch.child().changed(str(user)) == {"a.md"}
        # An event naming no file during a scan (a sub-folder made): its report does not count.
        watch.child().in_line(str(user))
        watch.drain()
        stale = watch.child()
        (user / "sub").mkdir()
        (user / "sub").rmdir()
        watch.drain()
        stale.in_line(str(user))
        watch.drain()
        assert watch.child().changed(str(user)) is None
        # Touching a file (metadata only) is a change too.
        fresh = watch.child()
        fresh.in_line(str(user))
        watch.drain()
        assert watch.child().unchanged(str(user))
        os.utime(user / "a.md", (time.time() - 60, time.time() - 60))
        watch.drain()
        assert not watch.child().unchanged(str(user))
        # A folder made later is watched from its creation on.
        later = root / "project" / "shop-1234"
        later.mkdir(parents=True)
        watch.drain()
        watch.drain()
        assert str(later) in watch.folders
        view = watch.child()
        view.in_line(str(later))
        watch.drain()
        assert watch.child().unchanged(str(later))
        (later / "b.md").write_text("new\n")
        watch.drain()
        assert not watch.child().unchanged(str(later))
    finally:
        for fd in (watch.report_r, watch.report_w, *(watch.fds[1:])):
            os.close(fd)


def test_after_a_clean_scan_a_call_looks_only_at_the_files_events_named(tmp_path: Path) -> None:
    from korg_bridge.recall.engine.watch import NAMED_MAX

    root = tmp_path / "memories"
    user = root / "user"
    user.mkdir(parents=True)
    (user / "a.md").write_text("one\n")
    watch = MirrorWatch(root)
    try:
        watch.drain()
        watch.child().in_line(str(user))
        watch.drain()
        assert watch.child().changed(str(user)) == frozenset()
        (user / "b.md").write_text("new\n")  # a write, as remember's rename or an editor makes it
        (user / "a.md").unlink()
        watch.drain()
        view = watch.child()
        assert view.changed(str(user)) == {"a.md", "b.md"} and not view.unchanged(str(user))
        view.in_line(str(user))  # the call found those two in line: the folder is clean again
        watch.drain()
        assert watch.child().changed(str(user)) == frozenset()
        # A change after a call's fork: its report counts but for the file the change named.
        stale = watch.child()
        os.utime(user / "b.md", (time.time() - 60, time.time() - 60))
        watch.drain()
        stale.in_line(str(user))
        watch.drain()
        assert watch.child().changed(str(user)) == {"b.md"}
        # A report older than the folder's mark changes nothing.
        older = watch.child()
        watch.child().in_line(str(user))
        watch.drain()
        (user / "b.md").write_text("newer\n")
        watch.drain()
        older.in_line(str(user))
        watch.drain()
        assert watch.child().changed(str(user)) == {"b.md"}
        # More names than a call looks at one by one, or an event naming no file: the next call lists.
        for n in range(NAMED_MAX + 1):
            (user / f"n{n}.md").write_text("x\n")
        watch.drain()
        assert watch.child().changed(str(user)) is None
        view = watch.child()
        view.in_line(str(user))
        watch.drain()
        (user / "sub").mkdir()
        watch.drain()
        assert watch.child().changed(str(user)) is None
    finally:
        for fd in (watch.report_r, watch.report_w, *(watch.fds[1:])):
            os.close(fd)


def test_a_hand_edit_right_after_a_write_by_the_engine_is_taken_in(
    engine: Running, env: dict[str, str], project: Path
) -> None:
    """The call after a ``remember`` looks at the file the write named instead of listing; an edit
    of that very file, or of another, made before that call is still taken in."""
    first = _remember(env, project, "the cache is warmed at 06:00")
    for _ in range(2):
        assert run(env, "memories", cwd=project).returncode == 0
    second = _remember(env, project, "the nightly job restarts at 02:00")
    _edit(_mirror_file(env, second), "02:00", "03:30")
    _edit(_mirror_file(env, first), "06:00", "07:15")
    shown = run(env, "memories", "--json", cwd=project)
    assert "03:30" in shown.stdout and "07:15" in shown.stdout, shown.stdout
    assert run(off(env), "memories", "--json", cwd=project).stdout == shown.stdout


def test_a_folder_that_is_a_link_is_never_skipped(tmp_path: Path) -> None:
    root = tmp_path / "memories"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "user").symlink_to(elsewhere, target_is_directory=True)
    watch = MirrorWatch(root)
    try:
        view = watch.child()
        view.in_line(str(root / "user"))
        watch.drain()
        assert not watch.child().unchanged(str(root / "user"))
    finally:
        for fd in (watch.report_r, watch.report_w, *(watch.fds[1:])):
            os.close(fd)


def test_another_file_at_the_stores_path_drops_every_clean_mark(tmp_path: Path) -> None:
    """A clean mark says a folder is in line with the store's records of its files: a store
    restored from a backup has other records, so every folder is listed again."""
    root = tmp_path / "memories"
    user = root / "user"
    user.mkdir(parents=True)
    store = tmp_path / "memory.sqlite"
    store.write_bytes(b"one")
    watch = MirrorWatch(root, store)
    try:
        watch.drain()
        watch.child().in_line(str(user))
        watch.drain()
        store.write_bytes(b"the same file, written through")
        watch.drain()
        assert watch.child().unchanged(str(user))
        (tmp_path / "restored.sqlite").write_bytes(b"a backup")
        os.replace(tmp_path / "restored.sqlite", store)
        watch.drain()
        assert watch.child().changed(str(user)) is None
    finally:
        for fd in (watch.report_r, watch.report_w, *(watch.fds[1:])):
            os.close(fd)
