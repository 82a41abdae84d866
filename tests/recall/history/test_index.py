"""The persistent index: incremental refresh, recovery from broken files, concurrency, show and stats."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.errors import ConfigError, KorgError, UsageError
from korg_bridge.recall.history import index as index_module
from korg_bridge.recall.history.index import Index, parse_ref
from korg_bridge.recall.history.ingest.rows import MAX_STORED_JSON
from korg_bridge.recall.history.query.search import search
from korg_bridge.recall.paths import index_path
from tests.helpers.paths import PEERS, REPO, peers_missing


def line(seq: int, tool: str = "Bash", *, session: str | None = None, **fields: Any) -> str:
    record: dict[str, Any] = {
        "seq": seq,
        "source_agent": fields.pop("agent", "agent:test"),
        "tool_name": tool,
        "args": fields.pop("args", {}),
        "result": fields.pop("result", {}),
        "success": True,
        **fields,
    }
    if session is not None:
        record["session_id"] = session
    return json.dumps(record) + "\n"


def prompt(seq: int, text: str, **fields: Any) -> str:
    return line(seq, "user_prompt", args={"prompt": text}, **fields)


def tool_use(tool_use_id: str, path: str, session: str = "sess-1") -> str:
    block = {"type": "tool_use", "id": tool_use_id, "name": "Read", "input": {"file_path": path}}
    message = {"role": "assistant", "content": [block]}
    return json.dumps({"type": "assistant", "sessionId": session, "message": message}) + "\n"


def tool_result(tool_use_id: str, output: str, session: str = "sess-1") -> str:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": output}
    record = {
        "type": "user",
        "sessionId": session,
        "timestamp": "2026-05-27T10:00:02Z",
        "message": {"role": "user", "content": [block]},
    }
    return json.dumps(record) + "\n"


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def find(index: Index, query: str, sources: list[Path], mode: str = "keyword") -> list[str]:
    hits = search(index, query, mode=mode, top_n=10, min_score=0.3, sources=sources)
    return [hit.snippet for hit in hits]


def assert_fts_in_sync(index: Index) -> None:
    """FTS5 checks its index against the events table (external content): stale rows would fail."""
    with contextlib.closing(sqlite3.connect(index.path)) as conn:
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 1)")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "cache" / "korg-recall" / "index.sqlite") as opened:
        yield opened


# --- location and opening ----------------------------------------------------------------------


def test_default_index_path_prefers_the_variable_then_xdg_then_home(tmp_path: Path) -> None:
    assert index_path({"KORG_RECALL_INDEX": str(tmp_path / "i.db"), "HOME": "/h"}) == tmp_path / "i.db"
    assert index_path({"KORG_RECALL_INDEX": "~/i.db", "HOME": "/h"}) == Path("/h/i.db")
    assert index_path({"XDG_CACHE_HOME": "/xdg", "HOME": "/h"}) == Path("/xdg/korg-recall/index.sqlite")
    assert index_path({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/korg-recall/index.sqlite")
    assert index_path({"HOME": "/h"}) == Path("/h/.cache/korg-recall/index.sqlite")


def test_index_creates_its_folder_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "index.sqlite"
    with Index(path):
        pass
    assert path.is_file()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_unwritable_index_folder_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError) as caught:
        Index(blocker / "index.sqlite")
    assert caught.value.exit_code == 3
    assert "KORG_RECALL_INDEX" in caught.value.message


def test_refs_parse_with_or_without_the_prefix() -> None:
    assert parse_ref("e42") == 42
    assert parse_ref("42") == 42
    with pytest.raises(UsageError, match="expected an id such as e123"):
        parse_ref("x42")


# --- incremental refresh -----------------------------------------------------------------------


def test_refresh_after_append_finds_the_new_line(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "s.jsonl"
    ledger.write_text(prompt(1, "first prompt about apples"))
    assert index.refresh([ledgers]).events_added == 1
    append(ledger, prompt(2, "second prompt about bananas"))
    report = index.refresh([ledgers])
    assert (report.events_added, report.files_changed) == (1, 1)
    assert find(index, "bananas", [ledgers]) == ["second prompt about bananas"]


def test_unchanged_files_are_only_stat_ed(index: Index, ledgers: Path) -> None:
    (ledgers / "s.jsonl").write_text(prompt(1, "hello"))
    index.refresh([ledgers])
    report = index.refresh([ledgers])
    assert (report.files_scanned, report.files_changed, report.events_added) == (1, 0, 0)


def test_partial_last_line_waits_for_its_newline(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "s.jsonl"
    whole = prompt(1, "complete line").encode() + prompt(2, "half written cherries").encode()
    ledger.write_bytes(whole[:-20])
    assert index.refresh([ledgers]).events_added == 1
    assert find(index, "cherries", [ledgers], mode="substring") == []
    ledger.write_bytes(whole)
    assert index.refresh([ledgers]).events_added == 1
    assert find(index, "cherries", [ledgers], mode="substring") == ["half written cherries"]


def test_truncated_file_is_reindexed_from_the_start(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "s.jsonl"
    ledger.write_text(prompt(1, "old one") + prompt(2, "old two"))
    index.refresh([ledgers])
    ledger.write_text(prompt(1, "fresh"))
    report = index.refresh([ledgers])
    assert (report.events_removed, report.events_added) == (2, 1)
    assert find(index, "old", [ledgers]) == []
    assert find(index, "fresh", [ledgers]) == ["fresh"]
    assert_fts_in_sync(index)


def test_replaced_file_with_a_new_inode_is_reindexed(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "s.jsonl"
    ledger.write_text(prompt(1, "before rotation"))
    index.refresh([ledgers])
    replacement = ledgers / "s.jsonl.tmp"
    replacement.write_text(prompt(1, "after rotation, longer than before") + prompt(2, "more"))
    os.replace(replacement, ledger)
    report = index.refresh([ledgers])
    assert (report.events_removed, report.events_added) == (1, 2)
    assert find(index, "before", [ledgers]) == ["after rotation, longer than before"]


def test_new_file_in_a_watched_folder_is_picked_up(index: Index, ledgers: Path) -> None:
    (ledgers / "a.jsonl").write_text(prompt(1, "alpha"))
    index.refresh([ledgers])
    nested = ledgers / "project"
    nested.mkdir()
    (nested / "b.jsonl").write_text(prompt(1, "beta"))
    assert index.refresh([ledgers]).events_added == 1
    assert find(index, "beta", [ledgers]) == ["beta"]


def test_deleted_file_keeps_its_events_marked_gone_until_pruned(index: Index, ledgers: Path) -> None:
    (ledgers / "keep.jsonl").write_text(prompt(1, "kept words"))
    (ledgers / "gone.jsonl").write_text(prompt(1, "doomed words") + prompt(2, "doomed too"))
    index.refresh([ledgers])
    (ledgers / "gone.jsonl").unlink()
    report = index.refresh([ledgers])
    assert (report.events_removed, report.files_gone) == (0, 1)
    hits = search(index, "doomed", mode="keyword", top_n=5, min_score=0, sources=[ledgers])
    assert sorted(hit.snippet for hit in hits) == ["doomed too", "doomed words"]
    assert all(hit.gone for hit in hits)
    assert index.stats()["gone"] == {"files": 1, "events": 2}
    assert index.prune_gone() == {
        "files_pruned": 1,
        "events_removed": 2,
        "paths": [str(ledgers / "gone.jsonl")],
    }
    assert find(index, "doomed", [ledgers]) == []
    assert index.stats()["events"] == 1
    assert_fts_in_sync(index)


def test_files_outside_this_calls_sources_are_kept_but_not_returned(index: Index, tmp_path: Path) -> None:
    mine, other = tmp_path / "mine.jsonl", tmp_path / "other.jsonl"
    mine.write_text(prompt(1, "shared word mine"))
    other.write_text(prompt(1, "shared word other"))
    index.refresh([mine, other])
    other.unlink()
    index.refresh([mine])  # other.jsonl is not under these sources: left alone
    assert index.stats()["events"] == 2
    assert find(index, "shared", [mine]) == ["shared word mine"]


def test_malformed_and_eventless_lines_are_counted(index: Index, ledgers: Path) -> None:
    (ledgers / "s.jsonl").write_text(prompt(1, "good") + "{not json\n" + '{"unrelated": 1}\n' + "[1, 2]\n")
    report = index.refresh([ledgers])
    assert (report.events_added, report.skipped_lines, report.ignored_lines) == (1, 2, 1)
    assert index.stats()["skipped_lines"] == 2


def test_big_file_is_written_in_batches_with_progress(
    index: Index, ledgers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index.batch_bytes = 500
    ledger = ledgers / "big.jsonl"
    ledger.write_text("".join(prompt(n, f"prompt number {n}") for n in range(1, 101)))
    calls: list[tuple[int, int]] = []
    report = index.refresh([ledgers], progress=lambda done, total: calls.append((done, total)))
    assert report.events_added == 100
    assert len(calls) > 10
    assert calls[-1] == (ledger.stat().st_size, ledger.stat().st_size)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_file_indexed_meanwhile_by_another_process_is_not_duplicated(
    tmp_path: Path, ledgers: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    ledger = ledgers / "s.jsonl"
    ledger.write_text("".join(prompt(n, f"prompt number {n}") for n in range(1, 31)))
    first = Index(tmp_path / "index.sqlite")
    second = Index(tmp_path / "index.sqlite")
    first.batch_bytes = second.batch_bytes = 300
    request.addfinalizer(first.close)
    request.addfinalizer(second.close)
    caught_up: list[int] = []

    def other_process_catches_up(done: int, total: int) -> None:
        if not caught_up:  # runs between two of first's batches
            caught_up.append(second.refresh([ledgers]).events_added)

    first.refresh([ledgers], progress=other_process_catches_up)
    assert 0 < caught_up[0] < 30
    assert first.stats()["events"] == 30
    ids = [
        hit.event_id
        for hit in search(first, "prompt", mode="keyword", top_n=50, min_score=0, sources=[ledgers])
    ]
    assert len(ids) == len(set(ids)) == 30


def test_refresh_interrupted_mid_file_resumes_next_time(
    index: Index, ledgers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index.batch_bytes = 300
    (ledgers / "s.jsonl").write_text("".join(prompt(n, f"prompt number {n}") for n in range(1, 31)))

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        index.refresh([ledgers], progress=interrupt)
    assert 0 < index.stats()["events"] < 30
    index.refresh([ledgers])
    assert index.stats()["events"] == 30


def test_refs_stay_the_same_across_refreshes(index: Index, ledgers: Path) -> None:
    ledger = ledgers / "s.jsonl"
    ledger.write_text(prompt(1, "stable needle"))
    index.refresh([ledgers])
    before = search(index, "needle", mode="keyword", top_n=1, min_score=0, sources=[ledgers])[0].ref
    append(ledger, prompt(2, "other"))
    index.refresh([ledgers])
    after = search(index, "needle", mode="keyword", top_n=1, min_score=0, sources=[ledgers])[0].ref
    assert before == after


# --- Claude Code tool results ------------------------------------------------------------------


def test_tool_result_in_a_later_read_is_joined_to_its_tool_use(index: Index, ledgers: Path) -> None:
    transcript = ledgers / "t.jsonl"
    transcript.write_text(tool_use("toolu_1", "/tmp/zoo.txt"))
    index.refresh([ledgers])
    assert find(index, "zebra", [ledgers]) == []
    append(transcript, tool_result("toolu_1", "zebra stripes"))
    index.refresh([ledgers])
    hits = search(index, "zebra", mode="keyword", top_n=5, min_score=0, sources=[ledgers])
    assert [hit.snippet for hit in hits] == ["Read file_path=/tmp/zoo.txt → zebra stripes"]
    [event] = index.get_events([hits[0].ref])
    assert event["result"] == {"output": "zebra stripes"}
    assert event["success"] is True
    assert event["extra"]["result_timestamp"] == "2026-05-27T10:00:02Z"
    assert find(index, "zebra", [ledgers], mode="substring") == [
        "Read file_path=/tmp/zoo.txt → zebra stripes"
    ]
    assert_fts_in_sync(index)


def test_tool_result_in_the_same_read_is_joined(index: Index, ledgers: Path) -> None:
    (ledgers / "t.jsonl").write_text(tool_use("toolu_2", "/a") + tool_result("toolu_2", "giraffe"))
    index.refresh([ledgers])
    assert find(index, "giraffe", [ledgers]) == ["Read file_path=/a → giraffe"]


def test_tool_result_seen_before_its_tool_use_waits_for_it(index: Index, ledgers: Path) -> None:
    transcript = ledgers / "t.jsonl"
    transcript.write_text(tool_result("toolu_3", "okapi"))
    index.refresh([ledgers])
    assert index.stats()["pending_results"] == 1
    append(transcript, tool_use("toolu_3", "/b"))
    index.refresh([ledgers])
    assert index.stats()["pending_results"] == 0
    assert find(index, "okapi", [ledgers]) == ["Read file_path=/b → okapi"]
    assert_fts_in_sync(index)


def test_huge_result_is_stored_as_readable_text_cut_with_a_marker(index: Index, ledgers: Path) -> None:
    big = "line of output\n" * (MAX_STORED_JSON // 10)
    (ledgers / "s.jsonl").write_text(line(1, "Read", args={"file_path": "/huge"}, result={"output": big}))
    index.refresh([ledgers])
    [hit] = search(index, "huge", mode="keyword", top_n=1, min_score=0, sources=[ledgers])
    [event] = index.get_events([hit.ref])
    output = event["result"]["output"]
    assert output.startswith("line of output\nline of output\n")  # text, not escaped JSON
    kept = MAX_STORED_JSON // 2
    assert output.endswith(f"… [{len(big) - kept:,} more characters not stored]")
    assert event["args"] == {"file_path": "/huge"}


# --- broken index files ------------------------------------------------------------------------


def _build(path: Path, ledgers: Path) -> None:
    (ledgers / "s.jsonl").write_text(
        "".join(prompt(n, f"walrus number {n} " + "pad " * 50) for n in range(200))
    )
    with Index(path) as built:
        built.refresh([ledgers])


def test_index_with_corrupt_pages_is_rebuilt(
    tmp_path: Path, ledgers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "index.sqlite"
    _build(path, ledgers)
    with open(path, "r+b") as handle:  # keep the header page, ruin the pages after it
        handle.seek(4096)
        handle.write(b"\xde\xad\xbe\xef" * 4096)
    with caplog.at_level(logging.WARNING, logger="korg_bridge.recall.history.index"), Index(path) as rebuilt:
        rebuilt.refresh([ledgers])
        assert rebuilt.stats()["events"] == 200
    assert "rebuilding" in caplog.text


def test_corruption_a_query_runs_into_rebuilds_and_retries(
    tmp_path: Path, ledgers: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(index_module, "QUICK_CHECK_MAX_BYTES", 0)  # as for a big index: no check on open
    path = tmp_path / "index.sqlite"
    _build(path, ledgers)
    with Index(path) as index:
        index.refresh([ledgers])
        size = path.stat().st_size
        with open(path, "r+b") as handle:  # ruin everything but the schema pages
            handle.seek(size // 2)
            handle.write(b"\xde\xad\xbe\xef" * ((size - size // 2) // 4))
        with caplog.at_level(logging.WARNING, logger="korg_bridge.recall.history.index"):
            hits = search(index, "walrus", mode="substring", top_n=300, min_score=0, sources=[ledgers])
        assert len(hits) == 200
    assert "is corrupt" in caplog.text


def test_index_from_a_newer_version_is_rebuilt(
    tmp_path: Path, ledgers: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "index.sqlite"
    _build(path, ledgers)
    newer = sqlite3.connect(path)
    newer.execute("INSERT INTO _migrations (name, applied_at) VALUES ('m999_future', 'later')")
    newer.commit()
    newer.close()
    with caplog.at_level(logging.WARNING, logger="korg_bridge.recall.history.index"), Index(path) as index:
        assert index.stats()["events"] == 0
    assert "schema this version does not know" in caplog.text


def test_empty_file_is_a_fresh_index(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    path.write_bytes(b"")
    with Index(path) as index:
        assert index.stats()["events"] == 0


# --- concurrency -------------------------------------------------------------------------------

CONCURRENT = """
import sys
from pathlib import Path
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.query.search import search
path, ledgers = Path(sys.argv[1]), Path(sys.argv[2])
with Index(path) as index:
    index.refresh([ledgers])
    hits = search(index, "needle", mode="keyword", top_n=5, min_score=0.3, sources=[ledgers])
    print(len(hits))
"""


def test_two_processes_refreshing_and_querying_at_once_both_succeed(tmp_path: Path, ledgers: Path) -> None:
    for number in range(4):
        rows = (prompt(n, f"needle {number} haystack {n} " + "straw " * 20) for n in range(3000))
        (ledgers / f"s{number}.jsonl").write_text("".join(rows))
    path = tmp_path / "index.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(path), str(ledgers)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == "5"
    with Index(path) as index:
        assert index.stats()["events"] == 12_000


def test_readers_do_not_wait_for_a_writer(tmp_path: Path, ledgers: Path) -> None:
    (ledgers / "s.jsonl").write_text(prompt(1, "quiet lake"))
    path = tmp_path / "index.sqlite"
    with Index(path) as index:
        index.refresh([ledgers])
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as writer:
            writer.execute("BEGIN IMMEDIATE")  # another process in the middle of indexing
            assert index.refresh([ledgers]).files_changed == 0  # nothing to write: no wait
            assert find(index, "lake", [ledgers]) == ["quiet lake"]
            writer.execute("ROLLBACK")


def test_index_locked_past_the_busy_timeout_is_a_clear_error(
    tmp_path: Path, ledgers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "BUSY_TIMEOUT_S", 0.05)
    path = tmp_path / "index.sqlite"
    with Index(path) as index:
        (ledgers / "s.jsonl").write_text(prompt(1, "new work"))
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as writer:
            writer.execute("BEGIN IMMEDIATE")
            with pytest.raises(KorgError, match="stayed locked by another process"):
                index.refresh([ledgers])
            writer.execute("ROLLBACK")
        assert index.refresh([ledgers]).events_added == 1


# --- show and stats ----------------------------------------------------------------------------


def test_get_events_adds_neighbours_from_the_same_session(index: Index, ledgers: Path) -> None:
    rows = [
        prompt(1, "a1", session="A"),
        prompt(2, "b1", session="B"),
        prompt(3, "a2", session="A"),
        prompt(4, "a3 target", session="A"),
        prompt(5, "b2", session="B"),
        prompt(6, "a4", session="A"),
        prompt(7, "a5", session="A"),
    ]
    (ledgers / "s.jsonl").write_text("".join(rows))
    index.refresh([ledgers])
    [hit] = search(index, "target", mode="keyword", top_n=1, min_score=0, sources=[ledgers])
    events = index.get_events([hit.ref], context=1)
    assert [event["text"] for event in events] == ["a2", "a3 target", "a4"]
    assert [event["is_match"] for event in events] == [False, True, False]
    assert events[1]["args"] == {"prompt": "a3 target"}
    assert events[1]["session"] == "A"
    assert events[1]["source"] == str(ledgers / "s.jsonl")
    assert [event["text"] for event in index.get_events([hit.ref], context=5)] == [
        "a1",
        "a2",
        "a3 target",
        "a4",
        "a5",
    ]


def test_get_events_rejects_unknown_refs(index: Index) -> None:
    with pytest.raises(UsageError) as caught:
        index.get_events(["e999"])
    assert caught.value.exit_code == 2
    assert "e999" in caught.value.message


def test_the_refresh_time_is_written_at_most_once_a_second_unless_what_it_passed_over_changed(
    index: Index, ledgers: Path
) -> None:
    from korg_bridge.recall.history.index import NOTE_EVERY_S

    (ledgers / "s.jsonl").write_text(prompt(1, "p"))

    def noted() -> dict[str, str]:
        rows = index._conn.execute("SELECT key, value FROM meta WHERE key IN ('last_refresh', 'passed_over')")
        return dict(rows.fetchall())

    index.refresh([ledgers])
    first = noted()
    index.refresh([ledgers])
    assert noted() == first  # a moment later, nothing else changed: not written again
    os.mkfifo(ledgers / "pipe.jsonl")  # something to pass over: written at once
    index.refresh([ledgers])
    assert noted()["passed_over"] != first["passed_over"]
    with index._conn:
        index._conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'last_refresh'", (repr(time.time() - 2 * NOTE_EVERY_S),)
        )
    index.refresh([ledgers])
    assert 0 <= time.time() - float(noted()["last_refresh"]) < NOTE_EVERY_S


def test_stats_describe_sources_events_and_freshness(index: Index, ledgers: Path) -> None:
    (ledgers / "s.jsonl").write_text(
        prompt(1, "p") + line(2, "Read", args={"file_path": "/x"}) + line(3, "Read", agent="agent:other")
    )
    assert index.stats()["last_refresh"] is None
    index.refresh([ledgers])
    stats = index.stats()
    assert stats["events"] == 3
    assert stats["by_tool"] == {"Read": 2, "user_prompt": 1}
    assert stats["by_agent"] == {"agent:test": 2, "agent:other": 1}
    assert stats["by_shape"] == {"legacy": 3}
    assert stats["last_refresh"].endswith("Z")
    assert 0 <= stats["last_refresh_age_s"] < 60
    assert stats["index_size_bytes"] > 0
    [source] = stats["sources"]
    assert source["path"] == str(ledgers / "s.jsonl")
    assert source["events"] == 3
    assert source["bytes_indexed"] == source["size"]
    assert source["indexed_at"].endswith("Z")


def test_peer_ledgers_index_and_pair_tool_results(index: Index) -> None:
    ledgers = PEERS / "ledgers"
    if not ledgers.is_dir():
        pytest.skip(peers_missing(ledgers))
    report = index.refresh([ledgers])
    assert report.events_added > 0
    assert report.skipped_lines == 0
    assert find(index, "hello world", [ledgers], mode="substring")[:2] == [
        "The file contains: hello world",
        "Read file_path=/tmp/foo → hello world",
    ]
    assert index.stats()["pending_results"] == 0
