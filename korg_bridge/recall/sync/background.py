"""The session-start hook's sync: ``korg-recall sync``, detached, so a new session on this machine
brings in what the others remembered without the hook waiting for the network.

``korg-recall context --hook AGENT`` (the SessionStart hook) calls :func:`on_session_start` after
it has printed the brief. When sync is set up here and its ``on_session_start`` setting is on (the
default; ``korg-recall sync config --on-session-start off`` turns it off), it starts
``python -m korg_bridge.recall.sync.background``:

* **Never in the brief's way.** The brief is printed first and is the store as it was: what the
  sync brings is in the next session's brief. The child's stdin and stdout are ``/dev/null``, its
  stderr is appended to ``sync/background.log`` (left alone past :data:`LOG_CAP` bytes), so it
  holds none of the hook's pipes; nothing here raises or prints: a sync that cannot start is
  simply tried again at the next session.
* **Detached.** A session of its own (``posix_spawn`` with ``setsid``): the agent bounds the
  hook and may kill its process group; the sync outlives it. The child lowers its priority
  (``nice`` :data:`NICE`) and stops itself after :data:`MAX_RUN_S` (a folder on a hung mount;
  git calls are bounded already) -- a sync killed at any point loses nothing (:mod:`.steps`).
* **One at a time.** No child is started while a sync of this machine holds ``sync/lock``, and
  a child that finds it held exits: the sync under way does the work.
* **Seen afterwards.** The child writes its outcome to ``sync/background.json`` (when it started
  and finished, what it applied and sent, or the one-line error); ``sync status`` shows it.
* **Off switches.** The setting, and ``KORG_RECALL_BACKGROUND=0`` (which keeps every background
  process of korg-recall from starting).
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
from typing import Any

from korg_bridge.errors import KorgError
from korg_bridge.recall.sync.state import BACKGROUND_NAME, held, load_config, sync_dir

__all__ = ["LOG_CAP", "LOG_NAME", "MAX_RUN_S", "NICE", "main", "on_session_start"]

NICE = 10
"""Added to the child's niceness, as the background indexer's: the session's own work comes first."""
MAX_RUN_S = 600
"""A background sync's wall-clock bound (SIGALRM): ten times a first sync of 10k memories."""
LOG_CAP = 1 << 20
"""Bytes ``background.log`` may reach; past them the child's stderr goes to /dev/null (delete it to resume)."""
LOG_NAME = "background.log"


def _enabled(env: Mapping[str, str]) -> bool:
    """Sync is set up here, its ``on_session_start`` setting is on, background processes are allowed."""
    from korg_bridge.config import background

    try:
        if not (sync_dir(env) / "config.json").is_file():
            return False  # a stat: the hook of a machine that never syncs pays nothing more
        return background(env) and load_config(env).on_session_start
    except (KorgError, OSError):
        return False  # a setting the hook cannot read starts nothing; `sync status` says what is wrong


def on_session_start(env: Mapping[str, str]) -> str:
    """Start a background sync when it should run (see the module docstring): ``started``,
    ``running`` (a sync of this machine holds the lock), ``off`` or ``failed``. Never raises."""
    if not _enabled(env):
        return "off"
    folder = sync_dir(env)
    if held(env):
        return "running"
    log = folder / LOG_NAME
    try:
        too_big = log.stat().st_size > LOG_CAP
    except OSError:
        too_big = False
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (
            os.POSIX_SPAWN_OPEN,
            2,
            os.devnull if too_big else str(log),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,  # a link there is not followed
            0o600,
        ),
    ]
    try:
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", __name__],
            dict(env),
            file_actions=actions,
            setsid=True,
            setsigdef=(signal.SIGINT, signal.SIGTERM, signal.SIGPIPE),
        )
    except (OSError, NotImplementedError, ValueError):
        return "failed"  # the next session tries again; the hook's output stays the brief alone
    return "started"


def _record(folder: Path, value: dict[str, Any]) -> None:
    from korg_bridge.recall.memory.mirror.safe_io import write_atomic

    with contextlib.suppress(OSError):
        write_atomic(folder, BACKGROUND_NAME, json.dumps(value, indent=2, sort_keys=True) + "\n")


def main() -> int:
    """The child: one sync of the store its environment names, its outcome recorded; exit 0 unless it failed."""
    from korg_bridge.recall.memory.records import iso
    from korg_bridge.recall.memory.scopes import Context
    from korg_bridge.recall.sync.steps import sync

    env = os.environ
    with contextlib.suppress(OSError):
        os.nice(NICE)
    signal.alarm(MAX_RUN_S)  # the default action ends the process; the next sync resumes
    if held(env):
        return 0  # a sync of this machine is under way: it does what this one would
    folder = sync_dir(env)
    started = time.time()
    record: dict[str, Any] = {"pid": os.getpid(), "started_at": iso(started), "outcome": "running"}
    _record(folder, record)
    try:
        result = sync(env, Context.from_env(env))
    except KorgError as exc:
        record.update(finished_at=iso(), outcome="failed", error=str(exc), exit_code=exc.exit_code)
        sys.stderr.write(f"{iso()} korg-recall sync (session start): error: {exc}\n")
        _record(folder, record)
        return exc.exit_code
    except Exception as exc:  # a defect: recorded in one line, never left "running"
        why = f"internal error ({type(exc).__name__}); run `korg-recall sync` by hand to see it"
        record.update(finished_at=iso(), outcome="failed", error=why, exit_code=1)
        sys.stderr.write(f"{iso()} korg-recall sync (session start): error: {why}\n")
        _record(folder, record)
        return 1
    summary = {name: result[name] for name in ("applied", "sent", "conflicts", "purged") if name in result}
    record.update(finished_at=iso(), outcome="synced", **summary)
    _record(folder, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
