"""A team store that cannot be used: one line on stderr naming the fix, the introspect exit code
(5 when the server cannot be reached, 3 when it will not serve us as configured), nothing written
-- and never a password in any of it.

Each case is a real server, database or role in a state an operator can get it into: a port
nobody listens on, a wrong password, a database without pgvector or without the schema, a
schema from a newer korg-recall, a role that bypasses row-level security.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("psycopg", reason="the team store's failures need the [postgres] extra (psycopg)")

from korg_bridge.recall.memory.backend.pg.schema import MIGRATIONS
from tests.helpers.cli import failed, run_recall
from tests.helpers.postgres import OWNER, Roles, create_database, migrate

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def tenant_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KORG_RECALL_TENANT", "acme")


def _database(roles: Roles, name: str, *, vector: bool = True, schema: bool = True) -> Iterator[str]:
    url = create_database(roles, name, vector=vector, schema=schema)
    try:
        yield url
    finally:
        with roles.server.connect(database="postgres") as su:
            su.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def bare_database(pg_roles: Roles) -> Iterator[str]:
    """A database with pgvector but no korg-recall schema (``store migrate`` never ran)."""
    yield from _database(pg_roles, "korg_bare", schema=False)


@pytest.fixture
def plain_database(pg_roles: Roles) -> Iterator[str]:
    """A database without pgvector."""
    yield from _database(pg_roles, "korg_plain", vector=False, schema=False)


@pytest.fixture
def spare_database(pg_roles: Roles) -> Iterator[str]:
    """A migrated database this test may damage."""
    yield from _database(pg_roles, "korg_spare")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when this returns: nobody listens there


def test_a_server_nobody_listens_on_is_a_network_error(project: Path, tenant_env: None) -> None:
    url = f"postgresql://korg_app:hunter2-secret@127.0.0.1:{_closed_port()}/korg"
    message = failed(
        run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": url}),
        5,
        "cannot reach the memory store",
    )
    assert "Check that PostgreSQL is running" in message
    assert "hunter2-secret" not in message and "korg_app:***@" in message
    failed(
        run_recall(
            "remember", "--content", "x", "--type", "note", cwd=project, env={"KORG_RECALL_STORE": url}
        ),
        5,
        "cannot reach",
    )


def test_an_unknown_host_is_a_network_error(project: Path, tenant_env: None) -> None:
    url = "postgresql://korg_app:hunter2-secret@db.invalid:5432/korg?connect_timeout=5"
    message = failed(
        run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": url}),
        5,
        "cannot reach the memory store",
    )
    assert "hunter2-secret" not in message


def test_a_wrong_password_is_a_config_error_that_shows_neither_password(
    pg_roles: Roles, project: Path, tenant_env: None
) -> None:
    url = pg_roles.server.url("korg_app", "not-the-password-7391", "korg")
    message = failed(
        run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": url}),
        3,
        "cannot log in to the memory store",
    )
    assert "password authentication failed" in message and "Check the user and password" in message
    assert "not-the-password-7391" not in message and pg_roles.app_password not in message


def test_a_missing_database_is_a_config_error(pg_roles: Roles, project: Path, tenant_env: None) -> None:
    url = pg_roles.app_url("no_such_database")
    failed(run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": url}), 3, "Create the database")


def test_a_database_without_the_schema_names_the_migrate_command(
    bare_database: str, project: Path, tenant_env: None
) -> None:
    message = failed(
        run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": bare_database}),
        3,
        "has no korg-recall schema",
    )
    assert "korg-recall store migrate --grant korg_app" in message


def test_missing_pgvector_names_the_superusers_statement_and_creates_nothing(
    pg_roles: Roles, plain_database: str
) -> None:
    done = migrate(pg_roles.owner_url("korg_plain"))
    assert (done.returncode, done.stdout) == (3, "")
    assert "CREATE EXTENSION vector" in done.stderr and pg_roles.owner_password not in done.stderr
    with pg_roles.server.connect(database="korg_plain") as su:
        assert su.execute("SELECT to_regnamespace('korg_recall')").fetchone() == (None,)


def test_a_schema_from_a_newer_korg_recall_is_refused_and_left_untouched(
    pg_roles: Roles, spare_database: str, project: Path, tenant_env: None
) -> None:
    with pg_roles.server.connect(pg_roles.owner_url("korg_spare")) as owner:
        owner.execute("INSERT INTO korg_recall._migrations (name) VALUES ('m999_future')")
    failed(
        run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": spare_database}), 3, "newer korg-recall"
    )
    again = migrate(pg_roles.owner_url("korg_spare"))
    assert again.returncode == 3 and "newer korg-recall" in again.stderr
    with pg_roles.server.connect(pg_roles.owner_url("korg_spare")) as owner:
        assert owner.execute("SELECT count(*) FROM korg_recall._migrations").fetchone() == (
            len(MIGRATIONS) + 1,
        )


def test_an_older_schema_names_the_migrate_command(
    pg_roles: Roles, spare_database: str, project: Path, tenant_env: None
) -> None:
    with pg_roles.server.connect(pg_roles.owner_url("korg_spare")) as owner:
        owner.execute("DELETE FROM korg_recall._migrations WHERE name = 'm002_forget_secret'")
    message = failed(
        run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": spare_database}), 3, "older schema"
    )
    assert "korg-recall store migrate" in message


@pytest.mark.parametrize("who", ["superuser", "owner"])
def test_a_role_that_could_bypass_row_level_security_is_refused(
    pg_roles: Roles, project: Path, tenant_env: None, who: str
) -> None:
    url = pg_roles.server.url() if who == "superuser" else pg_roles.owner_url()
    phrase = "bypasses row-level security" if who == "superuser" else "owns the memory tables"
    message = failed(run_recall("memories", cwd=project, env={"KORG_RECALL_STORE": url}), 3, phrase)
    assert "Connect as the application role" in message


def test_store_migrate_refuses_a_sqlite_store_and_an_unknown_role(pg_roles: Roles, project: Path) -> None:
    failed(run_recall("store", "migrate", cwd=project), 3, "is not one")
    done = migrate(pg_roles.owner_url(), grant=["nobody_here"])
    assert done.returncode == 3 and "role 'nobody_here' does not exist" in done.stderr


def test_the_owner_may_not_create_the_schema_elsewhere_without_the_privilege(pg_roles: Roles) -> None:
    # A database the owner role does not own: it may not create korg-recall's schema in it.
    with pg_roles.server.connect(database="postgres") as su:
        su.execute("CREATE DATABASE korg_foreign")
    try:
        with pg_roles.server.connect(database="korg_foreign") as su:
            su.execute("CREATE EXTENSION vector")
        done = migrate(pg_roles.server.url(OWNER, pg_roles.owner_password, "korg_foreign"))
        assert done.returncode == 3 and "may not create korg-recall's schema" in done.stderr
    finally:
        with pg_roles.server.connect(database="postgres") as su:
            su.execute("DROP DATABASE korg_foreign WITH (FORCE)")
