"""The same text remembered on two machines before they synced becomes one memory on both; other
texts, other scopes, and memories changed before the sync are never merged."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.recall.sync.conftest import Machine, _machine
from tests.recall.sync.helpers import canonical
from tests.recall.sync.test_sync_scopes_and_races import _clone_of_app

TEXT = "the nightly build runs at 02:00 UTC on the ci-3 runner"


def _live(machine: Machine, body: str) -> list[tuple[str, str]]:
    """``(id, scope)`` of the live heads holding ``body``, read from the store file."""
    with sqlite3.connect(f"file:{machine.store}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT id, scope FROM memory WHERE body = ? AND state = 'live' AND superseded_by IS NULL ORDER BY id",
            (body,),
        ).fetchall()
    return [(str(i), str(s)) for i, s in rows]


def test_the_same_text_remembered_on_both_machines_before_a_sync_becomes_one_memory_on_both(
    pair: tuple[Machine, Machine],
) -> None:
    a, b = pair
    on_a = a.remember(TEXT, source="session:s-a")
    on_b = b.remember(TEXT, source="session:s-b")
    a.sync()
    first = b.sync()
    a.sync()
    assert first["merged"] in ([{"kept": on_a, "retired": on_b}], [{"kept": on_b, "retired": on_a}])
    kept, retired = first["merged"][0]["kept"], first["merged"][0]["retired"]
    for machine in (a, b):
        assert _live(machine, TEXT) == [(kept, "user")]
        listed = machine.ok("memories", "--scope", "user", "--json")
        assert listed["total"] == 1 and kept in listed["lines"][0]
        # Nothing lost: the other id still resolves, retired, pointing at the kept memory.
        other = machine.read(retired)
        assert other["state"] == "retired" and other["body"] == TEXT
        assert other["provenance"][-1]["source"] == {"kind": "duplicate", "of": kept}
        # Both writes stay visible on the kept memory: machine, actor, session.
        read = machine.read(kept)
        actors = {entry["actor"] for entry in read["provenance"]}
        assert {"ann-on-a", "ann-on-b"} <= actors
        sources = [str(entry["source"]) for entry in read["provenance"]]
        assert any("s-a" in text for text in sources) and any("s-b" in text for text in sources)
        assert len({entry["machine"] for entry in read["provenance"]}) == 2
        # The mirror follows: one file holds the text, the kept memory's; the retired one's is gone.
        mirror = machine.store.parent / "memories"
        holding = [path.name for path in mirror.rglob("*.md") if TEXT in path.read_text(encoding="utf-8")]
        assert len(holding) == 1 and kept in holding[0], holding
    assert canonical(a.store) == canonical(b.store)
    # Settled: more rounds change nothing, and a new repeat lands on the kept memory as on one machine.
    assert (a.sync()["sent"], b.sync()["sent"], a.sync()["applied"]) == (0, 0, 0)
    assert b.remember(TEXT) == kept
    b.sync()
    a.sync()
    assert canonical(a.store) == canonical(b.store)


def test_two_machines_that_each_merge_the_same_repeat_end_alike(tmp_path: Path, folder_remote: str) -> None:
    """Both machines see the other's memory before the other's merge (as when their syncs overlap):
    each merges on its own, both keep the same memory, and the later merge in sync's order wins on both."""
    a, b = _machine(tmp_path, "a"), _machine(tmp_path, "b")
    key = a.ok("sync", "init", "--remote", folder_remote)["join_key"]
    b.ok("sync", "init", "--remote", folder_remote, "--join", key)
    ops = Path(folder_remote) / "korg-sync" / "v1" / "machines"
    a_file = ops / f"{a.ok('sync', 'status')['machine']}.ops"
    a.remember(TEXT)
    b.remember(TEXT)
    a.sync()
    a_put = a_file.read_bytes()
    a_file.unlink()  # b's sync overlaps a's: it does not see a's memory yet
    b.sync()
    a_file.write_bytes(a_put)
    merged_on_a = a.sync()["merged"]
    a_merge = a_file.read_bytes()
    a_file.write_bytes(a_put)  # b syncs before a's merge lands: b finds the repeat itself
    assert b.sync()["merged"] == merged_on_a
    a_file.write_bytes(a_merge)
    for machine in (a, b, a, b):
        machine.sync()
    for machine in (a, b):
        assert len(_live(machine, TEXT)) == 1
    assert _live(a, TEXT) == _live(b, TEXT)
    assert canonical(a.store) == canonical(b.store)


def test_different_texts_remembered_on_two_machines_are_never_merged(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    a.remember("the nightly build runs at 02:00 UTC")
    b.remember("the nightly build runs at 03:00 UTC")
    for machine in (a, b, a):
        assert "merged" not in machine.sync()
    for machine in (a, b):
        assert len(_live(machine, "the nightly build runs at 02:00 UTC")) == 1
        assert len(_live(machine, "the nightly build runs at 03:00 UTC")) == 1
    assert canonical(a.store) == canonical(b.store)


def test_the_same_text_in_different_scopes_is_never_merged(tmp_path: Path, folder_remote: str) -> None:
    a, b = _machine(tmp_path, "a"), _machine(tmp_path, "b")
    b.cwd = _clone_of_app(tmp_path / "b" / "src" / "app")
    key = a.ok("sync", "init", "--remote", folder_remote)["join_key"]
    b.ok("sync", "init", "--remote", folder_remote, "--join", key)
    a.remember(TEXT)
    b.ok("remember", "--content", TEXT, "--type", "project", "--json")
    for machine in (a, b, a):
        assert "merged" not in machine.sync()
    for machine in (a, b):
        assert sorted(scope.split(":")[0] for _, scope in _live(machine, TEXT)) == ["project", "user"]
    assert canonical(a.store) == canonical(b.store)


def test_a_repeat_revised_or_retired_before_the_sync_is_left_visible(pair: tuple[Machine, Machine]) -> None:
    a, b = pair
    revised = a.remember(TEXT)
    a.ok("revise", "--id", revised, "--content", "the nightly build runs at 04:00 UTC", "--json")
    a.ok("revise", "--id", revised, "--content", TEXT, "--json")  # back to the text, as version 3
    b.remember(TEXT)
    retired = a.remember("the docs site deploys from the gh-pages branch")
    a.ok("forget", "--id", retired, "--mode", "retire", "--json")
    b.remember("the docs site deploys from the gh-pages branch")
    for machine in (a, b, a):
        assert "merged" not in machine.sync()
    for machine in (a, b):
        assert len(_live(machine, TEXT)) == 2
        assert len(_live(machine, "the docs site deploys from the gh-pages branch")) == 1
    assert canonical(a.store) == canonical(b.store)
