"""A purge travels and erases: no byte of the text on B, in the remote or its git history, and no
key either machine still holds opens what is left."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from korg_bridge.recall.sync.keys import Keys, aead_open, load_keys
from korg_bridge.recall.sync.wire import canonical as canonical_bytes
from korg_bridge.recall.sync.wire import open_keyring
from tests.recall.sync.conftest import Machine, all_git_objects
from tests.recall.sync.helpers import canonical

SECRET = "the vault recovery phrase is purple-otter-42 under the oak"
PARTS = (b"purple-otter-42", b"vault recovery phrase", b"under the oak")


def _files_under(root: Path) -> bytes:
    return b"".join(
        path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file() and not path.is_symlink()
    )


def _no_part_of_the_text(blob: bytes, where: str) -> None:
    for part in PARTS:
        assert part not in blob, f"{part!r} found in {where}"


def _keys_of(machine: Machine) -> Keys:
    return load_keys(machine.data / "sync" / "keys")


def _nothing_opens(blobs: bytes, memory_id: str, held: list[Keys]) -> int:
    """Try every key both machines hold on every record of ``memory_id`` and every keyring in ``blobs``."""
    tried = 0
    for raw in blobs.split(b"\n"):
        start = raw.find(b'{"c":"')
        if start < 0:
            start = raw.find(b'{"epoch":')
        if start < 0:
            continue
        try:
            obj = json.loads(raw[start:])
        except ValueError:
            continue
        if "h" in obj and obj["h"].get("id") == memory_id and obj["c"]:
            sealed = base64.b64decode(obj["c"])
            for keys in held:
                for dek in [*keys.deks.values(), keys.master, keys.epoch_key]:
                    for prev in [obj["h"]["p"]]:
                        assert aead_open(dek, sealed, canonical_bytes({**obj["h"], "p": prev})) is None
                        tried += 1
        elif "sealed" in obj:
            for keys in held:
                for epoch in range(int(obj["epoch"]), int(obj["epoch"]) + 1):
                    key = keys.key_for_epoch(epoch)
                    opened = open_keyring(obj, key) if key is not None else None
                    assert opened is None or memory_id not in opened
                    tried += 1
    return tried


def test_a_purge_on_a_erases_the_memory_on_b_and_leaves_nothing_readable_in_the_remote(
    pair: tuple[Machine, Machine], remote: str
) -> None:
    a, b = pair
    memory_id = a.remember(SECRET)
    other = a.remember("the CI runs on Linux and macOS")
    a.sync()
    b.sync()
    b.ok("revise", "--id", memory_id, "--old-text", "oak", "--new-text", "oak tree", "--json")
    b.sync()
    a.sync()
    assert "oak tree" in a.read(memory_id)["body"]
    assert list((b.data / "memories").rglob(f"*{memory_id}*"))  # B's mirror held it

    a.ok("forget", "--id", memory_id, "--mode", "purge", "--json")
    a.sync()
    assert b.sync()["purged"] == [memory_id]
    a.sync()

    tombstone = b.read(memory_id)
    assert (tombstone["state"], tombstone["body"], tombstone["title"]) == ("purged", "", "")
    assert b.read(other)["body"] == "the CI runs on Linux and macOS"
    assert canonical(a.store) == canonical(b.store)
    for machine in (a, b):
        _no_part_of_the_text(_files_under(machine.data), f"{machine.name}'s data folder")
        assert not list((machine.data / "memories").rglob(f"*{memory_id}*"))
    blobs = b""
    if Path(remote, "HEAD").is_file():  # the bare repository: every object of its history
        blobs = all_git_objects(remote)
        assert b"korg-sync/v1" in blobs or blobs
        for machine in (a, b):
            blobs += all_git_objects(str(machine.data / "sync" / "git"))
    else:
        blobs = _files_under(Path(remote))
    _no_part_of_the_text(blobs, "the remote")
    held = [_keys_of(a), _keys_of(b)]
    assert all(memory_id not in keys.deks for keys in held)
    assert all(keys.epoch == 1 for keys in held)
    assert _nothing_opens(blobs, memory_id, held) > 0


def test_keys_file_is_private_and_holds_no_text(pair: tuple[Machine, Machine]) -> None:
    a, _b = pair
    a.remember(SECRET)
    a.sync()
    path = a.data / "sync" / "keys"
    assert path.stat().st_mode & 0o077 == 0
    _no_part_of_the_text(path.read_bytes(), "the keys file")
