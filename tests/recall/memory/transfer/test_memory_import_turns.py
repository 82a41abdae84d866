"""A large import neither locks other writers out nor lands in part (issue #19, item 10): it is
planned against a snapshot, written in one transaction that takes the write lock only briefly,
and what other writers changed in between is decided again -- never duplicated, never reverted."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.memory.transfer.foreign import Plan, plan_foreign
from korg_bridge.recall.memory.transfer.formats import read_source
from korg_bridge.recall.memory.transfer.importer import IMPORT_ACTOR, prepare_import
from korg_bridge.recall.memory.transfer.staging import finish_plan, stage_plan, write_plan
from tests.helpers.cli import answer, korg_recall, ok, run_recall
from tests.helpers.memory import PgTarget, opened, rows

SUBJECTS = ("billing-api", "auth-service", "checkout", "the CI pipeline", "the rate limiter", "postgres")
FACTS = (
    "{s} needs `make db` before test run {n}.",
    "{s} times out after {n} seconds under load.",
    "Deploy {s} with script number {n}, never by hand.",
    "The flaky tests of {s} are in tests/flaky_{n}.py.",
)


def mem0_file(path: Path, count: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    entries = [
        {
            "id": f"m-{n}",
            "memory": rng.choice(FACTS).format(s=rng.choice(SUBJECTS), n=n),
            "categories": ["ops"],
        }
        for n in range(count)
    ]
    path.write_text(json.dumps({"results": entries}), encoding="utf-8")
    return path


def test_writers_are_not_locked_out_while_a_large_import_runs(
    project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    source = mem0_file(tmp_path / "mem0.json", 4000)
    importer = subprocess.Popen(
        [*korg_recall(), "import", str(source), "--scope", "user"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=project,
    )
    writes: list[tuple[float, float, int, str]] = []
    number = 0
    while importer.poll() is None and number < 200:
        started = time.monotonic()
        done = run_recall(
            "remember", "--content", f"Concurrent note {number} about kiwis.", "--type", "note", cwd=project
        )
        writes.append((started, time.monotonic(), done.returncode, done.stderr))
        number += 1
    out, err = importer.communicate(timeout=600)
    ended = time.monotonic()
    assert importer.returncode == 0, err
    assert [w for w in writes if w[2] != 0] == []  # none "stayed locked"
    during = [w for w in writes if w[1] < ended]
    assert during, "no write finished while the import ran: it was too short to show anything"
    report = json.loads(out)
    assert report["created"] + report["exists"] + report["merged"] == 4000
    notes = rows(store, "SELECT count(*) FROM memory WHERE body LIKE 'Concurrent note %'")[0][0]
    assert notes == len(writes)


def test_an_import_killed_at_any_moment_lands_whole_or_not_at_all(
    project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    source = mem0_file(tmp_path / "mem0.json", 1500)
    ok(run_recall("remember", "--content", "A fact before the import.", "--type", "note", cwd=project))
    rng = random.Random()
    for delay in sorted(rng.uniform(0.2, 4.0) for _ in range(3)):
        importer = subprocess.Popen(
            [*korg_recall(), "import", str(source), "--scope", "user"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=project,
        )
        try:
            importer.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            importer.kill()
            importer.wait(timeout=60)
        imported = rows(store, "SELECT count(*) FROM memory WHERE actor = ?", (IMPORT_ACTOR,))[0][0]
        if imported:
            break
    final = ok(run_recall("import", str(source), "--scope", "user", cwd=project))
    whole = rows(store, "SELECT count(*) FROM memory WHERE actor = ?", (IMPORT_ACTOR,))[0][0]
    assert imported in (0, whole), f"a killed import left {imported} of {whole} rows"
    assert final["created"] == (0 if imported else whole)
    if isinstance(store, Path):
        assert rows(store, "PRAGMA integrity_check") == [("ok",)]


def plan_against_a_snapshot(path: Path, store: Path | PgTarget) -> tuple[Any, Plan]:
    """The first half of an import, in this process: checked, and planned in a read transaction."""
    ctx = Context.from_env(os.environ)
    importing = dataclasses.replace(ctx, actor=IMPORT_ACTOR, is_agent=False)
    prepared = prepare_import(read_source(str(path)), ctx, "user")
    opened_store = opened(store)
    with opened_store.reading() as snapshot:
        plan = plan_foreign(snapshot, importing, prepared.foreign, prepared.batch.relations)
    return opened_store, plan


def test_a_text_someone_remembers_while_the_import_is_planned_is_not_duplicated(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    path = tmp_path / "mem0.json"
    path.write_text(
        json.dumps(
            [{"id": "a", "memory": "Deploys need two approvals."}, {"id": "b", "memory": "Cats are fine."}]
        )
    )
    opened_store, plan = plan_against_a_snapshot(path, store)
    ok(
        run_recall(
            "remember",
            "--content",
            "Deploys need two approvals.",
            "--type",
            "note",
            "--scope",
            "user",
            cwd=project,
        )
    )
    try:
        with opened_store.write(stage=True) as conn:
            outcome = write_plan(conn, plan)
    finally:
        opened_store.close()
    assert (outcome.counts["created"], outcome.counts["exists"]) == (1, 1)
    assert rows(store, "SELECT count(*) FROM memory WHERE body = 'Deploys need two approvals.'") == [(1,)]
    assert rows(store, "SELECT actor FROM memory WHERE body = 'Deploys need two approvals.'") != [("import",)]


def test_a_memory_revised_while_the_import_is_planned_gets_the_import_on_its_new_head(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps([{"id": "a", "memory": "Is allergic to peanuts"}]))
    answer(capsys, "import", str(path), "--scope", "user")
    memory_id = rows(store, "SELECT id FROM memory")[0][0]
    path.write_text(json.dumps([{"id": "a", "memory": "Is allergic to peanuts and shellfish"}]))
    opened_store, plan = plan_against_a_snapshot(path, store)
    answer(capsys, "revise", "--id", memory_id, "--content", "Is allergic to peanuts, says the user")
    answer(capsys, "remember", "--content", "A use that bumps nothing.", "--type", "note", "--scope", "user")
    try:
        with opened_store.write(stage=True) as conn:
            outcome = write_plan(conn, plan)
    finally:
        opened_store.close()
    assert outcome.counts["superseded"] == 1
    lineage = rows(
        store,
        "SELECT version, body, actor, superseded_by FROM memory WHERE id = ? ORDER BY version",
        (memory_id,),
    )
    assert [(v, by) for v, _, _, by in lineage] == [(1, 2), (2, 3), (3, None)]
    assert lineage[1][1] == "Is allergic to peanuts, says the user"  # the revision is kept, not reverted
    assert (lineage[2][1], lineage[2][2]) == ("Is allergic to peanuts and shellfish", "import")


def test_a_memory_the_plan_links_to_and_someone_purges_meanwhile_gets_no_link(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    answer(
        capsys,
        "remember",
        "--content",
        "Billing-api listens on port 8080.",
        "--type",
        "project",
        "--scope",
        "user",
    )
    old = rows(store, "SELECT id FROM memory")[0][0]
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps([{"id": "a", "memory": "Billing-api listens on port 9090."}]))
    opened_store, plan = plan_against_a_snapshot(path, store)
    assert plan.steps[0].links == [old]
    answer(capsys, "forget", "--id", old, "--mode", "purge")
    try:
        with opened_store.write(stage=True) as conn:
            outcome = write_plan(conn, plan)
    finally:
        opened_store.close()
    assert (outcome.counts["created"], outcome.counts["links"]) == (1, 0)
    assert rows(store, "SELECT count(*) FROM memory_links") == [(0,)]


def test_a_text_remembered_while_the_import_stages_on_a_team_store_is_not_duplicated(
    capsys: pytest.CaptureFixture[str], backend: str, project: Path, store: Path | PgTarget, tmp_path: Path
) -> None:
    if backend == "sqlite":
        pytest.skip("a SQLite file's write lock is held from the start: no one writes while an import stages")
    path = tmp_path / "mem0.json"
    path.write_text(
        json.dumps(
            [{"id": "a", "memory": "Deploys need two approvals."}, {"id": "b", "memory": "Cats are fine."}]
        )
    )
    opened_store, plan = plan_against_a_snapshot(path, store)
    try:
        with opened_store.write(stage=True) as conn:
            staged = stage_plan(conn, plan)
            # Another writer goes on while the import stages: the tenant's lock is not taken yet.
            ok(
                run_recall(
                    "remember",
                    "--content",
                    "Deploys need two approvals.",
                    "--type",
                    "note",
                    "--scope",
                    "user",
                    cwd=project,
                )
            )
            conn.take_turn()
            outcome = finish_plan(conn, plan, staged)
    finally:
        opened_store.close()
    assert (outcome.counts["created"], outcome.counts["exists"]) == (1, 1)
    assert rows(store, "SELECT count(*) FROM memory WHERE body = 'Deploys need two approvals.'") == [(1,)]
