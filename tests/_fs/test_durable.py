"""Copies of user data get names of their own: nothing that exists is ever replaced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from korg_bridge._fs.durable import create_new, publish, replace_ours, reserve, stage, write_all


def test_reserve_takes_the_next_free_number_and_never_touches_what_exists(tmp_path: Path) -> None:
    base = tmp_path / "store.bak-20261201T000000Z"
    base.write_bytes(b"an earlier backup")
    (tmp_path / "store.bak-20261201T000000Z-2").write_bytes(b"another one")
    got = reserve(base)
    assert got == tmp_path / "store.bak-20261201T000000Z-3"
    assert got.read_bytes() == b""
    assert stat.S_IMODE(got.stat().st_mode) == 0o600
    assert base.read_bytes() == b"an earlier backup"


def test_reserve_with_sidecars_skips_a_name_whose_sidecar_is_taken(tmp_path: Path) -> None:
    (tmp_path / "index.broken-wal").write_bytes(b"someone's")
    got = reserve(tmp_path / "index.broken", sidecars=("-wal", "-shm"))
    assert got == tmp_path / "index.broken-2"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "index.broken-2",
        "index.broken-2-shm",
        "index.broken-2-wal",
        "index.broken-wal",
    ]
    assert (tmp_path / "index.broken-wal").read_bytes() == b"someone's"


def test_write_all_writes_every_byte(tmp_path: Path) -> None:
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, b"x" * 3_000_000)
    finally:
        os.close(fd)
    assert path.stat().st_size == 3_000_000


def test_create_new_writes_a_copy_under_a_name_of_its_own(tmp_path: Path) -> None:
    base = tmp_path / "settings.json.install-20261201T000000Z"
    base.write_bytes(b"an earlier copy")
    got = create_new(base, b"this copy")
    assert got == tmp_path / "settings.json.install-20261201T000000Z-2"
    assert (got.read_bytes(), base.read_bytes()) == (b"this copy", b"an earlier copy")
    assert stat.S_IMODE(got.stat().st_mode) == 0o600


def test_a_staged_file_replaces_its_target_whole_with_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    target.write_bytes(b"old")
    tmp = stage(target, b"new", mode=0o640)
    assert tmp.parent == tmp_path and target.read_bytes() == b"old"  # nothing changes until published
    publish(tmp, target, replace=True)
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


def test_publishing_to_a_name_that_must_be_free_never_replaces_a_file_that_appeared(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    tmp = stage(target, b"ours", mode=0o600)
    target.write_bytes(b"someone's")  # appeared meanwhile
    with pytest.raises(FileExistsError):
        publish(tmp, target, replace=False)
    assert target.read_bytes() == b"someone's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.jsonl"]  # the temp file is gone
    fresh = tmp_path / "new.jsonl"
    publish(stage(fresh, b"ours", mode=0o600), fresh, replace=False)
    assert fresh.read_bytes() == b"ours"


def test_replace_ours_leaves_no_temp_file_and_keeps_the_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "model.korg-model.json"
    replace_ours(target, b"{}\n")
    replace_ours(target, b'{"v": 2}\n')
    assert target.read_bytes() == b'{"v": 2}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["model.korg-model.json"]
    with pytest.raises(OSError):
        replace_ours(tmp_path / "missing-folder" / "x.json", b"{}")
    assert [p.name for p in tmp_path.iterdir()] == ["model.korg-model.json"]
