"""Source resolution and file listing: which files korg-recall reads, and which it never opens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from korg_bridge.errors import UsageError
from korg_bridge.recall.history.ingest.sources import (
    FileState,
    default_sources,
    list_file_paths,
    list_files,
    list_sources,
    missing_sources,
    resolve_sources,
    stat_file,
)

# --- which files ----------------------------------------------------------------------------------


def test_defaults_live_under_the_env_home(tmp_path: Path) -> None:
    assert default_sources({"HOME": str(tmp_path)}) == [
        tmp_path / ".korg" / "sessions",
        tmp_path / ".korg" / "claude-events.jsonl",
        tmp_path / ".claude" / "projects",
        tmp_path / ".codex" / "sessions",
    ]


def test_codex_home_moves_the_codex_sessions_folder(tmp_path: Path) -> None:
    found = default_sources({"HOME": str(tmp_path), "CODEX_HOME": "~/cx"})
    assert found[3] == tmp_path / "cx" / "sessions"


def test_claude_config_dir_moves_the_projects_folder(tmp_path: Path) -> None:
    found = default_sources({"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": "~/cc"})
    assert found[2] == tmp_path / "cc" / "projects"


def test_explicit_ledgers_win_over_the_env_variable(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KORG_RECALL_LEDGER": "/elsewhere.jsonl"}
    assert resolve_sources(["~/a.jsonl", "/abs/dir"], env) == [tmp_path / "a.jsonl", Path("/abs/dir")]


def test_env_variable_is_a_pathsep_list_with_empty_entries_ignored(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KORG_RECALL_LEDGER": os.pathsep.join(["~/x", "", "/y,z", "~/x"])}
    assert resolve_sources(None, env) == [tmp_path / "x", Path("/y,z")]


def test_without_ledgers_or_env_the_defaults_apply(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KORG_RECALL_LEDGER": "  "}
    assert resolve_sources([], env) == default_sources(env)


def test_relative_ledgers_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_sources(["logs/a.jsonl"], {"HOME": str(tmp_path)}) == [tmp_path / "logs" / "a.jsonl"]


def test_folders_are_scanned_recursively_for_jsonl_in_sorted_order(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    (root / "p2" / "sess" / "subagents").mkdir(parents=True)
    (root / "p1").mkdir()
    for rel in ["p2/b.jsonl", "p2/sess/subagents/agent-1.jsonl", "p1/a.jsonl", "p1/notes.txt", "top.jsonl"]:
        (root / rel).write_text("")
    explicit = tmp_path / "events.log"
    explicit.write_text("")
    found = list_files([root, explicit, tmp_path / "missing", root / "p1" / "a.jsonl"])
    assert found == [
        root / "top.jsonl",
        root / "p1" / "a.jsonl",
        root / "p2" / "b.jsonl",
        root / "p2" / "sess" / "subagents" / "agent-1.jsonl",
        explicit,
    ]


def test_symlink_loops_are_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "d").mkdir(parents=True)
    (root / "d" / "x.jsonl").write_text("")
    (root / "d" / "loop").symlink_to(root, target_is_directory=True)
    assert list_files([root]) == [root / "d" / "x.jsonl"]


def test_missing_sources_are_reported_apart(tmp_path: Path) -> None:
    present = tmp_path / "here.jsonl"
    present.write_text("")
    assert missing_sources([present, tmp_path / "gone"]) == [tmp_path / "gone"]


# --- only regular files -----------------------------------------------------------------------------


@pytest.mark.parametrize("special", ["fifo", "dev_zero", "unix_socket"])
def test_a_named_source_that_is_no_regular_file_is_a_usage_error_naming_it(
    special: str, request: pytest.FixtureRequest
) -> None:
    path: Path = request.getfixturevalue(special)
    with pytest.raises(UsageError, match="is not a regular file") as caught:
        list_file_paths([path])
    assert str(path) in str(caught.value)
    assert caught.value.exit_code == 2


def test_a_folder_scan_passes_over_fifos_sockets_and_links_to_devices(
    tmp_path: Path, fifo: Path, unix_socket: Path
) -> None:
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    (tmp_path / "self.jsonl").symlink_to(tmp_path / "self.jsonl")
    (tmp_path / "real.jsonl").write_text("")
    listing = list_sources([tmp_path])
    assert listing.files == [str(tmp_path / "real.jsonl")]
    assert sorted(listing.passed_over) == sorted(
        [
            str(fifo),
            str(unix_socket),
            *(str(tmp_path / name) for name in ("dangling.jsonl", "self.jsonl", "zero.jsonl")),
        ]
    )


def test_a_named_symlink_loop_is_a_missing_source(tmp_path: Path) -> None:
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    assert list_file_paths([loop]) == []
    assert missing_sources([loop]) == [loop]


def test_stat_file_of_anything_but_a_regular_file_is_none(tmp_path: Path, fifo: Path) -> None:
    assert stat_file(tmp_path / "gone.jsonl") is None
    assert stat_file(fifo) is None
    assert stat_file("/dev/zero") is None
    regular = tmp_path / "l.jsonl"
    regular.write_text("{}\n")
    state = stat_file(regular)
    assert isinstance(state, FileState)
    assert state.size == 3


def test_list_file_paths_matches_list_files_as_absolute_strings(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("a/one.jsonl", "a/b/two.jsonl", "a/skip.txt", "three.jsonl"):
        (tmp_path / name).write_text("{}\n")
    sources = [tmp_path / "a", tmp_path / "three.jsonl", tmp_path / "missing"]
    assert list_file_paths(sources) == [os.path.abspath(p) for p in list_files(sources)]
