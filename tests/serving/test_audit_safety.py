"""The audit ledger never destroys a file, and every entry it writes is bounded.

The CLI tests run ``python -m korg_bridge`` as a real subprocess with stdin
from /dev/null, so a bridge that wrongly accepted the path would start,
read EOF and exit 0 instead of refusing with exit 3.
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.errors import ConfigError
from korg_bridge.ledger.chain import LedgerWriter, verify_file
from korg_bridge.ledger.file import MAX_LINE_BYTES
from korg_bridge.serving.audit import (
    ARGUMENT_MAX_BYTES,
    ARGUMENT_MAX_DEPTH,
    ARGUMENTS_MAX_BYTES,
    AuditLog,
    bound_arguments,
)
from tests.helpers.bridge_client import THUMP, child_env, open_bridge
from tests.helpers.cli import run_bridge
from tests.helpers.paths import REPO

DEEP = 100_000


def bridge(*args: str) -> subprocess.CompletedProcess[str]:
    """``korg-bridge THUMP ARGS`` with stdin at EOF: a server that starts exits 0 at once."""
    return run_bridge(str(THUMP), *args, base=child_env(), cwd=REPO)


def deep_json(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def ledger_of(path: Path, count: int = 2, **extra: Any) -> bytes:
    writer = LedgerWriter(path)
    for i in range(count):
        writer.append({"tool_name": "thump.echo", "args": {"i": i}, **extra})
    return path.read_bytes()


def side_files(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.torn-*"))


async def record(audit: AuditLog, arguments: Any) -> dict[str, Any]:
    return await audit.record(
        command_id="thump.echo",
        tool_name="thump_echo",
        arguments=arguments,
        success=True,
        exit_code=0,
        output="ok",
        duration_ms=1,
    )


# --- what counts as a ledger ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", [[], ["--list-tools"]], ids=["server", "list-tools"])
@pytest.mark.parametrize("newline", [b"", b"\n"], ids=["unterminated", "terminated"])
def test_a_minified_json_file_over_64_kib_is_refused_with_exit_3_and_left_whole(
    tmp_path: Path, mode: list[str], newline: bytes
) -> None:
    path = tmp_path / "settings.json"
    content = json.dumps({"key": "v" * 70_000}).encode() + newline
    path.write_bytes(content)
    run = bridge("--audit", str(path), *mode)
    assert run.returncode == 3, run.stderr
    assert "is not a korg-ledger@v1 file" in run.stderr
    assert "Pass a new file" in run.stderr
    assert run.stdout == ""
    assert path.read_bytes() == content
    assert side_files(path) == []


@pytest.mark.parametrize("mode", [[], ["--list-tools"]], ids=["server", "list-tools"])
@pytest.mark.parametrize("shape", ["deep-last-line", "deep-only-line"])
def test_a_100k_deep_line_is_a_clear_refusal_with_exit_3(tmp_path: Path, mode: list[str], shape: str) -> None:
    path = tmp_path / "audit.jsonl"
    if shape == "deep-last-line":
        ledger_of(path)
        with path.open("ab") as handle:
            handle.write(deep_json(DEEP) + b"\n")
    else:
        path.write_bytes(deep_json(DEEP))
    content = path.read_bytes()
    run = bridge("--audit", str(path), *mode)
    assert run.returncode == 3, run.stderr
    assert "nested too deeply" in run.stderr
    assert "internal error" not in run.stderr
    assert run.stderr.count("korg-bridge: error:") == 1
    assert path.read_bytes() == content


def test_the_writer_treats_a_deep_last_line_as_not_a_ledger_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    ledger_of(path)
    with path.open("ab") as handle:
        handle.write(deep_json(DEEP) + b"\n")
    content = path.read_bytes()
    with pytest.raises(ConfigError, match="not a chained korg-ledger@v1 entry"):
        LedgerWriter(path).append({"tool_name": "x"})
    assert path.read_bytes() == content


def test_a_ledger_whose_first_line_is_longer_than_64_kib_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    ledger_of(path, count=1, note="n" * 100_000)
    AuditLog(path)
    assert verify_file(path).intact


def test_a_foreign_last_line_is_refused_before_the_torn_tail_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    ledger_of(path)
    with path.open("ab") as handle:
        handle.write(b"export PATH=/usr/bin\n" + b'{"schema_version": "1.0", "seq_id": 3, "sou')
    content = path.read_bytes()
    with pytest.raises(ConfigError, match="its last line is not JSON") as info:
        AuditLog(path)
    assert info.value.exit_code == 3
    with pytest.raises(ConfigError, match="not a chained korg-ledger@v1 entry"):
        LedgerWriter(path).tip()
    assert path.read_bytes() == content
    assert side_files(path) == []


@pytest.mark.parametrize(
    "content",
    [b'{"sche', b"   \n\t", b'{"schema_version": "1.0", "seq_id": 1}\n{"schema_version": "1.0", "seq'],
    ids=["unrecognisable-fragment", "blank", "unchained-first-line"],
)
def test_only_empty_files_and_chains_pass_the_read_only_check(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(content)
    if content.strip():
        with pytest.raises(ConfigError, match="not a korg-ledger@v1 file"):
            AuditLog(path)
        assert path.read_bytes() == content
    else:
        AuditLog(path)  # blank is as good as empty
        assert verify_file(path).intact


def test_a_line_over_the_cap_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with path.open("wb") as handle:
        handle.truncate(MAX_LINE_BYTES + 1)  # a sparse file: no disk cost
    with pytest.raises(ConfigError, match="longer than 16 MiB"):
        AuditLog(path)
    assert path.stat().st_size == MAX_LINE_BYTES + 1


# --- a torn tail is moved aside, never deleted ---------------------------------------------------


@pytest.mark.anyio
async def test_a_torn_tail_is_kept_in_a_side_file_the_warning_names(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    intact = ledger_of(path)
    torn = b'{"schema_version": "1.0", "seq_id": 3, "source_agent": "agent:korg-br'
    with path.open("ab") as handle:
        handle.write(torn)
    async with open_bridge(THUMP, "--audit", str(path)) as running:
        await running.client.call_tool("thump_say", {"text": "after the crash"})
        stderr = running.stderr()
    [side] = side_files(path)
    assert side.read_bytes() == torn
    assert side.stat().st_mode & 0o777 == 0o600
    assert f"cut a torn last line of {len(torn)} bytes" in stderr and str(side) in stderr
    assert path.read_bytes().startswith(intact)
    report = verify_file(path)
    assert report.intact and report.events == 3


def test_an_earlier_side_file_is_never_overwritten(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "audit.jsonl"
    ledger_of(path)
    now = datetime.now(UTC)
    earlier = {}
    for moment in (now, now + timedelta(seconds=1)):  # whichever second the cut happens in
        name = path.with_name(f"{path.name}.torn-{moment.strftime('%Y%m%dT%H%M%SZ')}")
        name.write_bytes(b"an earlier torn line")
        earlier[name] = name.read_bytes()
    torn = b'{"schema_version": "1.0", "seq_id": 3, "tool'
    with path.open("ab") as handle:
        handle.write(torn)
    with caplog.at_level(logging.WARNING):
        AuditLog(path)
    for name, content in earlier.items():
        assert name.read_bytes() == content
    [new] = [p for p in side_files(path) if p not in earlier]
    assert new.read_bytes() == torn
    assert str(new) in caplog.text


def test_a_complete_last_entry_without_a_newline_is_terminated_not_cut(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    intact = ledger_of(path)
    path.write_bytes(intact[:-1])
    AuditLog(path)
    assert path.read_bytes() == intact
    assert side_files(path) == []


# --- every entry is bounded ----------------------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):  # built iteratively: no recursion limit involved
        value = {"down": value}
    return value


@pytest.mark.anyio
async def test_big_and_deep_arguments_become_markers_through_the_bridge(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    text = "word " * 5_000  # over the 16 KB cap, under the 128 KiB argv limit
    async with open_bridge(THUMP, "--audit", str(path)) as running:
        said = await running.client.call_tool("thump_say", {"text": text})
        deep = await running.client.call_tool("thump_echo", {"query": "x", "tags": [nested(100)]})
    assert not said.is_error and deep.is_error
    report = verify_file(path)
    assert report.intact, report.errors
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    marker = first["args"]["text"]
    whole = json.dumps(text, separators=(",", ":")).encode()
    assert marker["truncated"] is True
    assert marker["bytes"] == len(whole)
    assert marker["sha256"] == hashlib.sha256(whole).hexdigest()
    assert marker["preview"].startswith('"word word') and len(marker["preview"].encode()) <= 1024
    kept = second["args"]["tags"][0]
    for _ in range(ARGUMENT_MAX_DEPTH - 1):
        kept = kept["down"]
    assert kept == {"truncated": True, "reason": f"nested deeper than {ARGUMENT_MAX_DEPTH} levels"}


@pytest.mark.anyio
async def test_a_100k_deep_argument_is_recorded_as_a_marker_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    event = await record(AuditLog(path), {"query": "x", "deep": nested(DEEP)})
    assert event["seq_id"] == 1
    assert verify_file(path).intact
    assert len(path.read_bytes()) < 10_000


def test_a_secret_inside_a_big_value_stays_out_of_its_preview() -> None:
    args = bound_arguments(
        {"config": {"password": "hunter2", "blob": "x" * 20_000}, "api_key": "k" * 20_000, "q": "small"}
    )
    marker = args["config"]
    assert marker["truncated"] is True and "hunter2" not in marker["preview"]
    assert '"password":"[redacted]"' in marker["preview"]
    assert args["api_key"] == "[redacted]"
    assert args["q"] == "small"


def test_many_arguments_together_are_bounded_as_a_whole() -> None:
    args = bound_arguments({f"arg{i}": "y" * (ARGUMENT_MAX_BYTES - 100) for i in range(10)})
    assert args["truncated"] is True and args["arguments"] == 10
    assert args["bytes"] > ARGUMENTS_MAX_BYTES
    assert len(json.dumps(args)) < 2 * 1024
