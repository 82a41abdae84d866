"""The team store's connection: who we are, which schema, and one transaction per call with the
tenant set.

:meth:`PgStore.open` connects (psycopg 3, a fresh connection per korg-recall
process, no server-side prepared statements so a transaction pooler can sit in
between), then checks in one query what would make the store unsafe or unusable,
refusing with a :class:`~korg_bridge.errors.ConfigError` that names the fix:

* a role that bypasses row-level security (a superuser, ``BYPASSRLS``) or owns the
  tables (it could switch row-level security off): tenants would be isolated only
  by our code, so it is refused -- connect as the application role;
* no korg-recall schema, an older one (run ``korg-recall store migrate``), or one
  a newer korg-recall wrote (upgrade), or no pgvector extension.

Every transaction starts by setting, with ``set_config(…, true)`` (``SET LOCAL``:
gone at commit, so a pooled connection carries nothing to the next client), the
tenant (``korg.tenant``, which the row-level security policies compare with),
the search path and the lock and statement timeouts. A write then takes the
tenant's advisory lock (``pg_advisory_xact_lock``): writes of one tenant take turns,
as a SQLite store's ``BEGIN IMMEDIATE`` makes them, so the write policy decides
against the store as it is and the operation log's chain never forks; writes of
different tenants run side by side. A read is one ``REPEATABLE READ, READ ONLY``
transaction: one snapshot.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.config import ENV_RECALL_STORE, ledger_key
from korg_bridge.errors import ConfigError, DependencyMissing, KorgError
from korg_bridge.recall.memory.backend.pg.errors import (
    LOCK_TIMEOUT_S,
    STATEMENT_TIMEOUT_S,
    connect_error,
    query_error,
    reason_of,
)
from korg_bridge.recall.memory.backend.pg.fulltext import PG_TEXT
from korg_bridge.recall.memory.backend.pg.schema import MIGRATIONS, SCHEMA
from korg_bridge.recall.memory.backend.pg.url import INSTALL_HINT, safe_url
from korg_bridge.recall.memory.backend.pg.vectors import PG_VECTORS
from korg_bridge.recall.tenancy import require_tenant

if TYPE_CHECKING:
    import psycopg

__all__ = ["CONNECT_TIMEOUT_S", "PgStore", "PgTx", "placeholders"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
"""How long connecting may take (libpq's ``connect_timeout``) unless the URL sets its own."""
MIGRATE_HINT = "korg-recall store migrate"
_SEARCH_PATH = f"{SCHEMA}, public"

_PROBE = f"""
    SELECT r.rolname, r.rolsuper, r.rolbypassrls,
           to_regclass('{SCHEMA}._migrations') IS NOT NULL,
           CASE WHEN to_regclass('{SCHEMA}.memory') IS NULL THEN NULL
                ELSE pg_has_role(current_user,
                                 (SELECT relowner FROM pg_class WHERE oid = to_regclass('{SCHEMA}.memory')),
                                 'USAGE') END,
           (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
           current_database()
    FROM pg_roles r WHERE r.rolname = current_user
"""
"""Who we are (and whether row-level security binds us), whether the schema exists and who
owns it, pgvector's version: everything :meth:`PgStore._check` needs, in one round trip."""


@lru_cache(maxsize=256)
def placeholders(sql: str) -> str:
    """The shared SQL's ``?`` placeholders as psycopg's ``%s``.

    Raises:
        ValueError: the SQL holds a ``%`` (psycopg would read it as a placeholder): the shared
            SQL never does, so this is a programming error.
    """
    if "%" in sql:
        raise ValueError("SQL for the team store must not contain '%'; bind the value as a parameter")
    return re.sub(r"\?", "%s", sql)


class PgTx:
    """One transaction on the team store (:class:`~..backend.Tx`)."""

    has_mirror = False

    def __init__(self, store: PgStore, *, in_turn: bool) -> None:
        self._store = store
        self.conn = store.conn
        self.text = PG_TEXT
        self.vectors = PG_VECTORS
        self._cursors: list[Any] = []
        self.in_turn = in_turn

    def take_turn(self) -> None:
        """Wait for the tenant's other writers and hold them off until commit (see the module
        docstring); what this transaction wrote before is invisible to them meanwhile."""
        if not self.in_turn:
            self.conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"korg-recall:{self._store.tenant}",),
            )
            self.in_turn = True

    def execute(self, sql: str, params: Sequence[object] = ()) -> Any:
        cursor = self.conn.cursor()
        self._cursors.append(cursor)
        cursor.execute(placeholders(sql), tuple(params) if params else None)
        return cursor

    def executemany(self, sql: str, seq: Iterable[Sequence[object]]) -> None:
        rows = [tuple(row) for row in seq]
        if rows:
            with self.conn.cursor() as cursor:
                cursor.executemany(placeholders(sql), rows)

    def log_op(self, op_id: str, entry: Mapping[str, Any]) -> None:
        from korg_bridge.recall.memory.backend.pg.oplog import append

        append(self, entry, self._store.ledger_key)

    def mark_dirty(self, memory_id: str) -> None:
        """Nothing to queue: a team store has no mirror."""

    def mark_dirty_many(self, memory_ids: Sequence[str]) -> None:
        """Nothing to queue: a team store has no mirror."""

    def secret(self, name: str) -> str:
        # One root in meta, one key per tenant derived from it: a token made for one tenant is
        # worthless in another, and no tenant's first forget has to write anything.
        row = self.execute("SELECT value FROM meta WHERE key = ?", (f"{name}_secret",)).fetchone()
        root = bytes.fromhex(str(row[0])) if row is not None else b""
        return hmac.new(root, self._store.tenant.encode("utf-8"), hashlib.sha256).hexdigest()

    # Both guarded: a value an older korg-recall stored that jsonb refuses (an imported NaN, a
    # "\u0000") reads as NULL instead of failing the statement -- and every listing of the tenant.
    def tag_condition(self) -> str:
        return (
            "EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE WHEN pg_input_is_valid(memory.tags, 'jsonb') "
            "THEN memory.tags::jsonb END) AS t(value) WHERE t.value = ?)"
        )

    def source_field(self, name: str) -> str:
        if not name.isidentifier():
            raise ValueError(f"not a field name: {name!r}")
        return f"(CASE WHEN pg_input_is_valid(source, 'jsonb') THEN source::jsonb ->> '{name}' END)"

    def close(self) -> None:
        for cursor in self._cursors:
            cursor.close()
        self._cursors.clear()


class PgStore:
    """An open team store for one tenant. Use :meth:`open`."""

    kind = "postgresql"
    folder: Path | None = None

    def __init__(self, conn: psycopg.Connection[Any], url: str, tenant: str, env: Mapping[str, str]) -> None:
        self.conn = conn
        self.url = url
        self.label = safe_url(url)
        self.tenant = tenant
        self.ledger_key = ledger_key(env)
        self.role = ""
        self.database = ""
        self.vector_version = ""
        self.migrations: list[str] = []

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, env: Mapping[str, str]) -> PgStore:
        """Connect to ``url`` for the tenant of ``env`` and check the role and the schema.

        Raises:
            ConfigError: no tenant; a wrong password, role or database; a role that bypasses
                row-level security or owns the tables; a missing, older or newer schema; no pgvector.
            NetworkError: the server cannot be reached.
            DependencyMissing: psycopg is not installed.
        """
        label = safe_url(url)
        tenant = require_tenant(env, label)
        conn = connect(url)
        store = cls(conn, url, tenant, env)
        try:
            store._check()
        except BaseException:
            conn.close()
            raise
        return store

    def _check(self) -> None:
        try:
            row = self.conn.execute(_PROBE).fetchone()
            if row is None:  # pragma: no cover - current_user is always in pg_roles
                raise ConfigError(
                    f"the memory store {self.label} does not know the role it was logged in as."
                )
            role, superuser, bypass, has_migrations, owns, vector, database = row
            self.role, self.database, self.vector_version = str(role), str(database), str(vector or "")
            if not has_migrations:
                raise ConfigError(
                    f"the memory store {self.label} has no korg-recall schema yet. As the database's owner, run "
                    f"`{ENV_RECALL_STORE}=<owner URL> {MIGRATE_HINT} --grant {role}` (docs/deploy.md)."
                )
            self.migrations = [str(r[0]) for r in self.conn.execute(f"SELECT name FROM {SCHEMA}._migrations")]
        except KorgError:
            raise
        except Exception as exc:
            raise self._error(exc, writing=False) from exc
        known = [name for name, _ in MIGRATIONS]
        unknown = [name for name in self.migrations if name not in known]
        if unknown:
            raise ConfigError(
                f"the memory store {self.label} was migrated by a newer korg-recall (unknown migrations "
                f"{', '.join(unknown)}); it was left untouched. Upgrade korg-recall."
            )
        missing = [name for name in known if name not in self.migrations]
        if missing:
            raise ConfigError(
                f"the memory store {self.label} has an older schema (missing {', '.join(missing)}). As the "
                f"schema's owner, run `{MIGRATE_HINT}` (docs/deploy.md)."
            )
        if not vector:
            raise ConfigError(
                f"the pgvector extension is not installed in database {database} of {self.label}. As a "
                "superuser run `CREATE EXTENSION vector;` (packages: postgresql-17-pgvector on Debian, the "
                "pgvector/pgvector image)."
            )
        if superuser or bypass:
            raise ConfigError(
                f"role {role} bypasses row-level security ({'superuser' if superuser else 'BYPASSRLS'}), so "
                f"tenants of {self.label} would be kept apart only by korg-recall's own queries. Connect as the "
                "application role (docs/deploy.md)."
            )
        if owns:
            raise ConfigError(
                f"role {role} owns the memory tables of {self.label}, so it could switch row-level security "
                f"off. Connect as the application role given to `{MIGRATE_HINT} --grant` (docs/deploy.md)."
            )

    def _error(self, exc: BaseException, *, writing: bool) -> KorgError:
        broken = bool(getattr(self.conn, "broken", False)) or self.conn.closed
        return query_error(exc, self.url, broken=broken, writing=writing)

    # --- transactions --------------------------------------------------------------------------

    def _begin(self, *, writing: bool) -> None:
        begin = "BEGIN" if writing else "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        self.conn.execute(begin)
        self.conn.execute(
            "SELECT set_config('korg.tenant', %s, true), set_config('search_path', %s, true), "
            "set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
            (self.tenant, _SEARCH_PATH, f"{LOCK_TIMEOUT_S}s", f"{STATEMENT_TIMEOUT_S}s"),
        )

    @contextlib.contextmanager
    def _transaction(self, *, writing: bool, stage: bool = False) -> Iterator[PgTx]:
        tx = PgTx(self, in_turn=not writing)
        try:
            self._begin(writing=writing)
            if writing and not stage:
                # One writer per tenant at a time (see the module docstring); the key is the tenant's.
                tx.take_turn()
            elif writing:
                # One stager per tenant at a time, holding no other writer off: an import's checks
                # rely on no other import committing between its first look and its turn.
                self.conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"korg-recall-staging:{self.tenant}",),
                )
        except Exception as exc:
            self._rollback()
            raise self._error(exc, writing=writing) from exc
        try:
            yield tx
            if not tx.in_turn:  # nothing commits out of turn: the log's chain must not fork
                tx.take_turn()
        except BaseException as exc:
            tx.close()
            self._rollback()
            if isinstance(exc, KorgError) or not _is_driver_error(exc):
                raise
            raise self._error(exc, writing=writing) from exc
        tx.close()
        try:
            self.conn.execute("COMMIT")
        except Exception as exc:
            self._rollback()
            raise self._error(exc, writing=writing) from exc

    def write(self, *, stage: bool = False, durable: bool = True) -> contextlib.AbstractContextManager[PgTx]:
        """One transaction holding the tenant's write lock: all of it commits, or none of it.

        With ``stage``, the lock is taken only when the caller calls :meth:`PgTx.take_turn` (at the
        latest before commit): what it writes before is invisible to everyone else until commit,
        so a long import does not hold the tenant's other writers off while it writes its rows.
        Staging transactions of one tenant take turns among themselves (a second advisory lock).

        Raises:
            KorgError: the lock stays taken past :data:`~.errors.LOCK_TIMEOUT_S`, or the server fails
                (NetworkError when the connection is lost: a write is never retried).

        ``durable`` is not used: the server commits as it is configured to.
        """
        return self._transaction(writing=True, stage=stage)

    def reading(self) -> contextlib.AbstractContextManager[PgTx]:
        """One read-only snapshot of the tenant's memories.

        Raises:
            KorgError: the server fails (ConnectionDropped when the connection is lost: the
                caller may run the read again, see :func:`~..backend.read_with_retry`).
        """
        return self._transaction(writing=False)

    def _rollback(self) -> None:
        with contextlib.suppress(Exception):
            if not self.conn.closed and self.conn.info.transaction_status != 0:  # 0: idle
                self.conn.execute("ROLLBACK")

    # --- after a call --------------------------------------------------------------------------

    def after_purge(self) -> dict[str, Any]:
        """VACUUM the tenant tables, so the purged rows' old versions are reclaimed and their index
        entries (the vector index's included) removed. Needs MAINTAIN (PostgreSQL 17+, granted by
        ``store migrate --grant``); without it the result says so and autovacuum does it later."""
        try:
            self.conn.execute(
                f"VACUUM (SKIP_LOCKED) {SCHEMA}.memory, {SCHEMA}.memory_vectors, {SCHEMA}.memory_links"
            )
        except Exception as exc:
            if not _is_driver_error(exc):
                raise
            reason = reason_of(exc, self.url)
            logger.info("memory store %s: VACUUM after purge not run: %s", self.label, reason)
            return {
                "vacuumed": False,
                "vacuum": f"not run ({reason}); autovacuum reclaims the old rows later",
            }
        return {"vacuumed": True}

    def flush_log(self, env: Mapping[str, str]) -> str | None:
        """Nothing queued: the log is written inside each operation's transaction."""
        return None

    def describe(self) -> dict[str, Any]:
        """What ``stats`` says: the server, the schema, pgvector, the tenant and its log's chain.

        Raises:
            KorgError: the server fails.
        """
        from korg_bridge.recall.memory.backend.pg.oplog import verify

        with self.reading() as tx:
            report = verify(tx, self.ledger_key, f"{self.label} (tenant {self.tenant})")
            server = str(tx.execute("SHOW server_version").fetchone()[0])
        return {
            "backend": "postgresql",
            "tenant": self.tenant,
            "role": self.role,
            "server": server,
            "pgvector": self.vector_version,
            "schema": list(self.migrations),
            "integrity_check": "ok" if report.intact else report.errors[:20],
            "oplog": {"table": f"{SCHEMA}.memory_ops", "entries": report.events, "intact": report.intact},
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _is_driver_error(exc: BaseException) -> bool:
    module = type(exc).__module__
    return module.startswith("psycopg")


def connect(url: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A new connection to ``url`` (no server-side prepared statements: pooler-safe).

    Raises:
        ConfigError: a wrong password, user or database.
        NetworkError: the server cannot be reached.
        DependencyMissing: psycopg is not installed.
    """
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError as exc:
        raise DependencyMissing(
            f"a postgresql:// memory store needs the psycopg driver, which is not installed. Run: {INSTALL_HINT}"
        ) from exc
    try:
        given = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise ConfigError(
            f"{ENV_RECALL_STORE} is not a PostgreSQL URL psycopg can read ({reason_of(exc, url)}). Write it as "
            "postgresql://USER:PASSWORD@HOST:PORT/DATABASE."
        ) from exc
    options: dict[str, Any] = {"application_name": "korg-recall"}
    if "connect_timeout" not in given:
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    try:
        return psycopg.connect(url, autocommit=autocommit, prepare_threshold=None, **options)
    except psycopg.Error as exc:
        raise connect_error(exc, url) from exc
