"""Turning a finished process into the text an agent reads, per ``output_mode``.

The shapes match what the korg ecosystem's bridges produce, so prompts
written against them keep working:

* ``envelope`` — stdout parsed as JSON and pretty-printed (indent 2); raw text
  when it is not JSON.
* ``stream`` — stdout as is.
* ``none`` — stripped stdout, or ``ok`` when there is none.
* anything else — raw stdout.

A non-zero exit adds ``[stderr]`` and ``[exit_code] N (meaning)`` sections.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .process import ProcessResult


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
    if mode == "envelope":
        try:
            parsed = json.loads(stdout)
        except (ValueError, RecursionError):
            return stdout, None
        pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
        return pretty, parsed if isinstance(parsed, dict) else None
    if mode == "none":
        stripped = stdout.strip()
        return (stripped or "ok"), None
    return stdout, None


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
    details = {
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
        text, structured = format_stdout(output_mode if not out_notice else "stream", stdout)
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
