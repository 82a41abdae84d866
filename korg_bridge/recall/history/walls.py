"""Which history a caller walled into its tenant may read: what the operator gave it, nothing more.

korg-recall reads whatever ledger it is pointed at, and ``ledger`` is a tool
argument. On a team deployment (``korg-bridge korg-recall --http`` with tokens
naming tenants) that would let one tenant read another's transcripts, or the
bridge's audit ledger, which records every caller's arguments (the text of
every ``remember`` among them). So a caller
:func:`~korg_bridge.recall.tenancy.walled` off the machine -- over HTTP,
with a token naming a tenant or on a team store -- reads only:

- the sources the operator gave its tenant, in the file named by
  ``KORG_RECALL_TENANT_LEDGERS`` (in the bridge's environment, which every call
  inherits and no argument can change)::

      # TENANT  PATH   (one source a line: a ledger file or a folder of them)
      acme      /srv/korg/history/acme
      acme      /srv/korg/ci/acme-nightly.jsonl
      globex    /srv/korg/history/globex
      *         /srv/korg/history/team          (every tenant reads this one)

- and its own memory store's operation log, when its store is a SQLite file.

No argument can widen that. A path it passes (``ledger``, ``verify``'s ``path``
and ``anchors``) is made absolute (``~`` is the server's home, a relative path
the server's working directory, ``$HOME`` two letters), every symlink in it
resolved, and it must then lie inside those sources: else it is a usage error,
worded alike whether or not the file exists. Folders are listed without
following a link out of them (:class:`~korg_bridge.recall.history.ingest.sources.Walls`).
The bridge's audit ledger (``KORG_BRIDGE_AUDIT``, which the bridge sets), the
recall index and korg-recall's own memory files (the shared store, its mirror
and log, the other tenants' folders) are never read, even when a configured
folder holds them. And since one recall index serves the whole machine, a
walled process reads it through walls that show only the files its sources
hold (:mod:`~korg_bridge.recall.history.index`): hits, ``show``, ``stats`` and the brief
never reveal an event indexed for someone else.

The file is read as the token file is (a regular file, bounded, UTF-8; refused
when other users can write it). Paths must be absolute. A folder given to one
tenant that lies inside a folder given to another is refused: every tenant who
reads the outer folder would read it. Without the variable a walled caller
reads no history (its memories still).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from korg_bridge.config import ENV_RECALL_TENANT_LEDGERS
from korg_bridge.errors import ConfigError, UsageError

__all__ = [
    "ENV_RECALL_TENANT_LEDGERS",
    "EVERY_TENANT",
    "Grant",
    "TenantHistory",
    "history_of",
    "parse_grants",
]

EVERY_TENANT = "*"
MAX_FILE_BYTES = 256 * 1024
"""Largest tenant ledgers file read: thousands of lines, a bound on what a mistake costs."""
FORMAT = "TENANT PATH on each line (* PATH for every tenant)"
SHOWN = 120
"""Characters of a refused path repeated in its message."""


@dataclass(frozen=True, slots=True)
class Grant:
    """One line of the operator's file: ``tenant`` (or ``*``) may read ``path``."""

    tenant: str
    path: str
    """Absolute, as written (normalised)."""
    real: str
    """With every symlink resolved: what containment is checked against."""
    line: int


def parse_grants(text: str, source: str) -> list[Grant]:
    """The grants in the text of the operator's file; ``source`` names it in messages.

    Raises:
        ConfigError: a malformed line (naming its number), a relative path, or a folder of
            one tenant inside a folder of another.
    """
    from korg_bridge.recall.tenancy import is_tenant_name

    grants: list[Grant] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}, line {number}"
        fields = line.split(None, 1)
        if len(fields) < 2:
            raise ConfigError(f"{where}: expected {FORMAT}, got one field.")
        tenant, path = fields[0], fields[1].strip()
        if tenant != EVERY_TENANT and not is_tenant_name(tenant):
            raise ConfigError(
                f"{where}: the tenant (field 1) must be * or letters, digits and . _ @ : + - "
                "(at most 128, starting with a letter or digit)."
            )
        if "\0" in path or not os.path.isabs(path):
            raise ConfigError(
                f"{where}: the path must be absolute (it is read wherever the bridge runs), got {path!r}."
            )
        normal = os.path.normpath(path)
        grants.append(Grant(tenant, normal, os.path.realpath(normal), number))
    _check_nesting(grants, source)
    return grants


def _check_nesting(grants: Sequence[Grant], source: str) -> None:
    """Refuse a folder whose readers do not all read the folder holding it.

    Raises:
        ConfigError: naming both lines.
    """
    readers: dict[str, set[str]] = {}
    first: dict[str, Grant] = {}
    for grant in grants:
        readers.setdefault(grant.real, set()).add(grant.tenant)
        first.setdefault(grant.real, grant)
    for inner, inner_readers in readers.items():
        if EVERY_TENANT in inner_readers:
            continue  # everyone reads it anyway
        parent = os.path.dirname(inner)
        while parent != inner:
            outer_readers = readers.get(parent)
            if outer_readers is not None and (EVERY_TENANT in outer_readers or outer_readers - inner_readers):
                a, b = first[parent], first[inner]
                raise ConfigError(
                    f"{source}: {b.path} (line {b.line}, {_names(inner_readers)}) lies inside {a.path} "
                    f"(line {a.line}, {_names(outer_readers)}), so {_names(outer_readers - inner_readers)} "
                    "would read it. Give each tenant folders of its own."
                )
            inner, parent = parent, os.path.dirname(parent)


def _names(tenants: set[str]) -> str:
    if not tenants or EVERY_TENANT in tenants:
        return "every tenant"
    return "tenant" + ("s " if len(tenants) > 1 else " ") + ", ".join(sorted(tenants))


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


@dataclass(frozen=True, slots=True)
class TenantHistory:
    """What one walled caller may read (a :class:`~korg_bridge.recall.history.ingest.sources.Walls`)."""

    tenant: str | None
    """None: a caller of a team store whose token names no tenant (it reads what ``*`` gives)."""
    sources: tuple[str, ...]
    """Its sources, every symlink resolved: the folders and files granted, then its own log."""
    granted: tuple[str, ...]
    """The folders and files granted to it (resolved): what a path it passes must lie in."""
    own: tuple[str, ...] = ()
    """Files of its own it reads although they lie where nobody reads (its memory store's log)."""
    never: tuple[str, ...] = ()
    """Files and folders (resolved) never read, wherever they lie."""
    never_prefixes: tuple[str, ...] = ()
    """Resolved path prefixes never read: a database and its ``-wal``, ``-shm`` and backups."""
    config: str | None = None
    """The operator's file, for messages; None when none is set."""

    @property
    def who(self) -> str:
        return f"tenant {self.tenant}" if self.tenant else "a caller without a tenant"

    def allows(self, real: str) -> bool:
        """Whether the file or folder at ``real`` (absolute, every symlink resolved) may be read."""
        if real in self.own:
            return True
        if not _under(real, self.granted) or _under(real, self.never):
            return False
        return not real.startswith(self.never_prefixes)

    def confine(self, raw: str, env: Mapping[str, str], *, what: str = "ledger") -> Path:
        """The path a tool argument names, resolved, if this caller may read there.

        Raises:
            UsageError: it lies elsewhere (the same words whether it exists or not).
        """
        from korg_bridge.recall.paths import expand as expand_path

        text = raw.strip()
        real = os.path.realpath(expand_path(text, env)) if text and "\0" not in text else ""
        if real and self.allows(real):
            return Path(real)
        shown = text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
        if not self.granted:
            raise UsageError(
                f"{what} {shown!r} cannot be read: {self.who} has no history on this server "
                f"(the operator lists each tenant's in {ENV_RECALL_TENANT_LEDGERS}). Nothing was read."
            )
        raise UsageError(
            f"{what} {shown!r} is not in the history {self.who} may read on this server; "
            f"pass a path under {', '.join(self.granted[:5])}, or leave {what} out."
        )


def history_of(env: Mapping[str, str]) -> TenantHistory | None:
    """What this caller may read, when it is walled into its tenant; None when it may read any
    file (a person at this machine, a stdio bridge's client, an HTTP token without a tenant
    on a SQLite store: the operator's).

    Raises:
        ConfigError: the operator's file cannot be used (see :func:`parse_grants`), a malformed
            tenant name, or a store URL of an unknown scheme.
    """
    from korg_bridge.recall.tenancy import tenant_from, walled

    if not walled(env):  # the common case: before importing anything more (a recall's cold start)
        return None
    from korg_bridge.config import ENV_RECALL_STORE, audit_setting
    from korg_bridge.recall.paths import OPLOG_NAME, store_location, tenant_ledgers_file

    tenant = tenant_from(env)
    config = tenant_ledgers_file(env)
    grants = _load(config) if config else []
    granted = tuple(dict.fromkeys(g.real for g in grants if g.tenant in (EVERY_TENANT, tenant)))
    store = store_location(env)
    own: tuple[str, ...] = ()
    if store.path is not None and tenant is not None:
        log = os.path.realpath(store.path.parent / OPLOG_NAME)
        own = (log,) if os.path.isfile(log) else ()
    never, prefixes = _korg_files(
        {k: v for k, v in env.items() if k != ENV_RECALL_STORE} if store.is_url else env
    )
    audit = audit_setting(env)
    if audit:
        never += (os.path.realpath(audit),)
    return TenantHistory(tenant, granted + own, granted, own, never, prefixes, config)


def _load(path: str) -> list[Grant]:
    """Raises: ConfigError: see :func:`parse_grants` and :func:`korg_bridge.auth.tokens.read_operator_file`."""
    from korg_bridge._fs.operator_file import read_operator_file

    text = read_operator_file(
        path,
        what="tenant ledgers file",
        flag=ENV_RECALL_TENANT_LEDGERS,
        content=FORMAT,
        others_could="give any tenant any file",
        max_bytes=MAX_FILE_BYTES,
    )
    return parse_grants(text, f"{ENV_RECALL_TENANT_LEDGERS} file {path}")


def _korg_files(env: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """korg-recall's own files, never a tenant's history: the SQLite store shared by callers
    without a tenant (with its log and mirror), every tenant's store folder, and the recall
    index (the store file and the index as prefixes: their ``-wal`` and backups too).

    Raises:
        ConfigError: ``KORG_RECALL_STORE`` or ``KORG_RECALL_INDEX`` cannot be used.
    """
    from korg_bridge.recall.paths import MIRROR_NAME, OPLOG_NAME, TENANTS_DIR, default_store_path, index_path

    store = Path(os.path.realpath(default_store_path(env)))
    folder = store.parent
    never = tuple(str(folder / name) for name in (OPLOG_NAME, MIRROR_NAME, TENANTS_DIR))
    return never, (str(store), os.path.realpath(index_path(env)))
