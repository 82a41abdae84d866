"""A remote altered, truncated or replayed, offline, under another key or of a newer format: one line,
its exit code, and the local store exactly as it was."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.memory import failed
from tests.recall.sync.conftest import Machine, _machine
from tests.recall.sync.helpers import canonical


@pytest.fixture
def remote(folder_remote: str) -> str:
    """These tests edit the remote's files by hand: a plain folder (one git case below)."""
    return folder_remote


def _ops(remote: str, machine: Machine) -> Path:
    return Path(remote) / "korg-sync" / "v1" / "machines" / f"{machine.ok('sync', 'status')['machine']}.ops"


def _refused(b: Machine, a_file: Path) -> None:
    before = canonical(b.store)
    line = failed(b.run("sync"), 4, f"machines/{a_file.name} was altered, truncated or replayed")
    assert "nothing was applied" in line
    assert canonical(b.store) == before


def test_an_altered_record_is_refused_before_anything_is_applied(
    pair: tuple[Machine, Machine], remote: str
) -> None:
    a, b = pair
    a.remember("first fact")
    a.remember("second fact")
    a.sync()
    path = _ops(remote, a)
    original = path.read_bytes()
    lines = original.split(b"\n")
    record = json.loads(lines[1])
    record["c"] = ("A" if record["c"][0] != "A" else "B") + record["c"][1:]
    path.write_bytes(b"\n".join([lines[0], json.dumps(record).encode(), *lines[2:]]))
    _refused(b, path)
    assert canonical(b.store) == []
    path.write_bytes(original)  # the remote repaired: the sync goes through
    assert b.sync()["applied"] == 2


def test_reordered_records_are_refused(pair: tuple[Machine, Machine], remote: str) -> None:
    a, b = pair
    a.remember("first fact")
    a.remember("second fact")
    a.sync()
    path = _ops(remote, a)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([lines[1], lines[0], *lines[2:]]))
    _refused(b, path)


def test_a_truncated_file_is_refused(pair: tuple[Machine, Machine], remote: str) -> None:
    a, b = pair
    a.remember("first fact")
    a.remember("second fact")
    a.sync()
    b.sync()
    path = _ops(remote, a)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(lines[0] + b"\n")
    _refused(b, path)


def test_an_old_copy_of_a_file_replayed_is_refused(pair: tuple[Machine, Machine], remote: str) -> None:
    a, b = pair
    a.remember("first fact")
    a.sync()
    path = _ops(remote, a)
    old = path.read_bytes()
    b.sync()
    a.ok("forget", "--id", a.remember("second fact"), "--mode", "retire", "--json")
    a.sync()
    b.sync()
    path.write_bytes(old)
    _refused(b, path)


def test_a_record_replayed_at_the_end_is_refused(pair: tuple[Machine, Machine], remote: str) -> None:
    a, b = pair
    a.remember("first fact")
    a.sync()
    path = _ops(remote, a)
    data = path.read_bytes()
    path.write_bytes(data + data)
    _refused(b, path)


def test_a_machine_file_copied_under_another_machines_name_is_refused(
    pair: tuple[Machine, Machine], remote: str
) -> None:
    a, b = pair
    a.remember("first fact")
    a.sync()
    path = _ops(remote, a)
    fake = path.with_name("0123456789ab.ops")
    shutil.copyfile(path, fake)
    _refused(b, fake)


def test_a_tampered_git_remote_is_refused(tmp_path: Path, bare_repo: str) -> None:
    a, b = _machine(tmp_path, "a"), _machine(tmp_path, "b")
    key = a.ok("sync", "init", "--remote", bare_repo)["join_key"]
    b.ok("sync", "init", "--remote", bare_repo, "--join", key)
    a.remember("a fact in git")
    a.sync()
    work = tmp_path / "attacker"
    git = ["git", "-c", "user.name=x", "-c", "user.email=x@x"]
    subprocess.run([*git, "clone", "-q", "-b", "main", bare_repo, str(work)], check=True, timeout=60)
    path = next((work / "korg-sync" / "v1" / "machines").glob("*.ops"))
    path.write_bytes(path.read_bytes().replace(b'"l":1', b'"l":9'))
    subprocess.run([*git, "-C", str(work), "commit", "-qam", "tamper"], check=True, timeout=60)
    subprocess.run([*git, "-C", str(work), "push", "-q", "origin", "HEAD:main"], check=True, timeout=60)
    _refused(b, path)


def test_an_offline_remote_is_a_network_error_and_changes_nothing(tmp_path: Path, bare_repo: str) -> None:
    a = _machine(tmp_path, "a")
    a.ok("sync", "init", "--remote", bare_repo)
    kept = a.remember("made while offline")
    moved = Path(bare_repo).with_name("elsewhere.git")
    Path(bare_repo).rename(moved)
    failed(a.run("sync"), 5, "cannot reach the sync remote")
    Path(moved).rename(bare_repo)
    assert a.sync()["sent"] == 1
    assert a.read(kept)["body"] == "made while offline"


def test_a_folder_remote_that_is_gone_is_a_network_error(pair: tuple[Machine, Machine], remote: str) -> None:
    a, _b = pair
    a.remember("a fact")
    before = canonical(a.store)
    Path(remote).rename(Path(remote).with_name("unmounted"))
    failed(a.run("sync"), 5, "is not reachable")
    assert canonical(a.store) == before


def test_a_wrong_key_is_a_config_error(tmp_path: Path, remote: str) -> None:
    a, c = _machine(tmp_path, "a"), _machine(tmp_path, "c")
    a.ok("sync", "init", "--remote", remote)
    other = tmp_path / "other-remote"
    other.mkdir()
    stranger = _machine(tmp_path, "stranger").ok("sync", "init", "--remote", str(other))["join_key"]
    failed(
        c.run("sync", "init", "--remote", remote, "--join", stranger), 3, "is not the key of the sync remote"
    )
    assert not (c.data / "sync" / "config.json").exists()


def test_a_second_machine_without_the_key_is_told_to_join(tmp_path: Path, remote: str) -> None:
    a, c = _machine(tmp_path, "a"), _machine(tmp_path, "c")
    a.ok("sync", "init", "--remote", remote)
    failed(c.run("sync", "init", "--remote", remote), 3, "--join KEY")
    failed(c.run("sync", "init", "--remote", remote, "--join", "not-a-key"), 2, "not a sync join key")


def test_a_remote_written_by_a_newer_version_is_refused(pair: tuple[Machine, Machine], remote: str) -> None:
    a, b = pair
    a.remember("a fact")
    a.sync()
    fmt = Path(remote) / "korg-sync" / "v1" / "FORMAT"
    info = json.loads(fmt.read_text())
    fmt.write_text(json.dumps({**info, "format": 2}))
    failed(b.run("sync"), 3, "was written by a newer korg-recall (format 2;")
    assert canonical(b.store) == []


def test_sync_before_init_and_on_a_team_store_are_config_errors(tmp_path: Path) -> None:
    a = _machine(tmp_path, "a")
    failed(a.run("sync"), 3, "sync is not set up on this machine")
    team = {"KORG_RECALL_STORE": "postgresql://app:secret@127.0.0.1:1/memories"}
    failed(a.run("sync", extra=team), 3, "PostgreSQL team store")
    failed(a.run("sync", "init", "--remote", str(tmp_path), extra=team), 3, "PostgreSQL team store")
