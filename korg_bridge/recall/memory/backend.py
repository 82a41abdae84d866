"""The store interface: one way to reach memories, whichever database holds them.

``KORG_RECALL_STORE`` is a path (a SQLite file, the default: one person's store,
:mod:`.store`) or a ``postgresql://`` URL (a team's store, tenants walled off by
row-level security: :mod:`.pg`). Everything above this module -- the write policy,
scopes, safety, rendering, the commands -- is written against the protocols
here and never learns which one it talks to:

==============  ===================================================================
:class:`Store`  opening, transactions (:meth:`~Store.write`, :meth:`~Store.reading`),
                what follows a purge, the operation log's flush, the store's health
:class:`Tx`     one transaction: portable SQL (``?`` placeholders) plus one object
                per concern whose SQL differs: :class:`FullText` (keyword search
                and its ranking), :class:`VectorStore` (embeddings), and the
                operation log's :meth:`~Tx.log_op`
==============  ===================================================================

The SQL both backends share is written once, in the modules that use it
(``rows``, ``policy``, ``listing`` …): plain SQL both engines read alike
(``INSERT … ON CONFLICT DO NOTHING``, ``RETURNING``, no ``rowid`` magic: the column
is named ``rowid`` in both). Only what differs goes through a concern object,
whose SQL is built apart from running it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from korg_bridge.errors import ConfigError, NetworkError

__all__ = [
    "ENV_STORE",
    "TENANTS_DIR",
    "ConnectionDropped",
    "FullText",
    "Location",
    "Rows",
    "Store",
    "Tx",
    "VectorStore",
    "location",
    "open_store",
    "read_with_retry",
    "store_exists",
]

logger = logging.getLogger(__name__)

ENV_STORE = "KORG_RECALL_STORE"
_URL_SCHEMES = ("postgresql://", "postgres://")
TENANTS_DIR = "tenants"
"""Beside a SQLite store: one folder per tenant, each holding that tenant's store (see :func:`location`)."""

_T = TypeVar("_T")


class Rows(Protocol):
    """What a statement returns: a DB-API cursor, as far as the memory code uses one."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class FullText(Protocol):
    """Keyword search over a memory's title, body and tags (SQLite FTS5, or a ``tsvector``).

    ``terms`` are query words as :func:`korg_bridge.recall.fts.query_terms` gives them; each
    reaches the engine as a bound parameter, quoted, so no query syntax survives in them.
    ``where`` is a condition on the memory row aliased ``m`` with ``?`` placeholders for
    ``params``, built by the caller from constants.
    """

    def ranked(
        self, tx: Tx, terms: Sequence[str], *, where: str, params: Sequence[object], limit: int
    ) -> list[tuple[int, float]]:
        """``(rowid, score)`` of rows matching any term, best first (higher is better)."""
        ...

    def condition(self, terms: Sequence[str], *, every: bool) -> tuple[str, list[object]]:
        """A condition on ``m`` true when the row matches every term (``every``) or any."""
        ...

    def index(self, tx: Tx, rowid: int, title: str, body: str, tags: Sequence[str]) -> None:
        """Make a newly inserted row searchable (a no-op where the index follows the row)."""
        ...

    def index_many(self, tx: Tx, rows: Sequence[tuple[int, str, str, Sequence[str]]]) -> None:
        """:meth:`index` for many ``(rowid, title, body, tags)`` at once (an import's rows)."""
        ...

    def after_purge(self, tx: Tx) -> None:
        """Leave no token of purged text in the index (inside the purge's transaction)."""
        ...


class VectorStore(Protocol):
    """Embeddings of version rows, beside their model id and dimension (models never mix)."""

    def missing(
        self, tx: Tx, scope: str | None, model_id: str, dim: int, limit: int
    ) -> list[tuple[int, str, str]]:
        """``(rowid, title, body)`` of live or pending heads of ``scope`` (None: of every scope)
        without a vector, newest first."""
        ...

    def coverage(self, tx: Tx, scopes: Sequence[str] | None, model_id: str, dim: int) -> tuple[int, int]:
        """``(live heads, of them with a vector)`` in ``scopes`` (None: every scope)."""
        ...

    def nearest_rows(
        self, tx: Tx, where: str, params: Sequence[object], model_id: str, dim: int, vector: Any, limit: int
    ) -> list[tuple[int, float]]:
        """``(rowid, cosine)`` of the ``limit`` rows closest to ``vector`` among those with a vector
        that match ``where`` (a condition on ``m``, built by the caller from constants), closest first."""
        ...

    def cosines_of(
        self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int, vector: Any
    ) -> dict[int, float]:
        """The cosine of ``vector`` with each of ``rowids`` that has a vector."""
        ...

    def alike(self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int) -> dict[tuple[int, int], float]:
        """The cosine of each two of ``rowids`` that both have a vector, keyed ``(lower, higher)``
        rowid: whether two hits state one fact (:mod:`.search`'s ties by meaning)."""
        ...

    def put(self, tx: Tx, rowid: int, model_id: str, dim: int, vector: Any) -> None:
        """Keep ``vector`` for version row ``rowid`` (replacing one it had)."""
        ...

    def drop(self, tx: Tx, rowids: Sequence[int]) -> None:
        """Delete the vectors of these rows (a purge)."""
        ...

    def cosines(
        self, tx: Tx, scope: str, model_id: str, dim: int, vector: Any, limit: int
    ) -> dict[str, float]:
        """The cosine of ``vector`` with the closest live or pending heads of ``scope``, by memory id
        (at least the ``limit`` closest; a backend may give more)."""
        ...


class Tx(Protocol):
    """One transaction on the store: portable SQL, and the concerns whose SQL differs."""

    @property
    def text(self) -> FullText: ...

    @property
    def vectors(self) -> VectorStore: ...

    @property
    def has_mirror(self) -> bool:
        """Whether this store has a Markdown mirror (a SQLite store's folder; never a team store)."""
        ...

    def execute(self, sql: str, params: Sequence[object] = ()) -> Rows: ...

    def executemany(self, sql: str, seq: Iterable[Sequence[object]]) -> None: ...

    def log_op(self, op_id: str, entry: Mapping[str, Any]) -> None:
        """Write one operation-log entry with this transaction (see :mod:`.oplog`)."""
        ...

    def mark_dirty(self, memory_id: str) -> None:
        """Queue ``memory_id``'s mirror file for rewriting (a no-op without a mirror)."""
        ...

    def mark_dirty_many(self, memory_ids: Sequence[str]) -> None:
        """:meth:`mark_dirty` for many memories at once (an import's)."""
        ...

    def secret(self, name: str) -> str:
        """A per-store (per-tenant) secret, hex: the key of forget's confirmation tokens."""
        ...

    def tag_condition(self) -> str:
        """A condition on table ``memory`` true when its ``tags`` JSON array holds the parameter."""
        ...

    def source_field(self, name: str) -> str:
        """An expression giving field ``name`` (a constant) of the ``source`` JSON column, as text."""
        ...

    def take_turn(self) -> None:
        """In a transaction opened with ``write(stage=True)``: wait for the store's other writers
        and hold them off until commit (see :meth:`Store.write`)."""
        ...


class Store(Protocol):
    """An open memory store."""

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql``."""
        ...

    @property
    def label(self) -> str:
        """How messages name the store: the file's path, or the URL without its password."""
        ...

    @property
    def folder(self) -> Path | None:
        """The SQLite store's folder (mirror, operation log, backups); None for a team store."""
        ...

    def write(self, *, stage: bool = False) -> contextlib.AbstractContextManager[Tx]:
        """One write transaction: all of it commits, or none of it; writers take turns.

        ``stage``: the caller writes rows no one else can see before it calls
        :meth:`Tx.take_turn` (an import's new memories), so where the database allows it (a team
        store) other writers are not held off meanwhile; a SQLite file has one writer at a time,
        so there the turn is taken at once.
        """
        ...

    def reading(self) -> contextlib.AbstractContextManager[Tx]: ...

    def after_purge(self) -> dict[str, Any]:
        """Finish erasing purged text outside the transaction (checkpoint, vacuum); its checks."""
        ...

    def flush_log(self, env: Mapping[str, str]) -> str | None:
        """Append queued operation-log entries; None when done, else why they stay queued."""
        ...

    def describe(self) -> dict[str, Any]:
        """What ``stats`` says about the store itself (integrity, schema, log, backups)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc_info: object) -> None: ...


@dataclass(frozen=True, slots=True)
class Location:
    """Where ``KORG_RECALL_STORE`` points: a SQLite file, or a PostgreSQL URL."""

    path: Path | None = None
    url: str | None = None

    @property
    def is_url(self) -> bool:
        return self.url is not None

    @property
    def label(self) -> str:
        """The location as messages show it (a URL without its password)."""
        if self.url is not None:
            from korg_bridge.recall.memory.pg.url import safe_url

            return safe_url(self.url)
        return str(self.path)


def location(env: Mapping[str, str]) -> Location:
    """Where the store is: ``$KORG_RECALL_STORE`` (a path or a ``postgresql://`` URL), else the
    default file (see :func:`.store.default_store_path`).

    A SQLite file is one person's, so a bridge's caller with a tenant (``KORG_BRIDGE_TENANT``,
    :mod:`.tenancy`) gets a file of its own beside it, ``tenants/<tenant>/<name>``, with its own
    mirror, log and backups: two tenants served by one bridge never share memories, in a team
    store or not. (``KORG_RECALL_TENANT`` names a team store's tenant: a person at a terminal
    with it set still uses the file named.)

    Raises:
        ConfigError: a URL of another scheme; a malformed tenant name.
    """
    raw = env.get(ENV_STORE, "").strip()
    if raw.startswith(_URL_SCHEMES):
        return Location(url=raw)
    if "://" in raw:
        scheme = raw.split("://", 1)[0]
        raise ConfigError(
            f"{ENV_STORE} names a {scheme}:// URL; the memory store is a SQLite file path or a "
            "postgresql:// URL. Set it to one of those, or unset it for the default file."
        )
    from korg_bridge.recall.memory.store import default_store_path
    from korg_bridge.recall.memory.tenancy import ENV_BRIDGE_TENANT, tenant_from

    path = default_store_path(env)
    tenant = tenant_from(env) if env.get(ENV_BRIDGE_TENANT, "").strip() else None
    return Location(path=path if tenant is None else path.parent / TENANTS_DIR / tenant / path.name)


def store_exists(env: Mapping[str, str]) -> bool:
    """Whether there is a store to read: the SQLite file exists; a team store always does (its
    schema is made by ``korg-recall store migrate``, never by a read).

    Raises:
        ConfigError: see :func:`location`.
    """
    where = location(env)
    return where.is_url or (where.path is not None and where.path.exists())


def open_store(env: Mapping[str, str]) -> Store:
    """Open the store ``env`` names (a SQLite file is created and migrated if missing).

    Raises:
        ConfigError: the store cannot be used as it is (see :mod:`.store` and :mod:`.pg.store`),
            or a team store is asked for without a tenant.
        NetworkError: the database server cannot be reached.
        DependencyMissing: a PostgreSQL URL without the ``[postgres]`` extra.
    """
    where = location(env)
    if where.url is not None:
        from korg_bridge.recall.memory.pg.store import PgStore

        return PgStore.open(where.url, env)
    from korg_bridge.recall.memory.store import SqliteStore

    assert where.path is not None
    return SqliteStore(where.path)


class ConnectionDropped(NetworkError):
    """The connection to a team store dropped during a call: a read is run again once."""


def read_with_retry(
    env: Mapping[str, str], work: Callable[[Store], _T], *, opened: Store | None = None
) -> _T:
    """Run the read-only ``work`` on a freshly opened store; when the connection to a team store
    drops during it, open the store again and run it once more (never for writes: a write whose
    connection dropped may or may not have committed, so it is reported instead).

    Raises:
        KorgError: from opening the store or from ``work``; a second dropped connection.
    """
    for attempt in (1, 2):
        try:
            with opened if opened is not None and attempt == 1 else open_store(env) as store:
                return work(store)
        except ConnectionDropped as exc:
            if attempt == 2:
                raise
            logger.info("memory store: %s; reading again on a new connection", exc.message)
    raise AssertionError("unreachable")  # pragma: no cover
