"""The parts of sync that need no second machine: keys, the record chain, project names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from korg_bridge.errors import UsageError
from korg_bridge.recall.sync.keys import Keys, aead_open, aead_seal, ratchet
from korg_bridge.recall.sync.projects import ProjectMap, normalise_url, remote_url
from korg_bridge.recall.sync.wire import RemoteRefused, genesis, make_record, open_payload, verify
from tests.helpers.memory import git_repo


def _chain(keys: Keys, count: int, machine: str = "aaaaaaaaaaaa") -> bytes:
    prev, lines = genesis(machine), []
    for seq in range(1, count + 1):
        line, prev = make_record(
            auth_key=keys.auth_key,
            machine=machine,
            seq=seq,
            lamport=seq,
            kind="w",
            memory_id="mabcdefghij",
            uid=f"{seq:024x}",
            prev=prev,
            payload={"t": "put", "n": seq},
            dek=b"k" * 32,
        )
        lines.append(line)
    return b"".join(line + b"\n" for line in lines)


def test_a_join_key_carries_the_master_and_epoch_keys_and_nothing_else() -> None:
    keys = Keys.fresh()
    keys.advance_to(3)
    keys.deks["mabcdefghij"] = b"d" * 32
    joined = Keys.from_join_key(keys.join_key())
    assert (joined.master, joined.epoch, joined.epoch_key, joined.deks) == (
        keys.master,
        3,
        keys.epoch_key,
        {},
    )
    for bad in ("", "korg-sync1-", "korg-sync1-!!!!", "hello", keys.join_key()[:-5]):
        with pytest.raises(UsageError, match="not a sync join key"):
            Keys.from_join_key(bad)


def test_the_epoch_ratchet_goes_forward_only() -> None:
    keys = Keys.fresh()
    old = keys.epoch_key
    keys.advance_to(2)
    assert keys.epoch_key == ratchet(old, 2) != old
    assert keys.key_for_epoch(1) is None  # what the previous epoch sealed is closed to it
    assert keys.key_for_epoch(4) == ratchet(old, 4)
    keys.advance_to(1)
    assert keys.epoch == 2


def test_a_sealed_payload_opens_only_with_its_key_and_associated_data() -> None:
    sealed = aead_seal(b"k" * 32, b"text", b"header")
    assert aead_open(b"k" * 32, sealed, b"header") == b"text"
    assert aead_open(b"x" * 32, sealed, b"header") is None
    assert aead_open(b"k" * 32, sealed, b"other") is None
    assert aead_open(b"k" * 32, sealed[:10], b"header") is None


def test_a_chain_verifies_and_opens_and_continues_from_its_mark() -> None:
    keys = Keys.fresh()
    more = _chain(keys, 5)
    data = b"".join(line + b"\n" for line in more.split(b"\n")[:3])
    records = verify("f", "aaaaaaaaaaaa", data, keys.auth_key, None)
    assert [r.seq for r, _ in records] == [1, 2, 3]
    assert open_payload(records[1][0], b"k" * 32) == {"t": "put", "n": 2}
    assert open_payload(records[1][0], b"x" * 32) is None
    rest = verify("f", "aaaaaaaaaaaa", more, keys.auth_key, records[-1][0].mark)
    assert [r.seq for r, _ in rest] == [4, 5]


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.replace(b'"l":2', b'"l":7'),  # a header changed
        lambda d: b"\n".join(reversed(d.rstrip(b"\n").split(b"\n"))) + b"\n",  # reordered
        lambda d: d[:-1],  # the last line cut short
        lambda d: d + d.split(b"\n")[0] + b"\n",  # a record replayed
        lambda d: b"{}\n" + d,  # not a record
    ],
)
def test_damage_anywhere_in_a_chain_is_refused(damage: Callable[[bytes], bytes]) -> None:
    keys = Keys.fresh()
    data = _chain(keys, 3)
    with pytest.raises(RemoteRefused, match="was altered, truncated or replayed"):
        verify("machines/aaaaaaaaaaaa.ops", "aaaaaaaaaaaa", damage(data), keys.auth_key, None)


def test_a_chain_under_another_key_or_of_another_machine_is_refused() -> None:
    keys = Keys.fresh()
    data = _chain(keys, 2)
    with pytest.raises(RemoteRefused, match="fails its authentication"):
        verify("f", "aaaaaaaaaaaa", data, Keys.fresh().auth_key, None)
    with pytest.raises(RemoteRefused, match="belongs to machine aaaaaaaaaaaa"):
        verify("f", "bbbbbbbbbbbb", data, keys.auth_key, None)


def test_a_file_that_no_longer_extends_what_was_applied_is_refused() -> None:
    keys = Keys.fresh()
    records = verify("f", "aaaaaaaaaaaa", _chain(keys, 3), keys.auth_key, None)
    with pytest.raises(RemoteRefused, match="record 3, applied here already, is no longer where it was"):
        verify("f", "aaaaaaaaaaaa", _chain(keys, 2), keys.auth_key, records[-1][0].mark)


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("git@github.com:Ann/app.git", "github.com/Ann/app"),
        ("https://github.com/Ann/app", "github.com/Ann/app"),
        ("https://ann:token@GitHub.com:443/Ann/app.git/", "github.com/Ann/app"),
        ("ssh://git@github.com/Ann/app.git", "github.com/Ann/app"),
        ("/srv/git/app.git", "srv/git/app"),
    ],
)
def test_git_remote_urls_are_normalised_so_clones_of_one_repository_match(url: str, normal: str) -> None:
    assert normalise_url(url) == normal


def test_a_project_travels_by_its_remote_url_and_lands_on_the_local_clone(tmp_path: Path) -> None:
    here = git_repo(tmp_path / "here" / "app")
    there = git_repo(tmp_path / "there" / "app-clone")
    for repo in (here, there):
        (repo / ".git" / "config").write_text(
            (repo / ".git" / "config").read_text() + '[remote "origin"]\n\turl = git@github.com:ann/app.git\n'
        )
    assert remote_url(str(here)) == "github.com/ann/app"
    wire = ProjectMap({}, []).to_wire(f"project:{here}")
    assert wire == {"kind": "project", "url": "github.com/ann/app", "path": str(here)}
    assert ProjectMap({}, [f"project:{there}"]).from_wire(wire) == f"project:{there}"
    mapped = ProjectMap({"github.com/ann/app": "/work/app"}, [f"project:{there}"]).from_wire(wire)
    assert mapped == "project:/work/app"
    assert ProjectMap({}, []).from_wire(wire) == f"project:{here}"  # a project not seen here keeps its root
    assert ProjectMap({}, []).from_wire({"kind": "user"}) == "user"
