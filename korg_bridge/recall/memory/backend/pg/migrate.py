"""``korg-recall store migrate``: create or upgrade a team store's schema, and grant the app role.

Run by an operator with ``KORG_RECALL_STORE`` set to the **owner's** URL (the role
that will own the tables; a superuser works but is not needed once pgvector is
installed). It:

1. checks that pgvector is available, and creates the extension if the role
   may (else names the superuser's one statement);
2. creates schema ``korg_recall`` and applies the named migrations of
   :mod:`.schema` that are missing, each in its own transaction under one
   advisory lock, so two operators running it at once apply each step once;
   a database recording a migration this version does not know is refused;
3. with ``--grant ROLE`` (repeatable), grants the application role what it
   needs and nothing more (:func:`.schema.grant_statements`): it owns nothing,
   cannot bypass row-level security, cannot update or delete the log.

Run it again after upgrading korg-recall; it is idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from korg_bridge.errors import ConfigError, KorgError
from korg_bridge.recall.memory.backend.pg.errors import query_error, reason_of
from korg_bridge.recall.memory.backend.pg.schema import MIGRATIONS, SCHEMA, grant_statements
from korg_bridge.recall.memory.backend.pg.store import connect
from korg_bridge.recall.memory.backend.pg.url import safe_url

__all__ = ["MIGRATE_LOCK", "migrate_store"]

MIGRATE_LOCK = 0x4B52434D
"""Advisory lock key of a migration run (ASCII ``KRCM``): one migrator at a time per database."""
_NO_PGVECTOR = (
    "pgvector is not installed on the server of {where}. Install it (Debian: apt install "
    "postgresql-17-pgvector; Docker: the pgvector/pgvector image), then run this again."
)


def migrate_store(url: str, grant: Sequence[str]) -> dict[str, Any]:
    """Bring the schema at ``url`` up to date and grant ``grant`` the application privileges.

    Raises:
        ConfigError: pgvector missing or not creatable by this role, a schema from a newer
            korg-recall, a role to grant that does not exist, a privilege this role lacks.
        NetworkError: the server cannot be reached.
    """
    where = safe_url(url)
    conn = connect(url)
    try:
        vector = _ensure_vector(conn, url, where)
        applied = _migrate(conn, url, where)
        granted = _grant(conn, url, grant)
        names = [str(row[0]) for row in conn.execute(f"SELECT name FROM {SCHEMA}._migrations ORDER BY name")]
    finally:
        conn.close()
    return {"store": where, "pgvector": vector, "applied": applied, "schema": names, "granted": granted}


def _ensure_vector(conn: Any, url: str, where: str) -> str:
    try:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        if row is not None:
            return str(row[0])
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is None:
            raise ConfigError(_NO_PGVECTOR.format(where=where))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return str(conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0])
    except KorgError:
        raise
    except Exception as exc:
        raise _failed(
            exc,
            conn,
            url,
            f"this role may not create the pgvector extension in {where} ({{reason}}). As a "
            "superuser run `CREATE EXTENSION vector;` in that database, then run this again.",
        ) from exc


def _migrate(conn: Any, url: str, where: str) -> list[str]:
    known = [name for name, _ in MIGRATIONS]
    done: list[str] = []
    try:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {SCHEMA}._migrations "
                "(name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
        for name, step in MIGRATIONS:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
                seen = [str(r[0]) for r in conn.execute(f"SELECT name FROM {SCHEMA}._migrations")]
                unknown = [n for n in seen if n not in known]
                if unknown:
                    raise ConfigError(
                        f"the memory store {where} was migrated by a newer korg-recall (unknown migrations "
                        f"{', '.join(unknown)}); it was left untouched. Upgrade korg-recall."
                    )
                if name in seen:
                    continue
                conn.execute("SELECT set_config('search_path', %s, true)", (f"{SCHEMA}, public",))
                if callable(step):
                    step(conn)
                else:
                    for statement in step:
                        conn.execute(statement)
                conn.execute(f"INSERT INTO {SCHEMA}._migrations (name) VALUES (%s)", (name,))
                done.append(name)
    except KorgError:
        raise
    except Exception as exc:
        raise _failed(
            exc,
            conn,
            url,
            f"this role may not create korg-recall's schema in {where} ({{reason}}). Run it as "
            "the database's owner, or grant this role CREATE on the database (docs/deploy.md).",
        ) from exc
    return done


def _failed(exc: Exception, conn: Any, url: str, denied: str) -> KorgError:
    """A driver error of a migration as ours: ``denied`` (with ``{reason}``) when the role lacks a
    privilege (SQLSTATE 42501), else what :func:`query_error` makes of it."""
    if getattr(exc, "sqlstate", None) == "42501":
        return ConfigError(denied.replace("{reason}", reason_of(exc, url)))
    return query_error(exc, url, broken=conn.closed, writing=True)


def _grant(conn: Any, url: str, roles: Sequence[str]) -> list[str]:
    from psycopg import sql

    granted: list[str] = []
    try:
        maintain = int(conn.execute("SHOW server_version_num").fetchone()[0]) >= 170000
        for role in roles:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
                raise ConfigError(
                    f"role {role!r} does not exist. Create the application role first (CREATE ROLE … LOGIN "
                    "PASSWORD …; docs/deploy.md), then run this again."
                )
            quoted = sql.Identifier(role).as_string(conn)
            with conn.transaction():
                for statement in grant_statements(quoted, maintain=maintain):
                    conn.execute(statement)
            granted.append(role)
    except KorgError:
        raise
    except Exception as exc:
        raise query_error(exc, url, broken=conn.closed, writing=True) from exc
    return granted
