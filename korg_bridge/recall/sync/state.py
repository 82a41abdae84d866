"""This machine's sync set-up: ``<data dir>/sync/`` -- config, keys, a lock, a git clone.

``config.json`` holds the machine id (made once by ``sync init``), the remote (a git URL or
a folder), the remote format version and explicit project mappings. It holds no secret:
the keys are beside it in ``keys`` (0600, :mod:`.keys`). A git remote's private clone is
``sync/git``. Two syncs of one machine take turns through ``sync/lock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge.errors import ConfigError, KorgError
from korg_bridge.recall.paths import data_dir

__all__ = [
    "BACKGROUND_NAME",
    "FORMAT_VERSION",
    "LOCK_WAIT_S",
    "SyncConfig",
    "held",
    "last_background_run",
    "load_config",
    "locked",
    "machine_id_of",
    "save_config",
    "sync_dir",
]

FORMAT_VERSION = 1
"""The remote layout this version writes and reads (``korg-sync/v1/FORMAT``)."""
LOCK_WAIT_S = 60.0
"""How long a sync waits for another sync of this machine: longer than a first sync of 10k memories."""
BACKGROUND_NAME = "background.json"
"""The last background sync's record (:mod:`.background`), beside the config."""
_MACHINE = re.compile(r"^[a-z0-9]{12}$")


def sync_dir(env: Mapping[str, str]) -> Path:
    return data_dir(env) / "sync"


@dataclass(slots=True)
class SyncConfig:
    machine: str
    remote: str
    format: int = FORMAT_VERSION
    projects: dict[str, str] = field(default_factory=dict)
    """Explicit project mapping: normalised git remote URL (or a name) -> this machine's project root."""
    on_session_start: bool = True
    """Whether the session-start hook starts a background sync (:mod:`.background`): on once sync is
    set up, since a person who syncs expects a new session to know what the other machines learnt."""

    @staticmethod
    def new_machine_id() -> str:
        return secrets.token_hex(6)

    def to_json(self) -> str:
        body = {
            "machine": self.machine,
            "remote": self.remote,
            "format": self.format,
            "projects": self.projects,
            "on_session_start": self.on_session_start,
        }
        return json.dumps(body, indent=2, sort_keys=True) + "\n"


def load_config(env: Mapping[str, str]) -> SyncConfig:
    """Raises:
    ConfigError: sync was not set up on this machine, or its config is damaged."""
    path = sync_dir(env) / "config.json"
    try:
        data: Any = json.loads(path.read_text("utf-8"))
        config = SyncConfig(
            machine=str(data["machine"]),
            remote=str(data["remote"]),
            format=int(data.get("format", FORMAT_VERSION)),
            projects={str(k): str(v) for k, v in dict(data.get("projects") or {}).items()},
            on_session_start=data.get("on_session_start", True) is not False,
        )
    except FileNotFoundError:
        raise ConfigError(
            "sync is not set up on this machine. Run `korg-recall sync init --remote GIT_URL_OR_FOLDER` "
            "(add --join KEY on every machine after the first)."
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"the sync config {path} cannot be read ({exc}). Fix or remove it.") from exc
    if not _MACHINE.match(config.machine):
        raise ConfigError(f"the sync config {path} names a malformed machine id {config.machine!r}.")
    return config


def save_config(env: Mapping[str, str], config: SyncConfig) -> None:
    """Raises:
    ConfigError: it cannot be written."""
    from korg_bridge.recall.memory.mirror.safe_io import write_atomic

    folder = sync_dir(env)
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(folder, "config.json", config.to_json())
    except OSError as exc:
        raise ConfigError(f"cannot write the sync config in {folder}: {exc.strerror or exc}.") from exc


_MACHINE_CACHE: dict[str, tuple[int, str | None]] = {}


def machine_id_of(env: Mapping[str, str]) -> str | None:
    """This machine's sync id (None: sync not set up): what a new version's provenance names."""
    path = sync_dir(env) / "config.json"
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    cached = _MACHINE_CACHE.get(str(path))
    if cached is not None and cached[0] == mtime:
        return cached[1]
    try:
        machine: str | None = load_config(env).machine
    except KorgError:
        machine = None
    _MACHINE_CACHE[str(path)] = (mtime, machine)
    return machine


@contextlib.contextmanager
def locked(env: Mapping[str, str]) -> Iterator[None]:
    """Hold ``sync/lock`` (one sync of this machine at a time; released when the process dies).

    Raises:
        KorgError: another sync holds it for longer than :data:`LOCK_WAIT_S`.
    """
    folder = sync_dir(env)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise KorgError(
                        f"another sync of this machine has held {folder / 'lock'} for {LOCK_WAIT_S:g} s. "
                        "Try again when it finishes."
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def held(env: Mapping[str, str]) -> bool:
    """True while a sync of this machine holds ``sync/lock`` (a look, never a wait)."""
    from korg_bridge._fs.locks import lock_held

    return lock_held(sync_dir(env) / "lock")


def last_background_run(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The last background sync's record (``sync/background.json``), or None."""
    try:
        value = json.loads((sync_dir(env) / BACKGROUND_NAME).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
