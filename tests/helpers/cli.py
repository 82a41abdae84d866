"""The one way tests run korg-recall and korg-bridge: as child processes, or in this process.

A child is what a user and the bridge run: ``korg-recall`` from the venv's scripts (the module when
the script is absent), ``korg-bridge`` as ``python -m korg_bridge``; stdin is ``/dev/null`` unless
``input`` is given (as under the bridge, so nothing waits on a terminal), output is text, and every
run is bounded by ``timeout``. The environment is the test's own (already isolated by
``tests/conftest.py``) with ``env`` laid over it and the names in ``drop`` removed; ``base`` replaces
the test's environment where a caller needs a bare one (:func:`tests.helpers.bridge_client.child_env`).
In process, :func:`call_recall` and :func:`call_bridge` run ``main(argv)`` and return what
``capsys`` captured.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.paths import BIN

BOUND = 60.0
"""Seconds one child may take before the test fails instead of hanging: far above any call."""


def korg_recall() -> list[str]:
    """``korg-recall`` as argv: the installed console script, else the module."""
    found = shutil.which("korg-recall", path=str(BIN))
    return [found] if found else [sys.executable, "-m", "korg_bridge.recall.cli.app"]


def korg_bridge() -> list[str]:
    """``korg-bridge`` as argv: this interpreter running the package, whatever PATH holds."""
    return [sys.executable, "-m", "korg_bridge"]


def python_env() -> dict[str, str]:
    """This process's environment with this interpreter's folder first on PATH (the fixtures run
    ``/usr/bin/env python3``, and ``korg-recall`` must be the venv's)."""
    env = dict(os.environ)
    env["PATH"] = str(BIN) + os.pathsep + env.get("PATH", "")
    return env


def bare_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What an MCP client gives the server it starts: PATH (this interpreter first) and HOME, and
    ``extra``; the SDK's client adds the rest of its default environment."""
    env = {
        "PATH": str(BIN) + os.pathsep + os.environ.get("PATH", os.defpath),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    env.update(extra or {})
    return env


def recall_script() -> Path:
    """The installed ``korg-recall`` console script, to hand the bridge as its BINARY; skips the
    test when the package is not installed beside this interpreter."""
    found = shutil.which("korg-recall", path=str(BIN))
    if found is None:
        pytest.skip(
            f"the korg-recall console script is not installed next to {sys.executable} (pip install -e .)"
        )
    return Path(found)


def environment(
    env: Mapping[str, str] | None = None, *, drop: Iterable[str] = (), base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``env`` over it and ``drop`` removed."""
    merged = {**(os.environ if base is None else base), **(env or {})}
    for name in drop:
        merged.pop(name, None)
    return merged


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
    base: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | None = None,
    timeout: float = BOUND,
) -> subprocess.CompletedProcess[str]:
    """``argv`` as a child process with text output (undecodable bytes replaced, never an exception)."""
    return subprocess.run(
        list(argv),
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=environment(env, drop=drop, base=base),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def run_recall(
    *args: str,
    env: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
    base: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | None = None,
    timeout: float = BOUND,
) -> subprocess.CompletedProcess[str]:
    """``korg-recall ARGS`` as a child process."""
    return run([*korg_recall(), *args], env=env, drop=drop, base=base, cwd=cwd, input=input, timeout=timeout)


def run_bridge(
    *args: str,
    env: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
    base: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | None = None,
    timeout: float = BOUND,
) -> subprocess.CompletedProcess[str]:
    """``korg-bridge ARGS`` as a child process (stdin at EOF: a server that starts exits 0 at once)."""
    return run([*korg_bridge(), *args], env=env, drop=drop, base=base, cwd=cwd, input=input, timeout=timeout)


def call_recall(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``korg-recall ARGV`` in this process: (exit code, stdout, stderr)."""
    from korg_bridge.recall.cli.app import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def call_bridge(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``korg-bridge ARGV`` in this process: (exit code, stdout, stderr)."""
    from korg_bridge.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ok(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON result of a successful call (and nothing on stderr)."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    value: dict[str, Any] = json.loads(proc.stdout)
    return value


def failed(proc: subprocess.CompletedProcess[str], code: int, phrase: str, prog: str = "korg-recall") -> str:
    """The one-line error of a failed call, after checking its exit code and the phrase it names."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), proc.stderr
    assert phrase in lines[0], lines[0]
    return lines[0]


def answer(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """The JSON result of a successful in-process ``korg-recall`` call."""
    code, out, err = call_recall(capsys, *argv)
    assert code == 0, err
    value: dict[str, Any] = json.loads(out)
    return value
