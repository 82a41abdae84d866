"""Fixtures of the memory-store tests: keyword-only by default, a git project to work in, and the
store on both backends.

Every test here runs twice, on a SQLite file and on PostgreSQL (``backend``: a session-wide
embedded server, a fresh tenant per test, so each test starts from an empty store), unless it
is marked (the markers are declared in ``pyproject.toml``):

* ``sqlite_only(why)`` -- inherently about the SQLite store: its file, WAL, backups, the Markdown
  mirror beside it or its file log (a team store has none of these; its counterparts are tested
  in ``test_memory_pg*.py``);
* ``no_store`` -- touches no store at all (normalisation, front matter, scopes as text);
* ``postgres_only`` -- about the team store alone: row-level security, tenants, its vectors, its
  failures (``test_memory_pg*.py``).

The PostgreSQL runs skip, with the reason, where the embedded server cannot start.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.memory import PgTarget, git_repo, store_file
from tests.helpers.postgres import (
    Roles,
    served_roles,
)

BACKENDS = ("sqlite", "postgres")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    definition = metafunc.definition
    if definition.get_closest_marker("sqlite_only") or definition.get_closest_marker("no_store"):
        return
    if definition.get_closest_marker("backends_by_module") or definition.get_closest_marker("postgres_only"):
        return
    metafunc.parametrize("backend", BACKENDS, indirect=True)


@pytest.fixture(scope="session")
def pg_roles() -> Iterator[Roles]:
    """One embedded PostgreSQL for the session, set up as docs/deploy.md says (skipped if it cannot run)."""
    yield from served_roles()


@pytest.fixture(autouse=True)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> str:
    """``sqlite`` (the default store under the isolated home) or ``postgres`` (KORG_RECALL_STORE is the
    application role's URL, KORG_RECALL_TENANT a tenant no other test uses)."""
    kind = str(getattr(request, "param", "sqlite"))
    if kind == "postgres":
        roles: Roles = request.getfixturevalue("pg_roles")
        monkeypatch.setenv("KORG_RECALL_STORE", roles.app_url())
        monkeypatch.setenv("KORG_RECALL_TENANT", f"t-{uuid.uuid4().hex[:12]}")
    return kind


@pytest.fixture(autouse=True)
def _keyword_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a model every write runs the keyword check only (a model load costs ~1 s per
    process); the semantic tests set KORG_RECALL_MODEL_DIR back themselves."""
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.delenv("KORG_RECALL_MODEL", raising=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository under ``tmp_path``, also the working directory of in-process calls."""
    repo = git_repo(tmp_path / "shop")
    monkeypatch.chdir(repo)
    return repo


@pytest.fixture
def store(isolated_env: Path, backend: str, request: pytest.FixtureRequest) -> Path | PgTarget:
    """Where this test's memories live: the SQLite file (``$XDG_DATA_HOME/korg-recall/memory.sqlite``),
    or the team store's URL and this test's tenant."""
    if backend == "postgres":
        import os

        roles: Roles = request.getfixturevalue("pg_roles")
        return PgTarget(os.environ["KORG_RECALL_STORE"], os.environ["KORG_RECALL_TENANT"], roles)
    return store_file(isolated_env)
