"""The team store on its own: row-level security that holds against hand-written SQL, tenants that
never see each other, tenant-filtered vector queries that still return k rows, the operation
log's chain per tenant, the bridge's identity winning, and a read retried once when its
connection drops (a write never).

Everything runs against the session's embedded PostgreSQL, as the application role, through
the real ``korg-recall`` (in process or as a child) unless a test says it acts as someone else.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("psycopg", reason="the team store's tests need the [postgres] extra (psycopg)")

import psycopg

from korg_bridge.recall.memory.backend.pg.schema import APP_TABLES, TENANT_TABLES
from korg_bridge.recall.memory.backend.pg.store import PgStore
from korg_bridge.recall.memory.backend.pg.vectors import literal, nearest, nearest_sql
from korg_bridge.recall.memory.records import Version, iso, new_id
from korg_bridge.recall.memory.rows import insert_version
from tests.helpers.cli import answer, call_recall, failed, korg_recall, ok, run_recall
from tests.helpers.memory import PgTarget, log_entries
from tests.helpers.postgres import APP, Roles

pytestmark = pytest.mark.postgres_only

POLL_BOUND = 20.0
"""Seconds a test waits for the server to show what it polls for (a backend waiting on a lock)."""


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def team(pg_roles: Roles, monkeypatch: pytest.MonkeyPatch) -> PgTarget:
    """This test's tenant of the team store, set as korg-recall's store and tenant."""
    target = PgTarget(pg_roles.app_url(), tenant(), pg_roles)
    monkeypatch.setenv("KORG_RECALL_STORE", target.url)
    monkeypatch.setenv("KORG_RECALL_TENANT", target.tenant)
    return target


def as_tenant(env_tenant: str) -> dict[str, str]:
    return {"KORG_RECALL_TENANT": env_tenant}


# --- the schema -------------------------------------------------------------------------------


def test_every_tenant_table_forces_row_level_security_and_the_app_role_owns_nothing(pg_roles: Roles) -> None:
    with pg_roles.server.connect() as su:
        forced = su.execute(
            "SELECT relname, relrowsecurity, relforcerowsecurity, pg_get_userbyid(relowner) FROM pg_class "
            "WHERE relnamespace = 'korg_recall'::regnamespace AND relkind = 'r' ORDER BY relname"
        ).fetchall()
        by_name = {name: (enabled, forced_, owner) for name, enabled, forced_, owner in forced}
        for table in TENANT_TABLES:
            assert by_name[table][:2] == (True, True), table
        assert {owner for _, _, owner in by_name.values()} == {"korg_owner"}
        policies = su.execute(
            "SELECT tablename, qual, with_check FROM pg_policies WHERE schemaname = 'korg_recall'"
        ).fetchall()
        assert {name for name, _, _ in policies} == set(TENANT_TABLES)
        assert all("current_setting('korg.tenant'" in qual and qual == check for _, qual, check in policies)
        app = su.execute(f"SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = '{APP}'").fetchone()
        assert app == (False, False)
        granted = su.execute(
            "SELECT table_name, string_agg(privilege_type, ',' ORDER BY privilege_type) FROM "
            "information_schema.role_table_grants WHERE grantee = %s AND table_schema = 'korg_recall' "
            "GROUP BY table_name",
            (APP,),
        ).fetchall()
        assert {name for name, _ in granted} == set(APP_TABLES)
        assert dict(granted)["memory_ops"] == "INSERT,SELECT"  # the log is append-only for the app


def test_store_migrate_is_idempotent_and_names_what_it_did(pg_roles: Roles) -> None:
    from tests.helpers.postgres import migrate

    again = migrate(pg_roles.owner_url())
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["applied"] == [] and report["granted"] == [APP]
    assert report["schema"] == [
        "m001_memory",
        "m002_forget_secret",
        "m003_memory_ops_head",
        "m004_import_identities",
    ]
    assert pg_roles.owner_password not in again.stdout + again.stderr
    assert report["store"].startswith("postgresql://korg_owner:***@127.0.0.1:")


def test_upgrading_a_store_to_the_log_head_needs_no_new_grant_and_keeps_its_chain(
    pg_roles: Roles, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.postgres import create_database, migrate

    database = f"upgrade_{uuid.uuid4().hex[:8]}"
    app_url = create_database(pg_roles, database)
    with psycopg.connect(pg_roles.owner_url(database), autocommit=True, connect_timeout=10) as owner:
        # The store as the previous release left it: no head table.
        owner.execute("DROP TABLE korg_recall.memory_ops_head")
        owner.execute("DELETE FROM korg_recall._migrations WHERE name = 'm003_memory_ops_head'")
    monkeypatch.setenv("KORG_RECALL_STORE", app_url)
    monkeypatch.setenv("KORG_RECALL_TENANT", tenant())
    code, _, err = call_recall(capsys, "remember", "--content", "Before the upgrade.", "--type", "note")
    assert code == 3 and "store migrate" in err
    done = migrate(pg_roles.owner_url(database), grant=())  # the operator forgets --grant
    assert done.returncode == 0, done.stderr
    answer(capsys, "remember", "--content", "After the upgrade: cranes arrive in March.", "--type", "note")
    assert ok(run_recall("verify", "--store", app_url, cwd=project))["intact"] is True


# --- row-level security -----------------------------------------------------------------------


def test_row_level_security_walls_tenants_apart_even_for_hand_written_sql(
    pg_roles: Roles, project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tenant(), tenant()
    monkeypatch.setenv("KORG_RECALL_STORE", pg_roles.app_url())
    monkeypatch.setenv("KORG_RECALL_TENANT", a)
    mine = answer(capsys, "remember", "--content", "Alpha's launch code name is Heron.", "--type", "project")
    monkeypatch.setenv("KORG_RECALL_TENANT", b)
    theirs = answer(capsys, "remember", "--content", "Bravo's roadmap ships in March.", "--type", "project")
    tables = [f"korg_recall.{table}" for table in TENANT_TABLES]

    with psycopg.connect(pg_roles.app_url(), autocommit=True, connect_timeout=10) as conn:
        # No tenant setting: nothing to read, and nothing can be written.
        for table in tables:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
        with pytest.raises((psycopg.errors.NotNullViolation, psycopg.errors.InsufficientPrivilege)):
            conn.execute(
                "INSERT INTO korg_recall.memory (id, version, scope, type, content_hash, state, actor, recorded_at) "
                "VALUES ('mzzzzzzzzzz', 1, 'user', 'note', 'h', 'live', 'x', 'now')"
            )
        with conn.transaction():
            conn.execute("SELECT set_config('korg.tenant', %s, true)", (a,))
            # Tenant A, asking for B's rows by name, by id, or for everything.
            assert conn.execute(
                "SELECT count(*) FROM korg_recall.memory WHERE tenant_id = %s", (b,)
            ).fetchone() == (0,)
            assert conn.execute(
                "SELECT count(*) FROM korg_recall.memory WHERE id = %s", (theirs["id"],)
            ).fetchone() == (0,)
            assert conn.execute("SELECT DISTINCT tenant_id FROM korg_recall.memory").fetchall() == [(a,)]
            assert conn.execute("SELECT DISTINCT tenant_id FROM korg_recall.memory_ops").fetchall() == [(a,)]
            # Updating or deleting B's rows changes nothing; "every row" means A's.
            changed = conn.execute(
                "UPDATE korg_recall.memory SET body = 'pwned' WHERE tenant_id = %s OR id = %s",
                (b, theirs["id"]),
            )
            assert changed.rowcount == 0
            assert (
                conn.execute("DELETE FROM korg_recall.memory_links WHERE tenant_id = %s", (b,)).rowcount == 0
            )
            assert conn.execute("DELETE FROM korg_recall.memory WHERE id = %s", (theirs["id"],)).rowcount == 0
            # Writing into B, or moving A's row into B, is refused by the policy's check.
            for statement in (
                "INSERT INTO korg_recall.memory (tenant_id, id, version, scope, type, content_hash, state, actor, "
                "recorded_at) VALUES (%s, 'mzzzzzzzzzz', 1, 'user', 'note', 'h', 'live', 'x', 'now')",
                "UPDATE korg_recall.memory SET tenant_id = %s",
            ):
                with (
                    pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"),
                    conn.transaction(),
                ):
                    conn.execute(statement, (b,))
            # The log is append-only, and the role cannot turn the policies off.
            for statement in (
                "DELETE FROM korg_recall.memory_ops",
                "UPDATE korg_recall.memory_ops SET entry = '{}'",
                "ALTER TABLE korg_recall.memory DISABLE ROW LEVEL SECURITY",
                "ALTER TABLE korg_recall.memory NO FORCE ROW LEVEL SECURITY",
                "DROP POLICY tenant_isolation ON korg_recall.memory",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(statement)
            with (
                pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"),
                conn.transaction(),
            ):
                conn.execute("SET LOCAL row_security = off")
                conn.execute("SELECT count(*) FROM korg_recall.memory").fetchone()
            assert conn.execute("SELECT count(*) FROM korg_recall.memory").fetchone() == (1,)

    # B's memory is as it was, and each tenant still sees exactly its own.
    shown = answer(capsys, "memories", "--ids", str(theirs["id"]))["memories"][0]
    assert shown["body"] == "Bravo's roadmap ships in March."
    monkeypatch.setenv("KORG_RECALL_TENANT", a)
    assert [line.split()[0] for line in answer(capsys, "memories")["lines"]] == [mine["id"]]


def test_two_tenants_through_the_cli_see_only_their_own_memories(pg_roles: Roles, project: Path) -> None:
    a, b = tenant(), tenant()
    base = {"KORG_RECALL_STORE": pg_roles.app_url()}
    fact = "The staging database resets every Sunday at 03:00."
    first = ok(
        run_recall(
            "remember", "--content", fact, "--type", "project", cwd=project, env={**base, **as_tenant(a)}
        )
    )
    second = ok(
        run_recall(
            "remember", "--content", fact, "--type", "project", cwd=project, env={**base, **as_tenant(b)}
        )
    )
    # Dedup is per tenant: the same text is a new memory in the other tenant, not an "exists".
    assert (first["status"], second["status"]) == ("created", "created") and first["id"] != second["id"]
    for who, made, other in ((a, first, second), (b, second, first)):
        env = {**base, **as_tenant(who)}
        listed = ok(run_recall("memories", cwd=project, env=env))
        assert [line.split()[0] for line in listed["lines"]] == [made["id"]]
        found = ok(
            run_recall(
                "recall", "--query", "staging database", "--kinds", "memory", "--json", cwd=project, env=env
            )
        )
        assert [m["id"] for m in found["memories"]] == [made["id"]]
        failed(run_recall("forget", "--id", other["id"], cwd=project, env=env), 2, f"no memory {other['id']}")
        failed(
            run_recall("memories", "--ids", other["id"], cwd=project, env=env), 2, f"no memory {other['id']}"
        )


def test_the_bridges_tenant_and_actor_win_over_the_inherited_environment(
    team: PgTarget, project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bridged = tenant()
    monkeypatch.setenv("KORG_RECALL_ACTOR", "operator-default")
    monkeypatch.setenv("KORG_BRIDGE_TENANT", bridged)
    monkeypatch.setenv("KORG_BRIDGE_ACTOR", "ana@laptop")
    made = answer(
        capsys, "remember", "--content", "Bridged writes carry the token's identity.", "--type", "note"
    )
    assert not team.exists()  # nothing landed in KORG_RECALL_TENANT's tenant
    bridged_store = PgTarget(team.url, bridged, team.roles)
    assert bridged_store.rows("SELECT actor FROM memory WHERE id = ?", [made["id"]]) == [("ana@laptop",)]
    assert [e["source_agent"] for e in log_entries(bridged_store)] == ["ana@laptop"]


def test_without_a_tenant_a_team_store_refuses_to_run_naming_the_variable(
    pg_roles: Roles, project: Path
) -> None:
    env = {"KORG_RECALL_STORE": pg_roles.app_url()}
    message = failed(run_recall("memories", cwd=project, env=env), 3, "KORG_RECALL_TENANT")
    assert "KORG_BRIDGE_TENANT" in message and pg_roles.app_password not in message
    failed(
        run_recall("memories", cwd=project, env={**env, "KORG_RECALL_TENANT": "no spaces please"}),
        3,
        "is not a tenant name",
    )


def test_the_mirror_stays_off_and_asking_for_it_is_refused(
    team: PgTarget, project: Path, isolated_env: Path
) -> None:
    made = ok(
        run_recall(
            "remember", "--content", "Team memories live on the server only.", "--type", "note", cwd=project
        )
    )
    assert made["checks"]["mirror"] == "off"
    assert not list(isolated_env.rglob("memories"))
    failed(run_recall("memories", cwd=project, env={"KORG_RECALL_MIRROR": "1"}), 3, "has no Markdown mirror")


# --- vectors ----------------------------------------------------------------------------------


def _near(rng: random.Random, center: list[float], spread: float) -> list[float]:
    return [x + spread * rng.gauss(0.0, 1.0) for x in center]


def test_tenant_filtered_vector_queries_return_k_rows(pg_roles: Roles) -> None:
    """The pgvector pitfall: an HNSW scan yields ef_search candidates of every tenant, the tenant
    filter drops most, and fewer than k rows come back. Iterative scans must return k."""
    rng = random.Random(7)
    # Every tenant's vectors around one topic, at graded distances: other tenants' vectors are as
    # close to the query as this tenant's (the worst case for a filter), and the true 10 nearest
    # are well apart (memories 0-9, by distance), so the index can be held to them.
    topic = [rng.gauss(0.0, 1.0) for _ in range(384)]
    tenants = [tenant() for _ in range(20)]
    per_tenant, k = 30, 10
    ids: dict[str, list[str]] = {}
    for name in tenants:
        with PgStore.open(pg_roles.app_url(), {"KORG_RECALL_TENANT": name}) as store, store.write() as tx:
            for n in range(per_tenant):
                version = insert_version(
                    tx,
                    Version(id=new_id(), version=1, scope="user", type="note", title=f"v{n}", body=f"vector {n}",
                            content_hash=f"h{n}", actor="test", recorded_at=iso()),
                )  # fmt: skip
                assert version.rowid is not None
                tx.vectors.put(tx, version.rowid, "test-model", 384, _near(rng, topic, 0.2 + 0.05 * n))
                ids.setdefault(name, []).append(version.id)
    query = _near(rng, topic, 0.1)
    with PgStore.open(pg_roles.app_url(), {"KORG_RECALL_TENANT": tenants[3]}) as store, store.reading() as tx:
        exact = nearest(tx, "user", "test-model", 384, query, k, exact=True)
        # At this size the planner reads the tenant's 30 rows and sorts them (exact, and right);
        # at a team's size it walks the HNSW index (bench/team_bench.py). Make it walk the index.
        tx.execute("SET LOCAL enable_sort = off")
        text = literal(query)
        plan = "\n".join(
            str(row[0])
            for row in tx.execute(
                f"EXPLAIN {nearest_sql(384, indexed=True)}", (text, text, "test-model", "user", text, k)
            )
        )
        found = nearest(tx, "user", "test-model", 384, query, k)
        pitfall = nearest(tx, "user", "test-model", 384, query, k, iterative=False)
    assert "Index Scan using memory_vectors_hnsw_384" in plan
    assert len(found) == k
    assert [memory_id for memory_id, _ in exact] == ids[tenants[3]][:k]
    assert len({memory_id for memory_id, _ in found} & set(ids[tenants[3]][:k])) >= 9
    assert [c for _, c in found] == sorted((c for _, c in found), reverse=True)
    assert len(pitfall) < k  # what the iterative scan is there for


# --- the operation log ------------------------------------------------------------------------


def test_a_deleted_log_entry_breaks_the_chain_and_verify_store_says_where(
    team: PgTarget, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(3):
        answer(capsys, "remember", "--content", f"Heron count on day {n} was {n * 7}.", "--type", "note")
    report = ok(run_recall("verify", "--store", team.url, cwd=project))
    assert (report["intact"], report["events"]) == (True, 3)
    assert report["path"] == f"{team.url.replace(team.roles.app_password, '***')} (tenant {team.tenant})"
    assert team.as_owner("DELETE FROM memory_ops WHERE seq_id = 2") == 1
    proc = run_recall("verify", "--store", team.url, cwd=project)
    assert proc.returncode == 1
    errors = json.loads(proc.stdout)["errors"]
    assert any(e.startswith("seq 2 missing") for e in errors)
    assert any(e.startswith("seq 3: prev_hash mismatch") for e in errors)
    code, _, err = call_recall(capsys, "verify", "--store", team.url, "--pubkey", "00" * 32)
    assert code == 2 and "pass them with --path" in err


def test_kill_9_during_writes_loses_no_acknowledged_memory_and_never_forks_the_chain(
    team: PgTarget, project: Path
) -> None:
    seed = random.randrange(1 << 30)
    acked: list[str] = []
    killed = 0
    lock = threading.Lock()

    def lane(number: int) -> None:
        nonlocal killed
        rng = random.Random(seed + number)
        for i in range(number, 45, 3):
            proc = subprocess.Popen(
                [*korg_recall(), "remember", "--content", f"Drill fact {i} with marker k{seed}-{i}.", "--type", "note"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=project,
            )  # fmt: skip
            try:
                out, _ = proc.communicate(timeout=rng.uniform(0.0, 1.2))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate(timeout=30)
                with lock:
                    killed += 1
            try:
                memory_id = json.loads(out).get("id")
            except ValueError:
                memory_id = None
            if memory_id:
                with lock:
                    acked.append(memory_id)

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not any(thread.is_alive() for thread in threads)
    live = {
        row[0] for row in team.rows("SELECT id FROM memory WHERE superseded_by IS NULL AND state = 'live'")
    }
    assert not sorted(set(acked) - live), f"acknowledged but lost (seed {seed}, {killed} kills)"
    verdict = ok(run_recall("verify", "--store", team.url, cwd=project))
    assert verdict["intact"] is True, verdict["errors"]
    logged = {entry["args"]["id"] for entry in log_entries(team)}
    assert live == logged  # a write and its log entry commit together, or neither does


# --- dropped connections ----------------------------------------------------------------------


class TableLock:
    """The memory table locked by another session, so a korg-recall statement waits where the test
    can find it (pg_stat_activity) and cut its connection."""

    def __init__(self, roles: Roles) -> None:
        self.roles = roles
        self.conn = psycopg.connect(roles.server.url(), autocommit=True, connect_timeout=10)
        # Another session looks: pg_stat_activity is a snapshot for the length of a transaction.
        self.watch = psycopg.connect(roles.server.url(), autocommit=True, connect_timeout=10)

    def __enter__(self) -> TableLock:
        self.conn.execute("BEGIN")
        self.conn.execute("LOCK TABLE korg_recall.memory IN ACCESS EXCLUSIVE MODE")
        return self

    def waiting(self, seen: set[int]) -> int | None:
        row = self.watch.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'korg-recall' "
            "AND wait_event_type = 'Lock' AND NOT (pid = ANY(%s)) LIMIT 1",
            (list(seen),),
        ).fetchone()
        return None if row is None else int(row[0])

    def cut(self, pid: int) -> None:
        assert self.watch.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)

    def __exit__(self, *exc_info: object) -> None:
        self.conn.close()
        self.watch.close()


async def _wait_for_waiter(lock: TableLock, seen: set[int]) -> int:
    with anyio.fail_after(POLL_BOUND):
        while True:
            pid = lock.waiting(seen)
            if pid is not None:
                return pid
            await anyio.sleep(0.05)


@pytest.fixture
def child(project: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


@pytest.mark.anyio
async def test_a_read_whose_connection_drops_is_run_again_once(
    team: PgTarget, project: Path, child: list[subprocess.Popen[str]]
) -> None:
    made = ok(
        run_recall(
            "remember", "--content", "Reads survive one dropped connection.", "--type", "note", cwd=project
        )
    )
    with TableLock(team.roles) as lock:
        proc = subprocess.Popen(
            [*korg_recall(), "memories"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=project,
        )  # fmt: skip
        child.append(proc)
        first = await _wait_for_waiter(lock, set())
        lock.cut(first)
        second = await _wait_for_waiter(lock, {first})  # the same read, on a new connection
        assert second != first
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [line.split()[0] for line in json.loads(out)["lines"]] == [made["id"]]


@pytest.mark.anyio
async def test_a_write_whose_connection_drops_is_not_retried_and_lands_whole_or_not_at_all(
    team: PgTarget, project: Path, child: list[subprocess.Popen[str]]
) -> None:
    with TableLock(team.roles) as lock:
        proc = subprocess.Popen(
            [*korg_recall(), "remember", "--content", "This write loses its connection.", "--type", "note"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=project,
        )  # fmt: skip
        child.append(proc)
        lock.cut(await _wait_for_waiter(lock, set()))
        out, err = proc.communicate(timeout=60)
        assert lock.waiting(set()) is None  # no second attempt is waiting
    assert (proc.returncode, out) == (5, "")
    assert "lost during a write" in err and "not retried" in err and team.roles.app_password not in err
    assert team.rows("SELECT count(*) FROM memory") == [(0,)]
    assert team.rows("SELECT count(*) FROM memory_ops") == [(0,)]


# --- what the store says about itself ---------------------------------------------------------


def test_stats_describes_the_tenant_its_log_and_the_schema(
    team: PgTarget, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    answer(capsys, "remember", "--content", "Stats count this memory.", "--type", "note")
    described: dict[str, Any] = answer(capsys, "memories", "--stats")
    assert (described["backend"], described["tenant"], described["memories"]) == (
        "postgresql",
        team.tenant,
        1,
    )
    assert described["oplog"] == {"table": "korg_recall.memory_ops", "entries": 1, "intact": True}
    assert described["integrity_check"] == "ok" and described["pgvector"].startswith("0.8")
    assert team.roles.app_password not in json.dumps(described)
    assert "mirror" not in described and os.environ["KORG_RECALL_TENANT"] == team.tenant
