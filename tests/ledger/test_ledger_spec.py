"""``verify`` to the korg-ledger@v1 spec: the samples, ``event_sig`` left out of the hash and
checked with a public key, the number domain, anchors, and safe reading of whatever path
it is handed (devices, FIFOs, sockets, over-long lines)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from korg_bridge._fs.lines import CHUNK_SIZE as READ_CHUNK
from korg_bridge.errors import ConfigError, DependencyMissing, UsageError
from korg_bridge.ledger.chain import GENESIS_HASH, LedgerWriter, entry_hash, preimage, verify_file
from korg_bridge.ledger.check import (
    MAX_INTEGER,
    MAX_LINE_BYTES,
    SignatureCheck,
    ledger_lines,
    parse_public_key,
)
from tests.helpers.cli import run
from tests.helpers.paths import REPO

SUBPROCESS_BOUND = 60.0


@pytest.fixture
def samples(peers: Path) -> Path:
    return peers / "ledgers" / "korg-ledger-v1" / "samples"


@pytest.fixture
def public_key(samples: Path) -> bytes:
    return parse_public_key((samples / "signed.pubkey").read_text())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in objects))
    return path


def _chain(*bodies: dict[str, Any]) -> list[dict[str, Any]]:
    """Entries chained and hashed exactly as a Python writer would, whatever their numbers."""
    out: list[dict[str, Any]] = []
    prev = GENESIS_HASH
    for seq, body in enumerate(bodies, start=1):
        event = {"schema_version": "1.0", "seq_id": seq, **body, "prev_hash": prev}
        event["entry_hash"] = prev = entry_hash(event)
        out.append(event)
    return out


def _cli(
    *args: str, env: dict[str, str] | None = None, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """korg-recall's entry point run by this interpreter (or ``code`` in its place, to vary it)."""
    program = code or "from korg_bridge.recall.cli.app import main; raise SystemExit(main())"
    return run([sys.executable, "-c", program, *args], env=env, cwd=REPO, timeout=SUBPROCESS_BOUND)


# --- the spec's samples ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "intact", "events"), [("session", True, 6), ("tampered", False, 6), ("signed", True, 2)]
)
def test_the_specs_samples_get_their_verdicts(samples: Path, name: str, intact: bool, events: int) -> None:
    report = verify_file(samples / f"{name}.jsonl")
    assert (report.intact, report.events) == (intact, events), report.errors
    if not intact:
        assert report.errors == [
            "seq 4: entry_hash mismatch (content tampered, or a keyed chain checked without its key)"
        ]


def test_a_signed_event_hashes_exactly_like_the_unsigned_one(samples: Path) -> None:
    for event in _lines(samples / "signed.jsonl"):
        unsigned = {k: v for k, v in event.items() if k != "event_sig"}
        assert entry_hash(event) == entry_hash(unsigned) == event["entry_hash"]
        assert b"event_sig" not in preimage(event)


def test_without_a_key_signatures_are_counted_but_not_checked(samples: Path) -> None:
    report = verify_file(samples / "signed.jsonl")
    assert report.to_dict()["signatures"] == {"public_key": None, "signed_events": 2, "verified": None}


def test_the_signed_sample_verifies_with_its_public_key(samples: Path, public_key: bytes) -> None:
    report = verify_file(samples / "signed.jsonl", public_key=public_key)
    assert report.intact, report.errors
    assert report.to_dict()["signatures"] == {
        "public_key": public_key.hex(),
        "signed_events": 2,
        "verified": 2,
    }


def test_a_wrong_public_key_fails_every_signature(samples: Path, public_key: bytes) -> None:
    wrong = bytes(byte ^ 0xFF for byte in public_key)
    report = verify_file(samples / "signed.jsonl", public_key=wrong)
    assert not report.intact
    assert [error.split(":")[0] for error in report.errors] == ["seq 1", "seq 2"]
    assert all("event_sig does not verify" in error for error in report.errors)


def test_a_flipped_signature_fails_while_the_chain_stays_intact(
    samples: Path, public_key: bytes, tmp_path: Path
) -> None:
    events = _lines(samples / "signed.jsonl")
    signature = events[1]["event_sig"]
    events[1]["event_sig"] = ("0" if signature[0] != "0" else "1") + signature[1:]
    path = _write(tmp_path / "flipped.jsonl", events)
    assert verify_file(path).intact  # event_sig is not hashed: only a key can catch this
    report = verify_file(path, public_key=public_key)
    assert report.errors == [
        "seq 2: event_sig does not verify (content or signature altered, or the wrong public key)"
    ]


def test_an_unsigned_or_malformed_signature_fails_when_a_key_is_given(
    samples: Path, public_key: bytes, tmp_path: Path
) -> None:
    events = _lines(samples / "signed.jsonl")
    del events[0]["event_sig"]
    events[1]["event_sig"] = "not hex"
    report = verify_file(_write(tmp_path / "l.jsonl", events), public_key=public_key)
    assert report.errors == [
        "seq 1: missing event_sig (not signed)",
        "seq 2: malformed event_sig (expected 128 lower-case hex characters)",
    ]


@pytest.mark.parametrize("text", ["", "zz", "ab" * 31, "ab" * 33, "g" * 64])
def test_a_public_key_that_is_not_64_hex_characters_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_public_key(text)
    assert info.value.exit_code == 2
    assert "64 hex characters" in info.value.message


def test_the_bridges_audit_ledgers_still_verify(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    writer = LedgerWriter(path, key=b"k")
    for i in range(3):
        writer.append({"tool_name": "t", "args": {"i": i}, "result": {"n": 2**53 - 1}})
    assert verify_file(path, key=b"k").intact


# --- the number domain -----------------------------------------------------------------------------


@pytest.mark.parametrize("number", [2**53, -(2**53), 10**30])
def test_integers_outside_the_number_domain_are_reported_not_hashed(tmp_path: Path, number: int) -> None:
    path = _write(tmp_path / "l.jsonl", _chain({"tool_name": "a"}, {"result": {"n": [1, number]}}, {"x": 1}))
    report = verify_file(path)
    assert not report.intact
    assert report.errors == [
        "seq 2: integer outside ±(2^53-1) at $.result.n[1]; not hashed (korg-ledger@v1 number domain)"
    ]


def test_integers_at_the_edge_of_the_domain_are_hashed(tmp_path: Path) -> None:
    path = _write(tmp_path / "l.jsonl", _chain({"n": MAX_INTEGER}, {"n": -MAX_INTEGER}))
    assert verify_file(path).intact


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(tmp_path: Path, constant: str) -> None:
    [event] = _chain({"n": 1})
    path = tmp_path / "l.jsonl"
    path.write_text(json.dumps(event).replace('"n": 1', f'"n": {constant}') + "\n")
    assert verify_file(path).errors == ["line 1: not a JSON object (malformed JSON)"]


# --- anchors ---------------------------------------------------------------------------------------


def _anchor(seq: int, digest: str, **extra: Any) -> dict[str, Any]:
    record = {
        "seq_id": seq,
        "entry_hash": digest,
        "anchor_kind": "rfc3161",
        "anchor_proof": "MIIB...",
        "anchored_at": "2026-06-14T03:00:00Z",
    }
    record.update(extra)
    return record


def test_anchors_that_match_the_chain_keep_it_intact(samples: Path, tmp_path: Path) -> None:
    chain = _lines(samples / "session.jsonl")
    anchors = _write(tmp_path / "anchors.jsonl", [_anchor(e["seq_id"], e["entry_hash"]) for e in chain[::2]])
    report = verify_file(samples / "session.jsonl", anchors=anchors)
    assert report.intact, report.errors
    assert report.to_dict()["anchors"] == {"path": str(anchors), "records": 3}


def test_anchor_mismatches_and_malformed_records_are_reported(samples: Path, tmp_path: Path) -> None:
    chain = _lines(samples / "session.jsonl")
    anchors = tmp_path / "anchors.jsonl"
    anchors.write_text(
        json.dumps(_anchor(1, chain[0]["entry_hash"]))
        + "\n"
        + json.dumps(_anchor(2, "0" * 64))
        + "\n"
        + json.dumps(_anchor(99, chain[0]["entry_hash"]))
        + "\n"
        + json.dumps({"seq_id": 3, "entry_hash": chain[2]["entry_hash"]})
        + "\n{not json\n"
        + json.dumps(_anchor(4, "ABC"))
        + "\n"
    )
    report = verify_file(samples / "session.jsonl", anchors=anchors)
    assert not report.intact
    assert report.errors == [
        "anchors line 2: seq 2: anchored entry_hash differs from the ledger's (the chain was rewritten after anchoring)",
        "anchors line 3: seq 99: no entry with this seq_id in the ledger",
        "anchors line 4: missing anchor_kind, anchor_proof, anchored_at",
        "anchors line 5: not a JSON object (malformed JSON)",
        "anchors line 6: seq 4: entry_hash is not 64 lower-case hex characters",
    ]


def test_a_chain_rewritten_after_anchoring_fails_on_its_anchors(tmp_path: Path) -> None:
    original = _chain({"tool_name": "a"}, {"tool_name": "b"})
    anchors = _write(tmp_path / "anchors.jsonl", [_anchor(2, original[1]["entry_hash"])])
    forged = _write(tmp_path / "l.jsonl", _chain({"tool_name": "a"}, {"tool_name": "forged"}))
    assert verify_file(forged).intact  # recomputed hashes: the chain alone cannot tell
    assert not verify_file(forged, anchors=anchors).intact


def test_a_missing_anchors_file_is_a_config_error(samples: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="anchors file not found"):
        verify_file(samples / "session.jsonl", anchors=tmp_path / "anchors.jsonl")


# --- what the path may be --------------------------------------------------------------------------


def test_a_character_device_is_refused_without_reading_it() -> None:
    with pytest.raises(ConfigError) as info:
        verify_file("/dev/urandom")
    assert info.value.exit_code == 3
    assert "it is a character device, not a regular file" in info.value.message


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(ConfigError, match="it is a socket, not a regular file"):
            verify_file(path)


@pytest.mark.parametrize("target", ["fifo", "/dev/urandom", "/dev/zero"])
def test_verify_of_a_fifo_or_a_device_ends_at_once_with_exit_3(tmp_path: Path, target: str) -> None:
    path = tmp_path / "ledger.fifo" if target == "fifo" else Path(target)
    if target == "fifo":
        os.mkfifo(path)  # nobody ever writes: opening it for reading would block forever
    done = _cli("verify", "--path", str(path))
    assert (done.returncode, done.stdout) == (3, "")
    assert "not a regular file" in done.stderr
    assert done.stderr.count("\n") == 1


def test_an_over_long_line_is_reported_and_the_chain_around_it_checked(tmp_path: Path) -> None:
    events = _chain({"tool_name": "a"}, {"tool_name": "b"}, {"tool_name": "c"})
    path = tmp_path / "l.jsonl"
    huge = json.dumps({"seq_id": 9, "blob": "x" * 5000})
    path.write_text(
        "\n".join([json.dumps(events[0]), huge, json.dumps(events[1]), json.dumps(events[2])]) + "\n"
    )
    report = verify_file(path, max_line_bytes=1000)
    assert report.events == 3
    assert report.errors == ["line 2: longer than 1000 bytes; not read"]


def test_an_over_long_line_is_never_held_whole(tmp_path: Path) -> None:
    [event] = _chain({"tool_name": "a"})
    path = tmp_path / "l.jsonl"
    with path.open("w") as handle:
        handle.write(json.dumps(event) + "\n")
        handle.write('{"blob": "' + "x" * (24 * 1024 * 1024) + '"}\n')
    tracemalloc.start()
    try:
        report = verify_file(path, max_line_bytes=MAX_LINE_BYTES // 8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.errors == [f"line 2: longer than {MAX_LINE_BYTES // 8} bytes; not read"]
    assert peak < 4 * READ_CHUNK + MAX_LINE_BYTES // 8  # a 24 MiB line, a few MiB of memory


def test_verify_reports_an_over_long_line_through_the_cli(tmp_path: Path) -> None:
    [event] = _chain({"tool_name": "a"})
    path = tmp_path / "l.jsonl"
    path.write_text(json.dumps(event) + "\n" + "[" + "1," * (MAX_LINE_BYTES // 2) + "1]\n")
    done = _cli("verify", "--path", str(path))
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["errors"] == [f"line 2: longer than {MAX_LINE_BYTES} bytes; not read"]


@pytest.mark.parametrize(
    "sizes", [[10, READ_CHUNK - 11, 5], [READ_CHUNK, 3], [READ_CHUNK + 7, READ_CHUNK * 2]]
)
def test_lines_across_read_chunks_come_back_whole(tmp_path: Path, sizes: list[int]) -> None:
    lines = [bytes([97 + i]) * size for i, size in enumerate(sizes)]
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\ntail")
    got = list(ledger_lines(path))
    assert [line.data for line in got] == [*lines, b"tail"]
    assert [line.terminated for line in got] == [True] * len(lines) + [False]


# --- verify on the command line --------------------------------------------------------------------


def test_verify_exits_1_on_a_tampered_ledger_so_a_deploy_after_it_does_not_run(samples: Path) -> None:
    done = _cli("verify", "--path", str(samples / "tampered.jsonl"))
    assert done.returncode == 1
    assert json.loads(done.stdout)["intact"] is False  # the report still prints
    assert done.stderr == ""
    assert _cli("verify", "--path", str(samples / "session.jsonl")).returncode == 0


def test_verify_checks_signatures_with_pubkey(samples: Path) -> None:
    key = (samples / "signed.pubkey").read_text().strip()
    good = _cli("verify", "--path", str(samples / "signed.jsonl"), "--pubkey", key)
    assert good.returncode == 0, good.stdout
    assert json.loads(good.stdout)["signatures"]["verified"] == 2
    wrong = _cli("verify", "--path", str(samples / "signed.jsonl"), "--pubkey", "11" * 32)
    assert wrong.returncode == 1
    assert "event_sig does not verify" in wrong.stdout


def test_a_bad_pubkey_is_exit_2_before_reading_anything(samples: Path) -> None:
    done = _cli("verify", "--path", str(samples / "signed.jsonl"), "--pubkey", "not-a-key")
    assert (done.returncode, done.stdout) == (2, "")
    assert "64 hex characters" in done.stderr


def test_pubkey_without_the_cryptography_package_is_exit_7_naming_the_extra(samples: Path) -> None:
    hide = (
        "import sys; sys.modules['cryptography'] = None\n"  # as on a machine without the [verify] extra
        "from korg_bridge.recall.cli.app import main; raise SystemExit(main())"
    )
    key = (samples / "signed.pubkey").read_text().strip()
    done = _cli("verify", "--path", str(samples / "signed.jsonl"), "--pubkey", key, code=hide)
    assert (done.returncode, done.stdout) == (7, "")
    assert "pip install 'korg-bridge[verify]'" in done.stderr


def test_signature_check_names_the_extra_when_it_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)
    for name in [name for name in sys.modules if name.startswith("cryptography.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(DependencyMissing) as info:
        SignatureCheck(bytes(32))
    assert info.value.exit_code == 7
    assert "[verify]" in info.value.message


def test_verify_checks_anchors_given_with_the_flag(samples: Path, tmp_path: Path) -> None:
    chain = _lines(samples / "session.jsonl")
    anchors = _write(tmp_path / "anchors.jsonl", [_anchor(3, chain[2]["entry_hash"]), _anchor(5, "1" * 64)])
    done = _cli("verify", "--path", str(samples / "session.jsonl"), "--anchors", str(anchors))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["anchors"] == {"path": str(anchors), "records": 2}
    assert [error.split(":")[0] for error in report["errors"]] == ["anchors line 2"]
