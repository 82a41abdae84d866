"""Ingest of a slice: every line becomes rows or a skip with its reason, and reading goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from korg_bridge._fs.lines import MAX_LINE_BYTES
from korg_bridge.recall.history.ingest.batches import Batch, Work, read_file
from korg_bridge.recall.history.ingest.rows import ROW_COLUMNS
from korg_bridge.recall.history.ingest.sources import stat_file
from tests.helpers.paths import PEERS, peers_missing

SESSIONS = PEERS / "ledgers" / "sessions"
COLUMNS = [name.strip().strip('"') for name in ROW_COLUMNS.split(",")]

needs_peers = pytest.mark.skipif(not SESSIONS.is_dir(), reason=peers_missing(SESSIONS))


def read_all(path: Path, batch_bytes: int = 1 << 30, max_line: int = MAX_LINE_BYTES) -> list[Batch]:
    state = stat_file(path)
    assert state is not None
    return list(read_file(Work(str(path), state, None, 0, 0, False), batch_bytes, max_line))


def rows(batches: list[Batch]) -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, values, strict=False)) for batch in batches for values in batch.rows]


def skips(batches: list[Batch]) -> list[tuple[int, str]]:
    return [skip for batch in batches for skip in batch.skips]


def legacy(seq: Any, **more: Any) -> str:
    return json.dumps({"seq": seq, "source_agent": "agent:t", "tool_name": "t", **more})


@needs_peers
def test_a_transcript_is_read_whole_with_its_results_joined_in_the_slice() -> None:
    path = SESSIONS / "claude-code-transcript.jsonl"
    [batch] = read_all(path)
    assert (batch.end_offset, batch.end_line, batch.final) == (path.stat().st_size, 13, True)
    assert (len(batch.rows), len(batch.results), batch.skipped, batch.ignored) == (7, 0, 0, 5)
    read_call = next(row for row in rows([batch]) if row["tool"] == "Read")
    assert json.loads(read_call["result"]) == {"output": "hello world"}
    assert read_call["text"] == "Read file_path=/tmp/foo → hello world"


def test_lines_that_are_no_json_object_are_skipped_with_their_line_and_reason(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text(
        "\n".join(
            [legacy(1), "{broken", "[1,2]", '"text"', "", "  ", '{"unrelated": 1}', legacy(2), '{"a":1} x']
        )
        + "\n"
    )
    [batch] = read_all(path)
    assert [row["seq"] for row in rows([batch])] == [1, 2]
    assert (batch.skipped, batch.ignored, batch.end_line) == (4, 1, 9)
    assert [(number, reason.split(" (")[0]) for number, reason in batch.skips] == [
        (2, "not valid JSON"),
        (3, "not a JSON object"),
        (4, "not a JSON object"),
        (9, "not valid JSON"),
    ]


def test_crlf_line_endings_and_a_byte_order_mark_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (legacy(1) + "\r\n" + legacy(2) + "\r\n").encode())
    [batch] = read_all(path)
    assert [row["seq"] for row in rows([batch])] == [1, 2]
    assert batch.skipped == 0


def test_a_lone_surrogate_is_replaced_and_its_event_kept(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text(legacy(1, args={"prompt": "cut emoji \ud83d here"}) + "\n")  # written as \\ud83d
    [batch] = read_all(path)
    [row] = rows([batch])
    assert json.loads(row["args"]) == {"prompt": "cut emoji \ufffd here"}
    row["args"].encode("utf-8")  # what SQLite will be given: valid UTF-8
    assert batch.skipped == 0


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (legacy(2**70), "seq is beyond a 64-bit integer"),
        (legacy(1, triggered_by=-(2**64)), "triggered_by is beyond a 64-bit integer"),
        (legacy(1, result={"output": "[" * 500 + "]" * 500}), None),  # deep text is only text
        (legacy(1, result=json.loads("[" * 500 + "]" * 500)), "JSON nested deeper than 100 levels"),
        ("[" * 100_000 + "]" * 100_000, "JSON nested deeper than 100 levels"),
    ],
    ids=["seq-beyond-int64", "cause-beyond-int64", "brackets-in-a-string", "nested-500", "nested-100k"],
)
def test_a_poison_line_is_skipped_with_its_reason_and_the_next_is_read(
    tmp_path: Path, line: str, reason: str | None
) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text(legacy(1) + "\n" + line + "\n" + legacy(3) + "\n")
    [batch] = read_all(path)
    if reason is None:
        assert (batch.skipped, len(batch.rows)) == (0, 3)
        return
    assert [row["seq"] for row in rows([batch])] == [1, 3]
    assert [(number, text.split(" (")[0]) for number, text in batch.skips] == [(2, reason)]


def test_a_line_over_the_cap_is_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    big = legacy(2, result={"output": "x" * 5000})
    path.write_text(legacy(1) + "\n" + big + "\n" + legacy(3) + "\n")
    [batch] = read_all(path, max_line=1024)
    assert [row["seq"] for row in rows([batch])] == [1, 3]
    assert batch.skips == [(2, f"line of {len(big):,} bytes is over the 1,024-byte limit")]


def test_skip_records_are_capped_but_every_skip_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text("{bad\n" * 150)
    [batch] = read_all(path)
    assert (batch.skipped, len(batch.skips)) == (150, 100)


def test_a_resumed_transcript_counts_its_lines_from_the_saved_number(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    prompt = {"type": "user", "sessionId": "s", "message": {"content": "hi"}}
    path.write_text((json.dumps(prompt) + "\n") * 3)
    batches = read_all(path, batch_bytes=1)
    assert [[row["seq"] for row in rows([batch])] for batch in batches] == [[1], [2], [3]]
    assert [batch.final for batch in batches] == [False, False, True]
