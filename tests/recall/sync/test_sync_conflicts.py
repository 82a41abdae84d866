"""Two machines revising one version: both versions kept, flagged on both, resolved by a revise."""

from __future__ import annotations

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


def test_a_revise_on_either_machine_resolves_the_conflict_on_both(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    memory_id = _diverge(a, b)
    b.ok("revise", "--id", memory_id, "--content", "the release branch is cut on Fridays", "--json")
    b.sync()
    a.sync()
    for machine in (a, b):
        read = machine.read(memory_id)
        assert read["body"] == "the release branch is cut on Fridays"
        assert "conflict_versions" not in read and read["conflict"] is False
        assert machine.ok("memories", "--conflicts", "--scope", "user", "--json")["total"] == 0
    assert canonical(a.store) == canonical(b.store)
