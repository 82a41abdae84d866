"""``--help`` of every korg-recall command and command group, as a person runs it: real processes.

The commands come from the binary's own ``--introspect`` document (every callable, the
command-line-only ones included), so a command added later is covered without editing this file.
"""

from __future__ import annotations

import json
import subprocess

from tests.helpers.cli import python_env, run_recall

BOUND = 60.0
"""Seconds one korg-recall child may take to print its help."""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_recall(*args, base=python_env(), env={"COLUMNS": "100"}, timeout=BOUND)


def _command_paths(document: dict[str, object]) -> dict[tuple[str, ...], str | None]:
    """Every command path (groups such as ``hooks`` too) → the description its leaf declares."""
    paths: dict[tuple[str, ...], str | None] = {(): None}
    callables = document["callables"]
    assert isinstance(callables, list)
    for entry in callables:
        segments = tuple(entry["command_id"].split(".")[1:])
        for depth in range(1, len(segments)):
            paths.setdefault(segments[:depth], None)
        paths[segments] = entry["description"]
    return paths


def test_help_of_every_command_and_group_prints_usage_and_exits_0() -> None:
    introspected = _run("--introspect")
    assert introspected.returncode == 0, introspected.stderr
    paths = _command_paths(json.loads(introspected.stdout))
    assert ("recall",) in paths and ("hooks", "install") in paths and ("model",) in paths
    failures = []
    for path, description in sorted(paths.items()):
        shown = _run(*path, "--help")
        words = " ".join(shown.stdout.split())
        ok = (
            shown.returncode == 0
            and shown.stderr == ""
            and words.startswith(f"usage: korg-recall {' '.join(path)}".rstrip())
            and (description is None or " ".join(description.split()) in words)
        )
        if not ok:
            failures.append(f"{' '.join(path) or '(root)'}: exit {shown.returncode}, stderr {shown.stderr!r}")
    assert failures == []


def test_recall_help_shows_the_percent_its_description_declares() -> None:
    shown = _run("recall", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "once 90 % of events are embedded" in " ".join(shown.stdout.split())
