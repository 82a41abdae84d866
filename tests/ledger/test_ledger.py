"""korg-ledger@v1: conformance vectors, verification verdicts, and the crash-safe writer."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.errors import ConfigError, KorgError
from korg_bridge.ledger.chain import (
    GENESIS_HASH,
    LedgerWriter,
    VerifyReport,
    canonical,
    entry_hash,
    verify_file,
)
from tests.helpers.paths import PEERS, REPO, peers_missing

VECTORS_DIR = PEERS / "ledgers" / "korg-ledger-v1"
SESSIONS_DIR = PEERS / "ledgers" / "sessions"
CONFORMANCE_KEY = b"korg-conformance-key"

needs_peers = pytest.mark.skipif(not VECTORS_DIR.is_dir(), reason=peers_missing(VECTORS_DIR))


def _vectors() -> list[Any]:
    conformance = VECTORS_DIR / "conformance.json"
    if not conformance.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(reason=peers_missing(conformance)))]
    vectors = json.loads(conformance.read_text())["vectors"]
    return [pytest.param(vector, id=vector["file"]) for vector in vectors]


def _key(vector: dict[str, Any]) -> bytes | None:
    return vector["key"].encode() if vector["key"] is not None else None


@pytest.mark.parametrize("vector", _vectors())
def test_every_conformance_vector_gets_its_expected_verdict(vector: dict[str, Any]) -> None:
    report = verify_file(VECTORS_DIR / vector["file"], key=_key(vector))
    if vector["verify"] == "intact":
        assert report.intact, report.errors
        assert report.errors == []
        assert report.tip_entry_hash == vector["tip_entry_hash"]
    else:
        assert not report.intact
        assert any(error.startswith(vector["error_contains"] + ":") for error in report.errors), report.errors


@needs_peers
def test_conformance_file_names_five_vectors_so_none_is_silently_dropped() -> None:
    vectors = json.loads((VECTORS_DIR / "conformance.json").read_text())["vectors"]
    assert {v["file"] for v in vectors} == {
        "basic-intact.jsonl",
        "hmac-intact.jsonl",
        "nonbmp-intact.jsonl",
        "tampered-content.jsonl",
        "tampered-deletion.jsonl",
    }


@needs_peers
@pytest.mark.parametrize("key", [None, b"not-the-conformance-key"], ids=["no-key", "wrong-key"])
def test_keyed_chain_fails_without_its_key(key: bytes | None) -> None:
    report = verify_file(VECTORS_DIR / "hmac-intact.jsonl", key=key)
    assert not report.intact
    assert [error.split(":")[0] for error in report.errors] == ["seq 1", "seq 2", "seq 3"]
    assert all("entry_hash mismatch" in error for error in report.errors)


@needs_peers
def test_unkeyed_chain_fails_when_checked_with_a_key() -> None:
    assert not verify_file(VECTORS_DIR / "basic-intact.jsonl", key=CONFORMANCE_KEY).intact


@needs_peers
def test_tampered_content_vector_names_only_the_tampered_seq() -> None:
    report = verify_file(VECTORS_DIR / "tampered-content.jsonl")
    assert report.errors == [
        "seq 2: entry_hash mismatch (content tampered, or a keyed chain checked without its key)"
    ]


@needs_peers
def test_deletion_vector_is_reported_as_a_broken_link_at_seq_3() -> None:
    report = verify_file(VECTORS_DIR / "tampered-deletion.jsonl")
    assert report.events == 2
    assert len(report.errors) == 1
    assert report.errors[0].startswith("seq 3: prev_hash mismatch")


@needs_peers
def test_envelope_session_verifies_intact_over_the_whole_line() -> None:
    report = verify_file(SESSIONS_DIR / "korg-envelope-session.jsonl")
    assert report.intact, report.errors
    assert report.events == 6
    assert report.tip_entry_hash == "a53eeeb57870e8ec8293128cada369d22a0d853392117ef834d5de5d63f38739"


@needs_peers
def test_envelope_tampered_session_names_the_silently_reverted_edit_at_seq_4() -> None:
    report = verify_file(SESSIONS_DIR / "korg-envelope-tampered.jsonl")
    assert not report.intact
    assert len(report.errors) == 1
    assert report.errors[0].startswith("seq 4: entry_hash mismatch")


def test_canonical_form_escapes_astral_characters_as_lower_case_surrogate_pairs() -> None:
    assert canonical({"b": "😀", "a": "中"}) == b'{"a":"\\u4e2d","b":"\\ud83d\\ude00"}'


def test_entry_hash_ignores_an_existing_entry_hash_field() -> None:
    event = {"seq_id": 1, "prev_hash": GENESIS_HASH}
    assert entry_hash(event) == entry_hash({**event, "entry_hash": "whatever"})
    assert entry_hash(event, b"k") != entry_hash(event)


def test_report_dict_has_exactly_the_documented_keys(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    LedgerWriter(path).append({"tool_name": "t"})
    report = verify_file(path)
    assert isinstance(report, VerifyReport)
    assert set(report.to_dict()) == {"path", "events", "intact", "tip_entry_hash", "errors"}
    assert report.to_dict()["path"] == str(path)


# --- verification of hand-made damage -------------------------------------------------------------


def _write_chain(path: Path, count: int, key: bytes | None = None) -> list[dict[str, Any]]:
    writer = LedgerWriter(path, key=key)
    return [
        writer.append(
            {"source_agent": "agent:test", "tool_name": "t", "args": {"i": i}, "triggered_by": i or None}
        )
        for i in range(count)
    ]


def test_empty_file_is_an_intact_empty_chain(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    assert verify_file(path).to_dict() == {
        "path": str(path),
        "events": 0,
        "intact": True,
        "tip_entry_hash": None,
        "errors": [],
    }


def test_missing_ledger_raises_config_error_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    with pytest.raises(ConfigError) as info:
        verify_file(path)
    assert info.value.exit_code == 3
    assert str(info.value) == f"ledger not found: {path}. Pass the path of a korg-ledger@v1 .jsonl file."


def test_unreadable_ledger_path_raises_a_korg_error(tmp_path: Path) -> None:
    with pytest.raises(KorgError, match="cannot read ledger"):
        verify_file(tmp_path)


def test_reordered_entries_break_the_link(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_chain(path, 4)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + lines[2] + lines[1] + lines[3])
    errors = verify_file(path).errors
    assert any(e.startswith("seq 3: prev_hash mismatch") for e in errors), errors


def test_entry_without_entry_hash_is_reported_as_not_chained(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_chain(path, 2)
    with path.open("a") as handle:
        handle.write(json.dumps({"seq_id": 3, "prev_hash": "x"}) + "\n")
    report = verify_file(path)
    assert report.errors == ["seq 3: missing entry_hash (not chained)"]
    assert report.tip_entry_hash is None


def test_duplicate_seq_and_causality_violations_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    lines = []
    prev = GENESIS_HASH
    for seq, cause in [(1, None), (2, 2), (2, 1), (3, 7)]:
        event: dict[str, Any] = {"seq_id": seq, "triggered_by": cause, "prev_hash": prev}
        event["entry_hash"] = prev = entry_hash(event)
        lines.append(json.dumps(event))
    path.write_text("\n".join(lines) + "\n")
    errors = verify_file(path).errors
    assert errors == [
        "seq 2: triggered_by 2 is not strictly earlier than its seq_id",
        "seq 2: duplicate seq_id (first seen on line 2)",
        "seq 3: triggered_by 7 is not strictly earlier than its seq_id",
    ]


def test_line_without_an_integer_seq_id_is_named_by_line_number(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    event: dict[str, Any] = {"seq_id": "1", "prev_hash": GENESIS_HASH}
    event["entry_hash"] = entry_hash(event)
    path.write_text(json.dumps(event) + "\n\n")
    assert verify_file(path).errors == ["line 1: no integer seq_id"]


def test_malformed_and_non_object_lines_name_their_line_number(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_chain(path, 2)
    with path.open("ab") as handle:
        handle.write(b"{not json\n[1, 2]\n")
    report = verify_file(path)
    assert not report.intact
    assert report.events == 2
    assert report.errors == ["line 3: not a JSON object (malformed JSON)", "line 4: not a JSON object"]


def test_torn_last_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_chain(path, 2)
    with path.open("ab") as handle:
        handle.write(b'{"schema_version": "1.0", "seq_')
    report = verify_file(path)
    assert report.errors == ["line 3: torn last line (no trailing newline, not valid JSON)"]


def test_complete_last_line_without_newline_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    _write_chain(path, 2)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert verify_file(path).intact


# --- the writer -----------------------------------------------------------------------------------


def _vector_fields(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        out.append({k: v for k, v in obj.items() if k not in ("seq_id", "prev_hash", "entry_hash")})
    return out


@needs_peers
@pytest.mark.parametrize(
    ("name", "key"),
    [("basic-intact.jsonl", None), ("hmac-intact.jsonl", CONFORMANCE_KEY), ("nonbmp-intact.jsonl", None)],
)
def test_writer_reproduces_the_conformance_vectors_byte_for_byte(
    tmp_path: Path, name: str, key: bytes | None
) -> None:
    vector = VECTORS_DIR / name
    out = tmp_path / name
    writer = LedgerWriter(out, key=key)
    written = [writer.append(fields) for fields in _vector_fields(vector)]
    expected = [json.loads(line) for line in vector.read_text().splitlines()]
    assert [e["entry_hash"] for e in written] == [e["entry_hash"] for e in expected]
    assert out.read_bytes() == vector.read_bytes()


def test_writer_assigns_seq_prev_and_schema_version(tmp_path: Path) -> None:
    events = _write_chain(tmp_path / "l.jsonl", 3)
    assert [e["seq_id"] for e in events] == [1, 2, 3]
    assert events[0]["prev_hash"] == GENESIS_HASH
    assert events[1]["prev_hash"] == events[0]["entry_hash"]
    assert {e["schema_version"] for e in events} == {"1.0"}
    assert list(events[0])[:2] == ["schema_version", "seq_id"]


def test_writer_refuses_fields_it_owns(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="seq_id"):
        LedgerWriter(tmp_path / "l.jsonl").append({"seq_id": 9})


def test_writer_into_a_missing_folder_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot open ledger"):
        LedgerWriter(tmp_path / "no" / "l.jsonl").append({"tool_name": "t"})


def test_writer_refuses_to_chain_onto_a_foreign_last_line(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_text('{"seq": 1, "tool_name": "legacy"}\n')
    with pytest.raises(ConfigError, match="refusing to append"):
        LedgerWriter(path).append({"tool_name": "t"})


def test_writer_chains_onto_the_tail_without_parsing_earlier_lines(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    # Earlier garbage (larger than one tail block) would break a writer that parsed the whole file.
    path.write_bytes(b"garbage line\n" * 10_000)
    tip: dict[str, Any] = {"seq_id": 41, "prev_hash": GENESIS_HASH}
    tip["entry_hash"] = entry_hash(tip)
    with path.open("a") as handle:
        handle.write(json.dumps(tip) + "\n\n")
    event = LedgerWriter(path).append({"tool_name": "t"})
    assert event["seq_id"] == 42
    assert event["prev_hash"] == tip["entry_hash"]


def test_torn_last_line_is_cut_and_the_chain_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "l.jsonl"
    events = _write_chain(path, 3)
    intact_size = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b'{"schema_version": "1.0", "seq_id": 4, "tool_na')
    with caplog.at_level(logging.WARNING, logger="korg_bridge.ledger.chain"):
        event = LedgerWriter(path).append({"tool_name": "after-crash"})
    assert "cut a torn last line of 47 bytes" in caplog.text
    assert event["seq_id"] == 4
    assert event["prev_hash"] == events[-1]["entry_hash"]
    assert path.read_bytes()[intact_size:] == (json.dumps(event) + "\n").encode()
    report = verify_file(path)
    assert report.intact, report.errors
    assert report.events == 4


def test_complete_last_entry_missing_its_newline_is_kept_not_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "l.jsonl"
    events = _write_chain(path, 2)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    with caplog.at_level(logging.WARNING, logger="korg_bridge.ledger.chain"):
        event = LedgerWriter(path).append({"tool_name": "t"})
    assert "terminated it" in caplog.text
    assert (event["seq_id"], event["prev_hash"]) == (3, events[-1]["entry_hash"])
    report = verify_file(path)
    assert report.intact, report.errors
    assert report.events == 3


def test_a_file_that_is_only_a_torn_line_restarts_from_genesis(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b'{"schema_version": "1.0", "seq_id": 1')
    event = LedgerWriter(path).append({"tool_name": "t"})
    assert (event["seq_id"], event["prev_hash"]) == (1, GENESIS_HASH)
    assert verify_file(path).intact


_APPENDER = """
import sys
from korg_bridge.ledger.chain import LedgerWriter
writer = LedgerWriter(sys.argv[1])
count = int(sys.argv[3])
i = 0
while count < 0 or i < count:
    writer.append({"source_agent": sys.argv[2], "tool_name": "t", "args": {"i": i}})
    i += 1
"""


def _spawn_appender(path: Path, agent: str, count: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-c", _APPENDER, str(path), agent, str(count)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_two_processes_appending_concurrently_build_one_intact_chain(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    children = [_spawn_appender(path, agent, 200) for agent in ("agent:a", "agent:b")]
    for child in children:
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr.decode()
    report = verify_file(path)
    assert report.intact, report.errors[:5]
    assert report.events == 400
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["seq_id"] for e in lines] == list(range(1, 401))
    for agent in ("agent:a", "agent:b"):
        assert [e["args"]["i"] for e in lines if e["source_agent"] == agent] == list(range(200))


def test_kill_9_mid_append_loop_leaves_a_verifiable_ledger(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    child = _spawn_appender(path, "agent:doomed", -1)
    try:
        deadline = time.monotonic() + 60
        while not path.exists() or path.read_bytes().count(b"\n") < 50:
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            assert time.monotonic() < deadline, "child never wrote 50 entries"
            time.sleep(0.01)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    before = verify_file(path)
    # Either intact, or the only damage is a torn last line the next writer cuts.
    assert before.intact or (len(before.errors) == 1 and "torn last line" in before.errors[0])
    LedgerWriter(path).append({"source_agent": "agent:next", "tool_name": "t"})
    after = verify_file(path)
    assert after.intact, after.errors
    assert after.events >= 51
