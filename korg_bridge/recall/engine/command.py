"""``korg-recall engine``: run the engine in the foreground, or ask after (and stop) the running one.

A command-line-only callable (``surfaces=["cli"]``): a model has no business starting or
stopping processes on the user's machine. Registered on the toolkit by the CLI; imports the
server only when it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.engine.protocol import INFO_NAME, LOCK_NAME, connect, engine_dir, peer_uid

if TYPE_CHECKING:
    from korg_bridge.toolkit import Toolkit

__all__ = ["STOP_WAIT_S", "register", "status", "stop"]

STOP_WAIT_S = 75.0
"""How long ``--stop`` waits for the engine to let go of its lock: its drain time, and some."""
POLL_S = 0.05

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "idle_exit": {
            "type": "string",
            "default": "30m",
            "description": "Exit after this long without a call: seconds, or a number with s, m or h; 0 for never.",
        },
        "status": {
            "type": "boolean",
            "description": "Say whether an engine runs for this index, and its pid.",
        },
        "stop": {
            "type": "boolean",
            "description": "Stop the engine of this index (it finishes running calls).",
        },
        "log": {
            "type": "boolean",
            "description": "Append the engine's stderr to engine.log in its folder (KORG_RECALL_ENGINE=auto does).",
        },
        "nice": {
            "type": "boolean",
            "description": "Lower the engine's priority, as a background process (KORG_RECALL_ENGINE=auto does).",
        },
    },
}


def _lock_held(where: Path) -> bool:
    from korg_bridge._fs.locks import lock_held

    return lock_held(where / LOCK_NAME)


def _info(where: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        value = json.loads((where / INFO_NAME).read_text(encoding="utf-8"))
        if isinstance(value, dict):
            return value
    return {}


def status(env: Mapping[str, str]) -> dict[str, Any]:
    """Whether an engine answers for the index ``env`` names: its pid and description, or why not."""
    where = engine_dir(env)
    conn = connect(where)
    if conn is None:
        starting = _lock_held(where)
        return {"running": False, "starting_or_stopping": starting, "folder": str(where)}
    try:
        pid = peer_uid(conn)[0]
    finally:
        conn.close()
    return {"running": True, "folder": str(where), **_info(where), "pid": pid}


def stop(env: Mapping[str, str]) -> dict[str, Any]:
    """Stop the engine of the index ``env`` names (SIGTERM to the process listening on its socket,
    then wait for its lock); say what was done."""
    where = engine_dir(env)
    conn = connect(where)
    if conn is None:
        return {"stopped": False, "running": False, "folder": str(where)}
    try:
        pid = peer_uid(conn)[0]
    finally:
        conn.close()
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while _lock_held(where) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return {"stopped": not _lock_held(where), "pid": pid, "folder": str(where)}


def register(kit: Toolkit) -> None:
    """Declare ``korg-recall engine`` on the CLI's toolkit."""

    @kit.command(
        "korg-recall.engine",
        description=(
            "Run the resident engine for this index in the foreground: every korg-recall call then hands "
            "its work to it and answers at in-process speed (the same output, exit codes and freshness). "
            "--status says whether one runs; --stop stops it. See docs/engine.md."
        ),
        input_schema=SCHEMA,
        side_effects="fs_write",
        output_mode="envelope",
        surfaces=["cli"],
        long_running=True,
        on_interrupt="the engine stopped; calls run in their own process until one is started again.",
    )
    def engine(args: dict[str, Any]) -> int:
        from korg_bridge.errors import UsageError

        if args.get("status") and args.get("stop"):
            raise UsageError("--status and --stop are two questions; pass one of them.")
        if args.get("status") or args.get("stop"):
            report = status(os.environ) if args.get("status") else stop(os.environ)
            sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
            return 0
        from korg_bridge.recall.engine.server import parse_duration, run

        return run(
            os.environ,
            parse_duration(str(args["idle_exit"])),
            nice=bool(args.get("nice")),
            log=bool(args.get("log")),
        )
