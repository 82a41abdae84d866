"""Turning a finished process into the text an agent reads, per ``output_mode``.

The shapes match what the korg ecosystem's bridges produce, so prompts
written against them keep working:

* ``envelope`` — stdout parsed as JSON and pretty-printed (indent 2); raw text
  when it is not JSON, or nested deeper than :data:`MAX_STRUCTURED_DEPTH`.
* ``stream`` — stdout as is.
* ``none`` — stripped stdout, or ``ok`` when there is none.
* anything else — raw stdout.

A non-zero exit adds ``[stderr]`` and ``[exit_code] N (meaning)`` sections.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from korg_bridge.bridge.contract import json_depth_exceeds
from korg_bridge.bridge.process import ProcessResult

MAX_STRUCTURED_DEPTH = 100
"""JSON nested deeper is returned as raw text, never as ``structuredContent``:
the SDK cannot serialise beyond ~250 levels, its client parses at most ~200,
and other clients' parsers stop sooner (serde_json at 128)."""


@dataclass(slots=True)
class CallResult:
    """The outcome of one tool call, ready for MCP or for a library caller."""

    text: str
    is_error: bool
    exit_code: int | None = None
    structured: dict[str, Any] | None = None
    """stdout as a JSON object, for ``envelope`` callables that print one."""
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def decode(data: bytes) -> str:
    """Child output is bytes of unknown encoding: never let it crash us."""
    return data.decode("utf-8", errors="replace")


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def truncation_notice(stream: str, kept: int, dropped: int) -> str:
    return (
        f"\n[korg-bridge: {stream} truncated: showing the first {_mib(kept)}, "
        f"{_mib(dropped)} more were discarded]"
    )


def format_stdout(mode: str | None, stdout: str) -> tuple[str, dict[str, Any] | None]:
    """The success text for ``mode``, plus the parsed JSON object when there is one."""
    text, structured, _ = _format(mode, stdout)
    return text, structured


def _format(mode: str | None, stdout: str) -> tuple[str, dict[str, Any] | None, str | None]:
    """:func:`format_stdout`, plus why a JSON object is not returned as structure, if so."""
    if mode == "envelope":
        try:
            parsed = json.loads(stdout)
        except (ValueError, RecursionError):
            return stdout, None, None
        if json_depth_exceeds(parsed, MAX_STRUCTURED_DEPTH):
            # Raw text: no MCP client could read it as structure.
            return stdout, None, f"its JSON is nested deeper than {MAX_STRUCTURED_DEPTH} levels"
        try:
            pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            return stdout, None, "its JSON cannot be re-encoded"
        return pretty, parsed if isinstance(parsed, dict) else None, None
    if mode == "none":
        stripped = stdout.strip()
        return (stripped or "ok"), None, None
    return stdout, None, None


def build_result(
    result: ProcessResult,
    *,
    output_mode: str | None,
    exit_meaning: str,
    timeout: float,
) -> CallResult:
    """Assemble the agent-facing text for one finished process."""
    stdout = decode(result.stdout)
    stderr = decode(result.stderr)
    out_notice = (
        truncation_notice("stdout", len(result.stdout), result.stdout_dropped)
        if result.stdout_dropped
        else ""
    )
    err_notice = (
        truncation_notice("stderr", len(result.stderr), result.stderr_dropped)
        if result.stderr_dropped
        else ""
    )
    code = result.returncode
    details: dict[str, Any] = {
        "stdout_bytes": len(result.stdout) + result.stdout_dropped,
        "stderr_bytes": len(result.stderr) + result.stderr_dropped,
        "timed_out": result.timed_out,
        "lingered": result.lingered,
    }
    if result.timed_out:
        parts = [stdout + out_notice] if stdout else []
        if stderr:
            parts.append("[stderr]\n" + stderr + err_notice)
        parts.append(
            f"[timeout] the call did not finish within {timeout:g} s; its process group was terminated. "
            "Ask for less work, or restart the bridge with a larger --timeout."
        )
        return CallResult("\n".join(parts), True, code, None, stdout, stderr, result.duration, details)
    if code == 0:
        # A truncated envelope is not valid JSON any more: show it raw.
        text, structured, unstructured = _format(output_mode if not out_notice else "stream", stdout)
        if unstructured is not None:
            details["unstructured"] = unstructured
        return CallResult(
            text + out_notice, False, code, structured, stdout, stderr, result.duration, details
        )
    parts = []
    if stdout.strip():
        parts.append(stdout.rstrip("\n") + out_notice)
    if stderr.strip():
        parts.append("[stderr]\n" + stderr.rstrip("\n") + err_notice)
    if code is not None and code < 0:
        parts.append(f"[exit_code] {code} (killed by signal {-code})")
    else:
        parts.append(f"[exit_code] {code} ({exit_meaning})")
    return CallResult("\n".join(parts), True, code, None, stdout, stderr, result.duration, details)
