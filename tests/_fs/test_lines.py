"""The line reader: complete lines from a byte offset, bounded memory, never blocking."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest

from korg_bridge._fs import lines as lines_module
from korg_bridge._fs.lines import HEAD_BYTES, Line, LineFile, head_hash
from korg_bridge.errors import ConfigError


def read(path: Path, offset: int = 0, line_no: int = 0, **options: int) -> list[Line]:
    with LineFile(path) as file:
        return list(file.lines(offset, line_no, **options))


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": ')
    [first] = read(path)
    assert (first.offset, first.number, first.data, first.end) == (0, 1, b'{"a": 1}', 9)
    with path.open("ab") as handle:
        handle.write(b"2}\n")
    [second] = read(path, first.end, first.number)
    assert (second.offset, second.number, second.data) == (9, 2, b'{"b": 2}')


def test_invalid_utf8_never_moves_a_line_boundary(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"\xff\xfe\n\xc3\nok\n")
    assert [(line.offset, line.data) for line in read(path)] == [(0, b"\xff\xfe"), (3, b"\xc3"), (5, b"ok")]


def test_blank_lines_count_in_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"a\n\n  \nb\n")
    assert [(line.number, line.data) for line in read(path, 0, 10)] == [
        (11, b"a"),
        (12, b""),
        (13, b"  "),
        (14, b"b"),
    ]


def test_lines_spanning_chunks_and_bounded_reads_match_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lines_module, "CHUNK_SIZE", 7)
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"".join(b"x" * n + b"\n" for n in range(1, 30)) + b"partial")
    whole = read(path)
    assert [line.size for line in whole] == list(range(1, 30))
    offset, number, seen = 0, 0, []
    while True:
        part = read(path, offset, number, max_bytes=50)
        if not part:
            break
        seen += part
        offset, number = part[-1].end, part[-1].number
    assert seen == whole


def test_a_line_over_the_cap_is_reported_without_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"short\n" + b"y" * 5000 + b"\nafter\n")
    found = read(path, max_line=1000)
    assert [(line.number, line.data, line.size) for line in found] == [
        (1, b"short", 5),
        (2, None, 5000),
        (3, b"after", 5),
    ]
    assert found[2].offset == 6 + 5001


def test_a_line_over_the_cap_is_never_held_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lines_module, "CHUNK_SIZE", 4096)
    path = tmp_path / "l.jsonl"
    with path.open("wb") as handle:
        handle.write(b'{"first": 1}\n')
        for _ in range(256):  # 4 MiB on one line
            handle.write(b"z" * 16384)
        handle.write(b'\n{"last": 1}\n')
    tracemalloc.start()
    try:
        found = read(path, max_line=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(line.number, line.data) for line in found] == [
        (1, b'{"first": 1}'),
        (2, None),
        (3, b'{"last": 1}'),
    ]
    assert found[1].size == 4 * 1024 * 1024
    assert peak < 512 * 1024


def test_an_oversized_line_still_being_written_waits_unread(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"ok\n" + b"w" * 3000)
    assert [line.data for line in read(path, max_line=100)] == [b"ok"]


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # nobody writes: a blocking open would never return
    with pytest.raises(ConfigError, match="not a regular file"):
        read(fifo)


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a regular file"):
        read(Path("/dev/zero"))


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ledger not found"):
        read(tmp_path / "gone.jsonl")


def test_head_hash_fingerprints_the_first_bytes_and_none_when_shorter(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    data = os.urandom(HEAD_BYTES * 2)
    path.write_bytes(data)
    assert head_hash(str(path), HEAD_BYTES) == hashlib.sha256(data[:HEAD_BYTES]).hexdigest()
    assert head_hash(str(path), 10) == hashlib.sha256(data[:10]).hexdigest()
    assert head_hash(str(path), HEAD_BYTES * 3) is None
    assert head_hash(str(tmp_path / "gone"), 10) is None
