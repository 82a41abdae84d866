"""The audit log: one verifiable, redacted korg-ledger@v1 entry per tool call."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from korg_bridge._version import __version__
from korg_bridge.errors import ConfigError
from korg_bridge.ledger.chain import GENESIS_HASH, verify_file
from korg_bridge.serving.audit import OUTPUT_PREVIEW_BYTES, AuditLog, is_secret_name, output_preview
from tests.helpers.paths import REPO

CONFORMANCE_KEY = b"korg-conformance-key"
REQUIRED_FIELDS = [
    "schema_version",
    "seq_id",
    "source_agent",
    "tool_name",
    "args",
    "result",
    "success",
    "duration_ms",
    "timestamp",
    "prev_hash",
    "entry_hash",
]


async def _ok(audit: AuditLog, command_id: str = "thump.echo", **overrides: Any) -> dict[str, Any]:
    call: dict[str, Any] = {
        "command_id": command_id,
        "tool_name": command_id.replace(".", "_"),
        "arguments": {"query": "hello"},
        "success": True,
        "exit_code": 0,
        "output": "hello\n",
        "duration_ms": 12,
    }
    call.update(overrides)
    return await audit.record(**call)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- the format -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [("basic-intact.jsonl", None), ("hmac-intact.jsonl", CONFORMANCE_KEY), ("nonbmp-intact.jsonl", None)],
)
def test_audit_write_path_reproduces_the_conformance_vectors_byte_for_byte(
    peers: Path, tmp_path: Path, name: str, key: bytes | None
) -> None:
    vector = peers / "ledgers" / "korg-ledger-v1" / name
    expected = _lines(vector)
    audit = AuditLog(tmp_path / name, key=key)
    written = [
        audit._append({k: v for k, v in entry.items() if k not in ("seq_id", "prev_hash", "entry_hash")})
        for entry in expected
    ]
    assert [e["entry_hash"] for e in written] == [e["entry_hash"] for e in expected]
    assert (tmp_path / name).read_bytes() == vector.read_bytes()


@pytest.mark.anyio
async def test_allowed_denied_and_failed_calls_build_one_intact_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path, binary="thump")
    ok = await _ok(audit)
    denied = await _ok(
        audit,
        "thump.write",
        arguments={"path": "x.txt"},
        success=False,
        exit_code=None,
        output="thump.write is not allowed: side effect fs_write",
        duration_ms=0,
        reason="side effect fs_write is not allowed by the policy",
    )
    failed = await _ok(
        audit, "thump.fail", arguments=None, success=False, exit_code=3, output="[exit_code] 3 (error.config)"
    )

    report = verify_file(path)
    assert report.intact, report.errors
    assert report.events == 3
    assert report.tip_entry_hash == failed["entry_hash"]
    assert _lines(path) == [ok, denied, failed]
    assert [e["seq_id"] for e in (ok, denied, failed)] == [1, 2, 3]
    assert ok["prev_hash"] == GENESIS_HASH

    assert list(ok)[:9] == REQUIRED_FIELDS[:9]
    assert list(ok)[-2:] == ["prev_hash", "entry_hash"]
    assert ok["source_agent"] == f"agent:korg-bridge@{__version__}"
    assert (ok["tool_name"], ok["mcp_tool"], ok["binary"]) == ("thump.echo", "thump_echo", "thump")
    assert ok["args"] == {"query": "hello"}
    assert ok["result"] == {"exit_code": 0, "output_bytes": 6, "output": "hello\n", "output_truncated": False}
    assert (ok["success"], ok["duration_ms"]) == (True, 12)
    assert ok["timestamp"].endswith("Z") and ok["timestamp"][10] == "T"

    assert denied["success"] is False
    assert denied["result"]["exit_code"] is None
    assert denied["result"]["reason"] == "side effect fs_write is not allowed by the policy"
    assert (failed["success"], failed["result"]["exit_code"]) == (False, 3)
    assert "reason" not in failed["result"]
    assert failed["args"] == {}


@pytest.mark.anyio
async def test_entry_hash_is_sha256_of_the_canonical_event_without_it(tmp_path: Path) -> None:
    # Independent of korg_bridge.ledger.chain: the spec's formula written out again.
    event = await _ok(AuditLog(tmp_path / "a.jsonl"), arguments={"prompt": "中文 😀"})
    preimage = json.dumps(
        {k: v for k, v in event.items() if k != "entry_hash"}, sort_keys=True, separators=(",", ":")
    )
    assert event["entry_hash"] == hashlib.sha256(preimage.encode("ascii")).hexdigest()


@pytest.mark.anyio
async def test_keyed_audit_log_verifies_only_with_its_key(tmp_path: Path) -> None:
    path = tmp_path / "keyed.jsonl"
    audit = AuditLog.from_env(None, {"KORG_BRIDGE_AUDIT": str(path), "KORG_LEDGER_KEY": "s3cret-key"})
    assert audit is not None and audit.keyed
    event = await _ok(audit)
    await _ok(audit)
    preimage = json.dumps(
        {k: v for k, v in event.items() if k != "entry_hash"}, sort_keys=True, separators=(",", ":")
    )
    assert event["entry_hash"] == hmac.new(b"s3cret-key", preimage.encode(), hashlib.sha256).hexdigest()
    assert verify_file(path, key=b"s3cret-key").intact
    assert not verify_file(path).intact
    assert not verify_file(path, key=b"another-key").intact


def test_from_env_prefers_the_flag_and_returns_none_when_nothing_asks_for_an_audit(tmp_path: Path) -> None:
    assert AuditLog.from_env(None, {}) is None
    assert AuditLog.from_env(None, {"KORG_BRIDGE_AUDIT": ""}) is None
    flag = AuditLog.from_env(str(tmp_path / "flag.jsonl"), {"KORG_BRIDGE_AUDIT": str(tmp_path / "env.jsonl")})
    assert flag is not None
    assert flag.path == tmp_path / "flag.jsonl"
    assert not flag.keyed
    assert not (tmp_path / "env.jsonl").exists()


def test_a_new_audit_log_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    AuditLog(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == b""


# --- what is written: redaction and truncation -----------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "api_key",
        "apiKey",
        "APIKey",
        "AUTH_TOKEN",
        "db-password",
        "clientSecret",
        "passphrase",
        "accesstoken",
        "private_key",
        "Authorization",
        "credentials",
        "key",
        "x-api-key",
        "GITHUB_TOKEN",
        "cookie",
    ],
)
def test_property_names_with_a_secret_word_are_secret(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "monkey",
        "keyword",
        "author",
        "max_tokens",
        "prompt_tokens",
        "query",
        "path",
        "turkey_count",
        "donkeys",
    ],
)
def test_property_names_that_merely_contain_a_secret_word_are_not(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.anyio
async def test_secrets_never_reach_the_file_by_name_or_by_format(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    github = "ghp_" + "A1b2C3d4" * 5
    anthropic = "sk-ant-api03-" + "Zx9" * 10
    arguments = {
        "api_key": "plain-value-one",
        "AUTH_TOKEN": "plain-value-two",
        "db-password": "hunter2hunter2",
        "nested": {"clientSecret": "plain-value-three", "items": [{"apiKey": "plain-value-four"}]},
        "monkey": "banana",
        "verbose": True,
        "auth": True,
        "max_tokens": 100,
        "note": f"use {anthropic} please",
        "url": "postgres://admin:pw-in-url-123@db.example/prod",
    }
    event = await _ok(
        AuditLog(path),
        arguments=arguments,
        output=f"token is {github}\nAuthorization: Bearer abcdef0123456789xyz\n",
        success=False,
        reason=f"refused {github}",
    )
    raw = path.read_text()
    for secret in ("plain-value", "hunter2", anthropic, github, "pw-in-url-123", "abcdef0123456789xyz"):
        assert secret not in raw
    args = event["args"]
    assert args["api_key"] == args["AUTH_TOKEN"] == args["db-password"] == "[redacted]"
    assert args["nested"] == {"clientSecret": "[redacted]", "items": [{"apiKey": "[redacted]"}]}
    assert (args["monkey"], args["verbose"], args["auth"], args["max_tokens"]) == ("banana", True, True, 100)
    assert args["note"] == "use [redacted] please"
    assert args["url"] == "postgres://admin:[redacted]@db.example/prod"
    assert event["result"]["output"] == "token is [redacted]\nAuthorization: Bearer [redacted]\n"
    assert event["result"]["reason"] == "refused [redacted]"
    assert verify_file(path).intact
    assert arguments["api_key"] == "plain-value-one"  # the caller's arguments are not modified


@pytest.mark.anyio
async def test_pin_mnemonic_and_signature_are_redacted_in_the_ledger_like_password(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    arguments = {
        "password": "pw-value-1",
        "pin": "4821",
        "card": {"pinCode": 90210, "holder": "Ana"},
        "mnemonic": "abandon ability able about above absent",
        "signature": "3045022100ab12cd34",
        "pinned": True,
        "signature_algorithm": "ed25519",
    }
    event = await _ok(AuditLog(path), arguments=arguments)
    raw = path.read_text()
    for secret in ("pw-value-1", "4821", "90210", "abandon ability", "3045022100ab12cd34"):
        assert secret not in raw
    args = event["args"]
    assert args["password"] == args["pin"] == args["mnemonic"] == args["signature"] == "[redacted]"
    assert args["card"] == {"pinCode": "[redacted]", "holder": "Ana"}
    assert (args["pinned"], args["signature_algorithm"]) == (True, "ed25519")
    assert verify_file(path).intact


@pytest.mark.anyio
async def test_output_is_cut_to_2_kb_with_its_full_size_recorded(tmp_path: Path) -> None:
    output = "é" * 5000  # 2 bytes each: the cut must land on a character boundary
    event = await _ok(AuditLog(tmp_path / "a.jsonl"), output=output)
    result = event["result"]
    assert result["output"] == "é" * (OUTPUT_PREVIEW_BYTES // 2)
    assert result["output_bytes"] == 10_000
    assert result["output_truncated"] is True


def test_a_secret_straddling_the_preview_end_is_redacted_not_half_kept() -> None:
    secret = "sk-ant-api03-" + "Q" * 40
    preview, truncated = output_preview("x" * (OUTPUT_PREVIEW_BYTES - 20) + " " + secret + " " + "y" * 10_000)
    assert truncated
    assert "QQQ" not in preview
    assert preview == "x" * (OUTPUT_PREVIEW_BYTES - 20) + " [redacted] " + "y" * 8


def test_redaction_shrinking_the_window_still_scans_far_enough() -> None:
    # Many secrets shrink the first window below the preview; the window must grow.
    secret = "ghp_" + "B" * 36
    preview, _ = output_preview((secret + " ") * 400 + "z" * 10_000)
    assert "BBBB" not in preview
    assert len(preview.encode()) == OUTPUT_PREVIEW_BYTES


# --- opening, restart and crashes -----------------------------------------------------------------


@pytest.mark.anyio
async def test_restart_resumes_the_chain_where_it_stopped(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    first = [await _ok(AuditLog(path)), await _ok(AuditLog(path))]
    third = await _ok(AuditLog(path))
    assert [e["seq_id"] for e in [*first, third]] == [1, 2, 3]
    assert third["prev_hash"] == first[-1]["entry_hash"]
    assert verify_file(path).intact


@pytest.mark.anyio
async def test_torn_last_line_is_cut_and_reported_when_the_log_opens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path)
    before = [await _ok(audit), await _ok(audit)]
    intact = path.read_bytes()
    with path.open("ab") as handle:
        handle.write(b'{"schema_version": "1.0", "seq_id": 3, "source_agent": "agent:korg-br')
    assert not verify_file(path).intact
    with caplog.at_level(logging.WARNING):
        reopened = AuditLog(path)
    assert "cut a torn last line" in caplog.text
    assert path.read_bytes() == intact
    after = await _ok(reopened)
    assert (after["seq_id"], after["prev_hash"]) == (3, before[-1]["entry_hash"])
    assert verify_file(path).intact


def test_a_folder_is_refused_with_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a folder") as info:
        AuditLog(tmp_path)
    assert info.value.exit_code == 3


def test_a_missing_folder_is_refused_with_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        AuditLog(tmp_path / "nope" / "audit.jsonl")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_an_unwritable_file_is_refused_with_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"")
    path.chmod(0o400)
    with pytest.raises(ConfigError, match="cannot open audit log"):
        AuditLog(path)


@pytest.mark.parametrize(
    "content",
    [
        b"export PATH=/usr/bin\n",
        b'{"name": "config"}',
        b'{"seq": 1, "tool_name": "legacy"}\n',
        b"\x00\x01binary",
    ],
    ids=["shell-script", "json-without-newline", "legacy-ledger", "binary"],
)
def test_a_file_that_is_not_a_ledger_is_refused_and_left_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "not-a-ledger"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=r"not a korg-ledger@v1 file"):
        AuditLog(path)
    assert path.read_bytes() == content


def test_a_device_is_refused_as_not_a_regular_file() -> None:
    with pytest.raises(ConfigError, match="not a regular file"):
        AuditLog("/dev/null")


@pytest.mark.anyio
async def test_a_failed_append_is_logged_and_does_not_raise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path)
    await _ok(audit)
    path.write_text("this is no longer a ledger\n")  # someone replaced the file under us
    with caplog.at_level(logging.ERROR):
        assert await _ok(audit) == {}
    assert "could not record the call of thump.echo" in caplog.text


@pytest.mark.anyio
async def test_a_call_cancelled_while_being_recorded_is_still_recorded_whole(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(path)
    with anyio.CancelScope() as scope:
        scope.cancel()
        event = await _ok(audit)
    assert event["seq_id"] == 1
    report = verify_file(path)
    assert (report.intact, report.events) == (True, 1)


@pytest.mark.anyio
async def test_a_file_holding_only_a_torn_first_entry_restarts_from_genesis(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"schema_version": "1.0", "seq_id": 1, "sou')
    event = await _ok(AuditLog(path))
    assert (event["seq_id"], event["prev_hash"]) == (1, GENESIS_HASH)
    assert verify_file(path).intact


# --- several processes ----------------------------------------------------------------------------

_RECORDER = """
import sys
import anyio
from korg_bridge.serving.audit import AuditLog

async def main(path: str, name: str, count: int) -> None:
    audit = AuditLog(path, binary=name)
    i = 0
    while count < 0 or i < count:
        event = await audit.record(
            command_id="thump.echo", tool_name="thump_echo", arguments={"i": i}, success=True,
            exit_code=0, output="x" * 300, duration_ms=1,
        )
        assert event, "record failed"
        i += 1

anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def _spawn_recorder(path: Path, name: str, count: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-c", _RECORDER, str(path), name, str(count)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_two_bridges_recording_concurrently_build_one_intact_chain(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    AuditLog(path)  # created first, so neither child races the other to create it
    children = [_spawn_recorder(path, name, 150) for name in ("bridge-a", "bridge-b")]
    for child in children:
        _, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr.decode()
    report = verify_file(path)
    assert report.intact, report.errors[:5]
    assert report.events == 300
    lines = _lines(path)
    assert [e["seq_id"] for e in lines] == list(range(1, 301))
    for name in ("bridge-a", "bridge-b"):
        assert [e["args"]["i"] for e in lines if e["binary"] == name] == list(range(150))


@pytest.mark.anyio
async def test_a_bridge_killed_mid_recording_leaves_a_ledger_the_next_run_continues(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    child = _spawn_recorder(path, "doomed", -1)
    try:
        deadline = time.monotonic() + 60
        while not path.exists() or path.read_bytes().count(b"\n") < 40:
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            assert time.monotonic() < deadline, "the child never recorded 40 calls"
            await anyio.sleep(0.01)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    before = verify_file(path)
    assert before.intact or (len(before.errors) == 1 and "torn last line" in before.errors[0]), before.errors
    audit = AuditLog(path)
    assert verify_file(path).intact  # opening cut any torn line
    survivors = before.events
    event = await _ok(audit)
    assert event["seq_id"] == survivors + 1
    after = verify_file(path)
    assert after.intact, after.errors
    assert after.events == survivors + 1


# --- recall finds what the audit recorded ---------------------------------------------------------


@pytest.mark.anyio
async def test_korg_recall_finds_a_recorded_call_by_its_arguments(tmp_path: Path) -> None:
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.history.query.search import search

    ledger = tmp_path / "audit.jsonl"
    audit = AuditLog(ledger, binary="thump")
    await _ok(audit, arguments={"query": "quarterly flamingo census"}, output="42 flamingos")
    await _ok(audit, "thump.other", arguments={"query": "unrelated weather report"})
    with Index(tmp_path / "index.sqlite") as index:
        index.refresh([ledger])
        hits = search(index, "flamingo census", mode="keyword", top_n=5, min_score=0.0, sources=[ledger])
    assert hits, "the recorded call was not found"
    assert hits[0].tool == "thump.echo"
    assert hits[0].agent == f"agent:korg-bridge@{__version__}"
