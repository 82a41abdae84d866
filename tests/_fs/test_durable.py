"""Copies of user data get names of their own: nothing that exists is ever replaced."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from korg_bridge._fs.durable import reserve, write_all


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
