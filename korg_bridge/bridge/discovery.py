"""Discovery: find the binary, run ``--introspect``, and parse what it prints.

Every failure is one :class:`~korg_bridge.errors.DiscoveryError` (or a
subclass carrying its own exit code) whose one-line message names the binary
and the problem, because that line is all a user sees when an MCP client
fails to start a server.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from korg_bridge.bridge.contract import Document, parse_document
from korg_bridge.bridge.process import run_process
from korg_bridge.errors import BinaryNotFound, DiscoveryError, DocumentError

DEFAULT_DISCOVERY_TIMEOUT = 15.0
"""Seconds ``--introspect`` may take: generous for a cold interpreter start."""

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""Largest document we read (16 MiB); real ones are a few KiB."""

_STDERR_CAP = 64 * 1024


def resolve_binary(binary: str, *, env: Mapping[str, str] | None = None) -> str:
    """Find the executable the user meant, the way a shell would.

    Absolute paths and paths with a slash are used as given (``~`` expanded);
    a bare name is looked up on ``PATH``. The result is absolute but *not*
    resolved: a symlink stays a symlink, because a multi-call binary
    dispatches on the name it was run as (``argv[0]``), and a link that a
    package manager repoints on upgrade must be followed at every exec, not
    pinned to a target the upgrade deletes.

    Raises:
        BinaryNotFound: nothing executable at that path or on ``PATH``.
    """
    if not binary:
        raise BinaryNotFound("no binary given. Pass the name or path of an introspect-aware executable.")
    expanded = os.path.expanduser(binary)
    if "/" in expanded:
        path = Path(expanded)
        if not path.exists():
            raise BinaryNotFound(f"binary not found: {binary!r}. Check the path.")
        if path.is_dir():
            raise BinaryNotFound(f"binary {binary!r} is a directory, not an executable file.")
        if not os.access(path, os.X_OK):
            raise BinaryNotFound(f"binary {binary!r} is not executable. Run: chmod +x {binary}")
        return _absolute(expanded)
    search_path = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(expanded, path=search_path)
    if found is None:
        if Path(expanded).exists():
            raise BinaryNotFound(
                f"binary not found on PATH: {binary!r}. To use the file in this directory, pass ./{binary}"
            )
        raise BinaryNotFound(
            f"binary not found on PATH: {binary!r}. Pass an absolute path, or ./{binary} for a relative one."
        )
    return _absolute(found)


def _absolute(path: str) -> str:
    """``path`` made absolute against the working directory, links and ``..`` kept:
    the kernel resolves them at exec time, and ``..`` after a symlinked folder
    means something else lexically."""
    return str(Path(path) if os.path.isabs(path) else Path.cwd() / path)


def decode_document(raw: bytes, *, label: str, path: str | None = None) -> Document:
    """Parse the bytes a binary printed for ``--introspect``.

    Raises:
        DocumentError: not JSON, too large, too deep, or not a valid document.
    """
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise DocumentError(
            f"{label}: --introspect printed more than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB; "
            "that is not an introspect document."
        )
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise not_introspect(label, "printed nothing")
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise DocumentError(f"{label}: introspect document is nested too deeply to read.") from exc
    except json.JSONDecodeError as exc:
        head = " ".join(text[:200].split())
        raise not_introspect(
            label,
            f'did not print JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; output began "{head}"',
        ) from exc
    return parse_document(data, label=label, path=path)


async def discover(
    binary: str,
    *,
    timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
    env: Mapping[str, str] | None = None,
) -> Document:
    """Run ``<binary> --introspect`` and return its parsed document.

    A valid document is accepted even when the exit status is non-zero: clap
    based CLIs print it and exit 2.

    Raises:
        BinaryNotFound: the binary is missing or not executable (exit code 7).
        DocumentError: the output is not a valid document (exit code 3).
        DiscoveryError: the binary timed out or could not be run (exit code 4).
    """
    path = resolve_binary(binary, env=env)
    label = binary
    try:
        result = await run_process(
            [path, "--introspect"],
            timeout=timeout,
            stdout_cap=MAX_DOCUMENT_BYTES + 1,
            stderr_cap=_STDERR_CAP,
            env=env,
        )
    except PermissionError as exc:
        raise BinaryNotFound(f"binary {binary!r} is not executable ({exc.strerror}).") from exc
    except OSError as exc:
        raise BinaryNotFound(f"cannot run binary {binary!r}: {exc.strerror or exc}.") from exc
    if result.timed_out:
        raise DiscoveryError(
            f"{label}: --introspect did not finish within {timeout:g} s; "
            "raise --discovery-timeout if the binary is just slow to start."
        )
    if result.stdout_dropped:
        raise DocumentError(
            f"{label}: --introspect printed more than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB; "
            "that is not an introspect document."
        )
    try:
        return decode_document(result.stdout, label=label, path=path)
    except DocumentError as exc:
        if result.returncode not in (0, None) and not result.stdout.strip():
            stderr = " ".join(result.stderr.decode("utf-8", "replace").split())[:200].rstrip(".")
            detail = f": {stderr}" if stderr else ""
            raise not_introspect(label, f"exited {result.returncode} and printed no JSON{detail}") from exc
        raise


def not_introspect(label: str, what: str) -> DocumentError:
    """The error for a binary that does not answer ``--introspect`` with a document (exit code 3).

    It is worded for the usual cause, a binary that is not introspect-aware
    at all (``korg-bridge ls``), and quotes what the binary did.
    """
    return DocumentError(
        f"{label} is not a korg:introspect@v1 binary (`{label} --introspect` {what}). "
        "Pass a binary that prints a korg:introspect@v1 document for --introspect."
    )
