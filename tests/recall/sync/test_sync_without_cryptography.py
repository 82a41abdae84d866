"""Without ``cryptography`` (the ``sync`` extra) every sync command exits 7 naming the extra, and
nothing of the store or of the sync set-up changes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.recall.sync.conftest import Machine, _machine
from tests.recall.sync.test_sync_session_start import _hook_argv, _run_hook, _wait_background

EXTRA = "pip install 'korg-bridge[sync]'"


@pytest.fixture
def no_crypto(tmp_path: Path) -> dict[str, str]:
    """An environment whose interpreter cannot import ``cryptography``: a package of that name,
    first on the path, that refuses to import -- as when the extra was never installed."""
    shim = tmp_path / "no-cryptography" / "cryptography"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ImportError(\"No module named 'cryptography' (blocked by the test)\")\n", encoding="utf-8"
    )
    return {"PYTHONPATH": str(shim.parent)}


def _fingerprint(machine: Machine) -> dict[str, str]:
    """Every file of the machine's data folder (store, its WAL, sync set-up) by content hash."""
    return {
        str(path.relative_to(machine.data)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(machine.data.rglob("*"))
        if path.is_file() and not path.name.endswith(".lock") and path.name != "lock"
    }


def _refused(machine: Machine, env: dict[str, str], *args: str, stdin: str | None = None) -> None:
    from tests.helpers.cli import run_recall

    proc = run_recall(*args, cwd=machine.cwd, env={**machine.env, **env}, input=stdin)
    assert proc.returncode == 7, (args, proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and EXTRA in lines[0] and "cryptography" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_every_sync_command_exits_7_naming_the_extra_and_changes_nothing(
    pair: tuple[Machine, Machine], folder_remote: str, no_crypto: dict[str, str]
) -> None:
    a, _b = pair
    a.remember("the build cache lives in /var/cache/ci")
    a.sync()
    a.remember("the deploy key rotates monthly")  # a change not yet synced: it must stay unsent
    before = _fingerprint(a)
    for args in (
        ("sync",),
        ("sync", "status"),
        ("sync", "status", "--key"),
        ("sync", "config"),
        ("sync", "config", "--on-session-start", "off"),
        ("sync", "init", "--remote", folder_remote),
    ):
        _refused(a, no_crypto, *args)
    assert _fingerprint(a) == before
    status = a.ok("sync", "status")  # with the extra back, all is as it was
    assert status["on_session_start"] is True and status["records_sent"] == 1


def test_sync_init_without_the_extra_sets_nothing_up(
    tmp_path: Path, folder_remote: str, no_crypto: dict[str, str]
) -> None:
    fresh = _machine(tmp_path, "fresh")
    fresh.remember("the VPN profile is in the wiki")
    before = _fingerprint(fresh)
    _refused(fresh, no_crypto, "sync", "init", "--remote", folder_remote)
    _refused(
        fresh, no_crypto, "sync", "init", "--remote", folder_remote, "--join", "-", stdin="korg-sync1-x\n"
    )
    assert _fingerprint(fresh) == before
    assert not (fresh.data / "sync").exists()
    assert list(Path(folder_remote).iterdir()) == []


def test_the_hooks_background_sync_without_the_extra_fails_quietly_and_says_why(
    pair: tuple[Machine, Machine], no_crypto: dict[str, str]
) -> None:
    a, _b = pair
    a.remember("the on-call rota is in the team calendar")
    argv = _hook_argv(a)
    with_extra = _run_hook(a, argv, KORG_RECALL_BACKGROUND="0")
    hook = _run_hook(a, argv, **no_crypto)
    assert hook.returncode == 0
    assert (hook.stdout, hook.stderr) == (with_extra.stdout, with_extra.stderr)  # the brief, nothing more
    done = _wait_background(a)
    assert (done["outcome"], done["exit_code"]) == ("failed", 7)
    assert EXTRA in done["error"]
    assert EXTRA in (a.data / "sync" / "background.log").read_text("utf-8")
