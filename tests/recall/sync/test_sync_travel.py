"""Remember, revise, retire, restore travel between two machines, through git and through a folder."""

from __future__ import annotations

from tests.recall.sync.conftest import Machine
from tests.recall.sync.helpers import canonical


def test_a_memory_remembered_on_a_is_recalled_on_b_with_its_provenance(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    memory_id = a.remember("the integration tests need `make db` first", source="session:s-123")
    a.sync()
    assert b.sync()["applied"] == 1
    found = b.ok("recall", "--query", "integration tests make db", "--json")
    assert memory_id in str(found)
    read = b.read(memory_id)
    assert read["body"] == "the integration tests need `make db` first"
    origin = read["provenance"][0]
    assert origin["actor"] == "ann-on-a"
    assert origin["machine"] == a.ok("sync", "status")["machine"]
    assert "s-123" in str(origin["source"])
    assert canonical(a.store) == canonical(b.store)


def test_a_revision_made_on_b_reaches_a_as_version_2(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    memory_id = a.remember("deploys go out on Tuesdays")
    a.sync()
    b.sync()
    b.ok("revise", "--id", memory_id, "--content", "deploys go out on Thursdays", "--json")
    b.sync()
    a.sync()
    read = a.read(memory_id)
    assert read["version"] == 2
    assert read["body"] == "deploys go out on Thursdays"
    assert read["actor"] == "ann-on-b"
    assert canonical(a.store) == canonical(b.store)


def test_retire_and_restore_on_a_reach_b(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    memory_id = a.remember("the staging host is st-4")
    a.sync()
    b.sync()
    a.ok("forget", "--id", memory_id, "--mode", "retire", "--json")
    a.sync()
    b.sync()
    assert b.read(memory_id)["state"] == "retired"
    assert canonical(a.store) == canonical(b.store)
    a.ok("restore", "--id", memory_id, "--json")
    a.sync()
    b.sync()
    read = b.read(memory_id)
    assert (read["state"], read["version"]) == ("live", 2)
    assert canonical(a.store) == canonical(b.store)


def test_a_sync_with_nothing_new_sends_and_applies_nothing(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    a.remember("the linter is ruff")
    a.sync()
    b.sync()
    again = b.sync()
    assert (again["sent"], again["applied"], again["pushed"]) == (0, 0, [])
    again = a.sync()
    assert (again["sent"], again["applied"]) == (0, 0)


def test_session_memories_never_leave_the_machine(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    a.ok(
        "remember",
        "--content",
        "scratch note for this session only",
        "--type",
        "note",
        "--scope",
        "session:s1",
        "--json",
    )
    kept = a.remember("a user fact that travels")
    assert a.sync()["sent"] == 1
    b.sync()
    assert b.read(kept)["body"] == "a user fact that travels"
    assert b"scratch note" not in b.store.read_bytes()
