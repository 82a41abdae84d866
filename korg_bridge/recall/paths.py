"""Where korg-recall's files are: the one resolver of every path an environment names.

Each path used to be worked out where it was needed, and the copies drifted: the index path
was resolved three times, one copy expanding ``~`` against the process's home and keeping a
relative value relative, another against ``$HOME`` and making it absolute. Every path now comes
from here, by one rule (:func:`expand`):

==============================  ====================================================================
the recall index                ``$KORG_RECALL_INDEX``, else ``$XDG_CACHE_HOME/korg-recall/index.sqlite``
the memory store                ``$KORG_RECALL_STORE`` (a file, or a ``postgresql://`` URL), else
                                ``$XDG_DATA_HOME/korg-recall/memory.sqlite``; a bridge caller's
                                tenant gets ``tenants/<tenant>/`` beside it (:func:`store_location`)
the operation log               ``memory-ops.jsonl`` beside a SQLite store
korg-recall's own data          ``$XDG_DATA_HOME/korg-recall`` (hook state, backups), whatever the store
pulled models                   ``$XDG_CACHE_HOME/korg-recall/models``
Claude Code's and Codex's       ``$CLAUDE_CONFIG_DIR`` else ``~/.claude``; ``$CODEX_HOME`` else ``~/.codex``
==============================  ====================================================================

``~`` means ``$HOME`` of the environment the call runs with (a bridge or an engine passes its
caller's), not the process's; a relative ``XDG_*`` value is ignored, as the XDG specification
says. Nothing here touches the file system.

The rules are written once, on plain strings (:func:`index_file`, :func:`store_file`): the
engine's front half resolves the index and the store on every call and has no time for
``pathlib`` (docs/engine.md); everything else gets them as :class:`~pathlib.Path`.
"""

from __future__ import annotations

import os

from korg_bridge.config import (
    ENV_BRIDGE_TENANT,
    ENV_CLAUDE_CONFIG_DIR,
    ENV_CLAUDE_PROJECT_DIR,
    ENV_CODEX_HOME,
    ENV_HOME,
    ENV_RECALL_INDEX,
    ENV_RECALL_LEDGER,
    ENV_RECALL_MODEL_DIR,
    ENV_RECALL_PROJECT,
    ENV_RECALL_STORE,
    ENV_RECALL_TENANT_LEDGERS,
    ENV_XDG_CACHE_HOME,
    ENV_XDG_DATA_HOME,
    store_url,
)
from korg_bridge.errors import ConfigError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on the engine's front path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = [
    "MIRROR_NAME",
    "OPLOG_NAME",
    "TENANTS_DIR",
    "Location",
    "cache_dir",
    "claude_home",
    "claude_project_dir",
    "codex_home",
    "data_dir",
    "default_store_path",
    "expand",
    "home",
    "index_file",
    "index_path",
    "ledger_paths",
    "model_cache_dir",
    "model_dir_setting",
    "oplog_path",
    "project_dir",
    "store_file",
    "store_location",
    "tenant_ledgers_file",
]

APP = "korg-recall"
OPLOG_NAME = "memory-ops.jsonl"
"""The operation log's file, beside a SQLite store."""
MIRROR_NAME = "memories"
"""The Markdown mirror's folder, beside a SQLite store."""
"""The operation log's file, beside a SQLite store."""
TENANTS_DIR = "tenants"
"""Beside a SQLite store: one folder per tenant, each holding that tenant's store (see :func:`store_location`)."""


def _path(text: str) -> Path:
    from pathlib import Path

    return Path(text)


def _home(env: Mapping[str, str]) -> str:
    return env.get(ENV_HOME) or os.path.expanduser("~")


def _expand(raw: str, env: Mapping[str, str]) -> str:
    if raw == "~" or raw.startswith("~/"):
        return os.path.join(_home(env), raw[2:]) if raw[2:] else _home(env)
    return os.path.abspath(os.path.expanduser(raw))


def _xdg(env: Mapping[str, str], name: str, fallback: str) -> str:
    value = env.get(name, "").strip()
    # The XDG spec says to ignore a relative value.
    return value if value and os.path.isabs(value) else os.path.join(_home(env), fallback)


def home(env: Mapping[str, str]) -> Path:
    """``$HOME`` of ``env``, else the process's home."""
    return _path(_home(env))


def expand(raw: str, env: Mapping[str, str]) -> Path:
    """``raw`` as an absolute path: ``~`` and ``~/…`` against ``env``'s ``$HOME``, ``~user`` as the
    system says, anything relative against the working directory."""
    return _path(_expand(raw, env))


def data_dir(env: Mapping[str, str]) -> Path:
    """korg-recall's own data folder, ``$XDG_DATA_HOME/korg-recall`` (``~/.local/share``)."""
    return _path(_xdg(env, ENV_XDG_DATA_HOME, ".local/share")) / APP


def cache_dir(env: Mapping[str, str]) -> Path:
    """korg-recall's cache folder, ``$XDG_CACHE_HOME/korg-recall`` (``~/.cache``)."""
    return _path(_xdg(env, ENV_XDG_CACHE_HOME, ".cache")) / APP


def index_file(env: Mapping[str, str]) -> str:
    """:func:`index_path` as a string."""
    explicit = env.get(ENV_RECALL_INDEX, "").strip()
    if explicit:
        return _expand(explicit, env)
    return os.path.join(_xdg(env, ENV_XDG_CACHE_HOME, ".cache"), APP, "index.sqlite")


def index_path(env: Mapping[str, str]) -> Path:
    """The recall index: ``$KORG_RECALL_INDEX``, else ``index.sqlite`` in :func:`cache_dir`."""
    return _path(index_file(env))


def ledger_paths(env: Mapping[str, str]) -> list[str] | None:
    """``$KORG_RECALL_LEDGER`` split at ``os.pathsep`` like ``PATH`` (None: unset or blank); the
    entries as written, for :func:`korg_bridge.recall.history.ingest.sources.resolve_sources`."""
    raw = env.get(ENV_RECALL_LEDGER, "")
    return raw.split(os.pathsep) if raw.strip() else None


def tenant_ledgers_file(env: Mapping[str, str]) -> str | None:
    """``$KORG_RECALL_TENANT_LEDGERS``: the operator's file of each tenant's history (None: unset)."""
    return env.get(ENV_RECALL_TENANT_LEDGERS, "").strip() or None


def project_dir(env: Mapping[str, str]) -> str | None:
    """``$KORG_RECALL_PROJECT``: the directory whose project a call is about (None: the working one)."""
    return env.get(ENV_RECALL_PROJECT, "").strip() or None


def model_dir_setting(env: Mapping[str, str]) -> str | None:
    """``$KORG_RECALL_MODEL_DIR`` as written (None: unset), the local model folder that wins over a
    pulled model; :mod:`korg_bridge.recall.semantic.model` expands it and quotes it as written."""
    return env.get(ENV_RECALL_MODEL_DIR, "").strip() or None


def model_cache_dir(env: Mapping[str, str]) -> Path:
    """Where ``korg-recall model pull`` puts models: ``models`` in :func:`cache_dir`.

    Not the temp directory (fastembed's default), which is wiped on reboot and would turn every
    semantic query after one into a download.
    """
    return cache_dir(env) / "models"


def claude_home(env: Mapping[str, str]) -> Path:
    """``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    raw = env.get(ENV_CLAUDE_CONFIG_DIR, "").strip()
    return expand(raw, env) if raw else home(env) / ".claude"


def claude_project_dir(env: Mapping[str, str]) -> str | None:
    """``$CLAUDE_PROJECT_DIR``, which Claude Code sets for its hooks: the project a hook runs for."""
    return env.get(ENV_CLAUDE_PROJECT_DIR, "").strip() or None


def codex_home(env: Mapping[str, str]) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``."""
    raw = env.get(ENV_CODEX_HOME, "").strip()
    return expand(raw, env) if raw else home(env) / ".codex"


def store_file(env: Mapping[str, str]) -> str:
    """:func:`default_store_path` as a string.

    Raises:
        ConfigError: ``KORG_RECALL_STORE`` is a URL, not a file.
    """
    explicit = env.get(ENV_RECALL_STORE, "").strip()
    if explicit:
        if "://" in explicit:
            raise ConfigError(
                f"{ENV_RECALL_STORE} is a URL: the memory store is a database server, not a file. "
                "Set it to the path of a SQLite file to use one."
            )
        return _expand(explicit, env)
    return os.path.join(_xdg(env, ENV_XDG_DATA_HOME, ".local/share"), APP, "memory.sqlite")


def default_store_path(env: Mapping[str, str]) -> Path:
    """``$KORG_RECALL_STORE``, else ``memory.sqlite`` in :func:`data_dir`.

    Raises:
        ConfigError: ``KORG_RECALL_STORE`` is a URL, not a file (see :func:`store_location`).
    """
    return _path(store_file(env))


class Location:
    """Where ``KORG_RECALL_STORE`` points: a SQLite file, or a PostgreSQL URL.

    A value, written out by hand rather than as a dataclass: the engine's front half resolves it
    on every call, and ``dataclasses`` (with ``inspect``) would cost it a fifth of its time.
    """

    __slots__ = ("path", "url")
    path: Path | None
    url: str | None

    def __init__(self, path: Path | None = None, url: str | None = None) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "url", url)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Location is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and (self.path, self.url) == (other.path, other.url)

    def __hash__(self) -> int:
        return hash((self.path, self.url))

    def __repr__(self) -> str:
        return f"Location(path={self.path!r}, url={self.url!r})"

    @property
    def is_url(self) -> bool:
        return self.url is not None

    @property
    def label(self) -> str:
        """The location as messages show it (a URL without its password)."""
        if self.url is not None:
            from korg_bridge.recall.memory.backend.pg.url import safe_url

            return safe_url(self.url)
        return str(self.path)


def store_location(env: Mapping[str, str]) -> Location:
    """Where the store is: ``$KORG_RECALL_STORE`` (a path or a ``postgresql://`` URL), else the
    default file (:func:`default_store_path`).

    A SQLite file is one person's, so a bridge's caller with a tenant (``KORG_BRIDGE_TENANT``,
    :mod:`korg_bridge.recall.tenancy`) gets a file of its own beside it,
    ``tenants/<tenant>/<name>``, with its own mirror, log and backups: two tenants served by one
    bridge never share memories, in a team store or not. (``KORG_RECALL_TENANT`` names a team
    store's tenant: a person at a terminal with it set still uses the file named.)

    Raises:
        ConfigError: a URL of another scheme; a malformed tenant name.
    """
    url = store_url(env)
    if url is not None:
        return Location(url=url)
    from korg_bridge.recall.tenancy import tenant_from

    path = default_store_path(env)
    tenant = tenant_from(env) if env.get(ENV_BRIDGE_TENANT, "").strip() else None
    return Location(path=path if tenant is None else path.parent / TENANTS_DIR / tenant / path.name)


def oplog_path(env: Mapping[str, str]) -> Path | None:
    """The operation log of a SQLite store (None: a team store keeps its log in a table).

    Raises:
        ConfigError: see :func:`store_location`.
    """
    where = store_location(env)
    return None if where.path is None else where.path.parent / OPLOG_NAME
