"""Formatting a finished process per output_mode, as the ecosystem expects."""

from __future__ import annotations

import json

import pytest

from korg_bridge.bridge.output import build_result, format_stdout
from korg_bridge.bridge.process import ProcessResult


def done(stdout: bytes = b"", stderr: bytes = b"", code: int | None = 0, **kw: object) -> ProcessResult:
    return ProcessResult(returncode=code, stdout=stdout, stderr=stderr, **kw)  # type: ignore[arg-type]


def test_envelope_json_is_pretty_printed_with_indent_2() -> None:
    text, structured = format_stdout("envelope", '{"b": [1, 2], "a": "é"}')
    assert text == json.dumps({"b": [1, 2], "a": "é"}, indent=2, ensure_ascii=False)
    assert structured == {"b": [1, 2], "a": "é"}


def test_envelope_non_json_and_non_object_values() -> None:
    assert format_stdout("envelope", "plain words\n") == ("plain words\n", None)
    assert format_stdout("envelope", "[1,2]") == ("[\n  1,\n  2\n]", None)


@pytest.mark.parametrize(
    ("mode", "stdout", "expected"),
    [
        ("stream", "  as is \n", "  as is \n"),
        ("none", "\n  done  \n", "done"),
        ("none", " \n", "ok"),
        ("hologram", '  raw {"x": 1}  \n', '  raw {"x": 1}  \n'),
        (None, "raw", "raw"),
    ],
)
def test_modes(mode: str | None, stdout: str, expected: str) -> None:
    assert format_stdout(mode, stdout)[0] == expected


def test_nonzero_exit_shows_output_stderr_and_exit_meaning() -> None:
    result = build_result(
        done(b"partial output\n", b"something broke\n", 2),
        output_mode="stream",
        exit_meaning="error.usage",
        timeout=10,
    )
    assert result.is_error and result.exit_code == 2
    assert result.text == "partial output\n[stderr]\nsomething broke\n[exit_code] 2 (error.usage)"


def test_killed_by_signal_is_named() -> None:
    result = build_result(done(code=-9), output_mode="stream", exit_meaning="x", timeout=10)
    assert result.text == "[exit_code] -9 (killed by signal 9)"


def test_timeout_says_what_to_do_and_keeps_partial_output() -> None:
    result = build_result(
        done(b"started\n", b"warn\n", -15, timed_out=True), output_mode="stream", exit_meaning="", timeout=1.5
    )
    assert result.is_error
    assert result.text.startswith("started\n\n[stderr]\nwarn\n")
    assert "did not finish within 1.5 s" in result.text and "--timeout" in result.text


def test_truncated_output_carries_a_visible_notice_and_is_not_parsed() -> None:
    result = build_result(
        done(b'{"a": 1', stdout_dropped=3 * 1024 * 1024), output_mode="envelope", exit_meaning="", timeout=1
    )
    assert not result.is_error and result.structured is None
    assert result.text.startswith('{"a": 1\n[korg-bridge: stdout truncated')
    assert "3.0 MiB more were discarded" in result.text
    failed = build_result(
        done(b"", b"e" * 10, 1, stderr_dropped=1024 * 1024),
        output_mode="stream",
        exit_meaning="generic",
        timeout=1,
    )
    assert "stderr truncated" in failed.text


def test_invalid_utf8_is_replaced_never_raised() -> None:
    result = build_result(done(b"caf\xc3\xa9 \xff end"), output_mode="stream", exit_meaning="", timeout=1)
    assert result.text == "café \ufffd end"
