"""Source resolution, file listing, and incremental crash-tolerant reading."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.errors import ConfigError
from korg_bridge.recall import sources
from korg_bridge.recall.sources import (
    FileState,
    ReadResult,
    default_sources,
    list_files,
    missing_sources,
    read_from,
    resolve_sources,
    stat_file,
)

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / ".." / "shared" / "peers"
SESSIONS = PEERS / "ledgers" / "sessions"

needs_peers = pytest.mark.skipif(
    not SESSIONS.is_dir(), reason=f"ground-truth folder {PEERS} is absent (peer ledgers not mounted)"
)


def _line(seq: int, **more: Any) -> bytes:
    return (json.dumps({"seq": seq, "source_agent": "agent:t", "tool_name": "t", **more}) + "\n").encode()


# --- which files ----------------------------------------------------------------------------------


def test_defaults_live_under_the_env_home(tmp_path: Path) -> None:
    assert default_sources({"HOME": str(tmp_path)}) == [
        tmp_path / ".korg" / "sessions",
        tmp_path / ".korg" / "claude-events.jsonl",
        tmp_path / ".claude" / "projects",
    ]


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


# --- file state -----------------------------------------------------------------------------------


def test_stat_file_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert stat_file(tmp_path / "gone.jsonl") is None


def test_replaced_file_shows_a_new_inode_and_truncation_a_smaller_size(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(_line(1) + _line(2))
    first = stat_file(path)
    assert isinstance(first, FileState)
    offset = read_from(path, 0, 0).end_offset
    assert first.size == offset

    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(_line(1))
    keep_alive = path.open("rb")  # keeps the old inode from being reused by the replacement
    try:
        os.replace(replacement, path)
        second = stat_file(path)
        assert second is not None
        assert (second.inode, second.dev) != (first.inode, first.dev)
        assert second.size < offset  # either rule sends the index back to offset 0
    finally:
        keep_alive.close()


# --- incremental reading --------------------------------------------------------------------------


@needs_peers
def test_transcript_reads_whole_with_counts() -> None:
    path = SESSIONS / "claude-code-transcript.jsonl"
    result = read_from(path, 0, 0)
    assert result.end_offset == path.stat().st_size
    assert result.end_line == 13
    assert (len(result.events), len(result.patches), result.skipped, result.ignored) == (7, 2, 0, 5)
    assert {e.source for e in result.events} == {
        os.path.abspath(path)
    }  # as given: a symlinked folder keeps its name
    assert [e.seq for e in result.events] == [4, 5, 5, 7, 8, 9, 11]


@needs_peers
def test_envelope_file_reads_with_seq_ids_one_to_six() -> None:
    result = read_from(SESSIONS / "korg-envelope-session.jsonl", 0, 0)
    assert [e.seq for e in result.events] == [1, 2, 3, 4, 5, 6]
    assert {e.shape for e in result.events} == {"envelope"}


@needs_peers
def test_stream_json_file_reads_with_its_sidechain_events() -> None:
    result = read_from(SESSIONS / "claude-stream-json-subagents.jsonl", 0, 0)
    assert [(e.seq, e.tool, e.extra.get("sidechain", False)) for e in result.events] == [
        (5, "Agent", False),
        (7, "user_prompt", True),
        (10, "Bash", True),
        (14, "llm_inference", False),
    ]
    assert (len(result.patches), result.ignored, result.skipped) == (2, 9, 0)


def test_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    complete = _line(1)
    partial = _line(2)
    path.write_bytes(complete + partial[:10])
    first = read_from(path, 0, 0)
    assert [e.seq for e in first.events] == [1]
    assert (first.end_offset, first.end_line) == (len(complete), 1)

    with path.open("ab") as handle:
        handle.write(partial[10:])
    second = read_from(path, first.end_offset, first.end_line)
    assert [(e.seq, e.offset) for e in second.events] == [(2, len(complete))]
    assert (second.end_offset, second.end_line) == (len(complete) + len(partial), 2)


def test_malformed_and_non_object_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(
        _line(1) + b"{broken\n" + b"[1,2]\n" + b'"text"\n' + b"\n  \n" + b'{"unrelated": 1}\n' + _line(2)
    )
    result = read_from(path, 0, 0)
    assert [e.seq for e in result.events] == [1, 2]
    assert (result.skipped, result.ignored, result.end_line) == (3, 1, 8)


def test_invalid_utf8_never_shifts_the_next_line_offset(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    bad = b'{"seq": 1, "source_agent": "a", "tool_name": "t", "args": {"x": "\xff\xfe"}}\n'
    path.write_bytes(bad + _line(2))
    result = read_from(path, 0, 0)
    assert [(e.seq, e.offset) for e in result.events] == [(1, 0), (2, len(bad))]
    assert result.events[0].args == {"x": "\ufffd\ufffd"}


def test_offsets_resume_across_reads_with_an_append_in_between(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(_line(1) + _line(2))
    first = read_from(path, 0, 0)
    with path.open("ab") as handle:
        handle.write(_line(3) + _line(4))
    second = read_from(path, first.end_offset, first.end_line)
    assert [e.seq for e in second.events] == [3, 4]
    data = path.read_bytes()
    for event in second.events:
        assert json.loads(data[event.offset :].split(b"\n", 1)[0])["seq"] == event.seq
    assert second.end_line == 4
    assert read_from(path, second.end_offset, second.end_line) == ReadResult(end_offset=len(data), end_line=4)


def test_claude_code_seq_counts_lines_from_the_saved_line_number(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    prompt = {"type": "user", "sessionId": "s", "message": {"content": "hi"}}
    path.write_bytes((json.dumps(prompt) + "\n").encode() * 3)
    first = read_from(path, 0, 0, max_bytes=1)
    assert [e.seq for e in first.events] == [1]
    rest = read_from(path, first.end_offset, first.end_line)
    assert [e.seq for e in rest.events] == [2, 3]


def test_lines_spanning_chunks_and_max_bytes_loops_match_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "CHUNK_SIZE", 7)
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"".join(_line(i, args={"pad": "x" * i}) for i in range(1, 30)) + b"\xef\xbb")
    whole = read_from(path, 0, 0)
    assert [e.seq for e in whole.events] == list(range(1, 30))

    offset, line_no, seen = 0, 0, []
    while True:
        part = read_from(path, offset, line_no, max_bytes=100)
        if part.end_offset == offset:
            break
        seen += part.events
        offset, line_no = part.end_offset, part.end_line
    assert seen == whole.events
    assert (offset, line_no) == (whole.end_offset, whole.end_line)


def test_crlf_line_endings_and_a_byte_order_mark_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + _line(1).replace(b"\n", b"\r\n") + _line(2).replace(b"\n", b"\r\n"))
    result = read_from(path, 0, 0)
    assert [e.seq for e in result.events] == [1, 2]
    assert result.skipped == 0


def test_reading_a_missing_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read ledger"):
        read_from(tmp_path / "gone.jsonl", 0, 0)


def test_list_file_paths_matches_list_files_as_absolute_strings(tmp_path: Path) -> None:
    import os

    from korg_bridge.recall.sources import list_file_paths, list_files

    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ("a/one.jsonl", "a/b/two.jsonl", "a/skip.txt", "three.jsonl"):
        (tmp_path / name).write_text("{}\n")
    sources = [tmp_path / "a", tmp_path / "three.jsonl", tmp_path / "missing"]
    assert list_file_paths(sources) == [os.path.abspath(p) for p in list_files(sources)]
