"""Two machines revising one version: both versions kept, flagged on both, resolved by a revise that names
both versions (never by a revise that did not read them)."""

from __future__ import annotations

import pytest

from tests.helpers.console import console_client
from tests.recall.sync.conftest import Machine
from tests.recall.sync.helpers import canonical


def _diverge(a: Machine, b: Machine) -> str:
    memory_id = a.remember("the release branch is cut on Mondays")
    a.sync()
    b.sync()
    a.ok("revise", "--id", memory_id, "--content", "the release branch is cut on Wednesdays", "--json")
    b.ok("revise", "--id", memory_id, "--content", "the release branch is cut on Fridays", "--json")
    a.sync()
    b.sync()
    a.sync()
    return memory_id


def test_concurrent_revisions_are_both_kept_and_marked_conflict_on_both_machines(
    pair: tuple[Machine, Machine],
) -> None:
    a, b = pair
    memory_id = _diverge(a, b)
    for machine in (a, b):
        read = machine.read(memory_id)
        bodies = {read["body"], *(v["body"] for v in read["versions"])}
        assert {"the release branch is cut on Wednesdays", "the release branch is cut on Fridays"} <= bodies
        assert len(read["conflict_versions"]) == 2
        assert "conflict" in read["note"]
        listed = machine.ok("memories", "--conflicts", "--scope", "user", "--json")
        assert listed["total"] == 2 and all(
            memory_id in line and "[conflict]" in line for line in listed["lines"]
        )
        assert machine.ok("sync", "status")["conflicts"] == 2
    assert canonical(a.store) == canonical(b.store)


def test_recall_shows_both_texts_of_a_conflict_with_a_note(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    _diverge(a, b)
    found = b.ok("recall", "--query", "release branch cut", "--json")
    text = str(found)
    assert "Wednesdays" in text and "Fridays" in text
    assert "both versions are kept" in text


def test_a_revise_naming_both_versions_resolves_the_conflict_on_both(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    memory_id = _diverge(a, b)
    versions = b.read(memory_id)["conflict_versions"]
    blind = b.run("revise", "--id", memory_id, "--content", "the release branch is cut on Fridays", "--json")
    assert blind.returncode == 2, blind.stderr
    message = blind.stderr.strip()
    assert message.count("\n") == 0 and "in conflict" in message
    assert all(f"--resolves {v}" in message for v in versions)
    one = b.run(
        "revise", "--id", memory_id, "--content", "x", "--resolves", str(versions[0]), "--json"
    )  # naming one of the two is not having read both
    assert one.returncode == 2, one.stderr
    assert b.read(memory_id)["conflict_versions"] == versions  # nothing was written
    flags = [arg for v in versions for arg in ("--resolves", str(v))]
    b.ok("revise", "--id", memory_id, "--content", "the release branch is cut on Fridays", *flags, "--json")
    b.sync()
    a.sync()
    for machine in (a, b):
        read = machine.read(memory_id)
        assert read["body"] == "the release branch is cut on Fridays"
        assert "conflict_versions" not in read and read["conflict"] is False
        assert machine.ok("memories", "--conflicts", "--scope", "user", "--json")["total"] == 0
    assert canonical(a.store) == canonical(b.store)


def test_resolves_on_a_memory_in_no_conflict_is_refused(pair: tuple[Machine, Machine]) -> None:
    a, _ = pair
    memory_id = a.remember("the nightly job runs at two")
    done = a.run("revise", "--id", memory_id, "--content", "the nightly job runs at three", "--resolves", "1")
    assert done.returncode == 2 and "not in conflict" in done.stderr


@pytest.mark.anyio
async def test_the_console_shows_a_conflict_and_its_revise_form_names_both_versions(
    pair: tuple[Machine, Machine],
) -> None:
    a, b = pair
    memory_id = _diverge(a, b)
    versions = b.read(memory_id)["conflict_versions"]
    async with console_client(cwd=b.cwd, env=b.env) as (client, _app):
        page = await client.get(f"/memories/{memory_id}")
        assert page.status_code == 200
        assert "In conflict: versions" in page.text
        assert f'name="resolves" value="{",".join(str(v) for v in versions)}"' in page.text
        saved = await client.http.post(
            f"/memories/{memory_id}/revise",
            data={
                "csrf_token": await client.csrf(),
                "content": "the release branch is cut on Thursdays",
                "expected_version": str(versions[-1]),
                "resolves": ",".join(str(v) for v in versions),
            },
            headers={"Origin": "http://127.0.0.1:8377"},
        )
        assert saved.status_code in (200, 303), saved.text[:500]
    read = b.read(memory_id)
    assert read["body"] == "the release branch is cut on Thursdays"
    assert "conflict_versions" not in read
