"""Opening the store ``KORG_RECALL_STORE`` names: the one place that imports an implementation.

Everything else is written against :mod:`.protocols` and never learns which database it talks
to; this module picks SQLite (:mod:`.sqlite`) or PostgreSQL (:mod:`.pg`) and hands back a
:class:`~.protocols.Store`. Both implementations are imported only when chosen, so a SQLite
user never loads psycopg.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from korg_bridge.config import ENV_RECALL_STORE, ledger_key
from korg_bridge.errors import ConfigError, ConnectionDropped
from korg_bridge.recall.memory.backend.protocols import Store
from korg_bridge.recall.paths import store_location

if TYPE_CHECKING:
    from korg_bridge.ledger.chain import VerifyReport

__all__ = [
    "open_store",
    "read_with_retry",
    "store_exists",
    "verify_store",
]

logger = logging.getLogger(__name__)


_T = TypeVar("_T")


def store_exists(env: Mapping[str, str]) -> bool:
    """Whether there is a store to read: the SQLite file exists; a team store always does (its
    schema is made by ``korg-recall store migrate``, never by a read).

    Raises:
        ConfigError: see :func:`korg_bridge.recall.paths.store_location`.
    """
    where = store_location(env)
    return where.is_url or (where.path is not None and where.path.exists())


def open_store(env: Mapping[str, str]) -> Store:
    """Open the store ``env`` names (a SQLite file is created and migrated if missing).

    Raises:
        ConfigError: the store cannot be used as it is (see :mod:`.store` and :mod:`.pg.store`),
            or a team store is asked for without a tenant.
        NetworkError: the database server cannot be reached.
        DependencyMissing: a PostgreSQL URL without the ``[postgres]`` extra.
    """
    where = store_location(env)
    if where.url is not None:
        from korg_bridge.recall.memory.backend.pg.store import PgStore

        return PgStore.open(where.url, env)
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore

    assert where.path is not None
    return SqliteStore(where.path)


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


def verify_store(target: str, env: Mapping[str, str]) -> VerifyReport:
    """The verdict on a memory store's operation log: a ``postgresql://`` URL's chain for the
    tenant of ``env``, or the ``memory-ops.jsonl`` beside a SQLite store at path ``target``
    (:func:`.sqlite.oplogfile.verify_log`).

    Raises:
        ConfigError: a team store without a tenant or unusable as it is; no SQLite store at
            ``target``, or one that never wrote a log.
        NetworkError: the server cannot be reached.
    """
    where = store_location({**env, ENV_RECALL_STORE: target})
    if where.url is not None:
        from korg_bridge.recall.memory.backend.pg.oplog import verify
        from korg_bridge.recall.memory.backend.pg.store import PgStore

        with PgStore.open(where.url, env) as store, store.reading() as tx:
            return verify(tx, ledger_key(env), f"{store.label} (tenant {store.tenant})")
    from korg_bridge.recall.memory.backend.sqlite.oplogfile import log_state, verify_log
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore

    path = where.path
    assert path is not None
    if not path.is_file():
        raise ConfigError(f"no memory store at {path}. Pass the path of a store (its memory.sqlite).")
    with SqliteStore(path) as sqlite, sqlite.reading() as tx:
        anchor, breaks = log_state(tx)
    return verify_log(path, anchor, breaks, ledger_key(env))
