"""An engine answers only for the code it runs: a change to its package on disk -- an edit, a
touch, a file added -- makes it stop answering at once and stop, so the next call runs in its
own process; the bytecode a fresh process compiles does not count. Run on a copy of the package
(first on ``PYTHONPATH``), so the test may change it."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

import korg_bridge
from korg_bridge.recall.engine import codewatch
from korg_bridge.recall.engine.codewatch import CodeWatch
from korg_bridge.recall.engine.protocol import code_fingerprint
from tests.helpers.engine import start
from tests.recall.engine.conftest import BOUND, answered

FRONT = "import sys; from korg_bridge.recall.engine.front import console; sys.exit(console())"


def copy_package(where: Path) -> Path:
    """A copy of the package (its sources only) under ``where``; the copy's package folder."""
    source = Path(korg_bridge.__file__).parent
    target = where / "korg_bridge"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def test_a_change_anywhere_in_the_package_is_seen_and_compiled_bytecode_is_not(tmp_path: Path) -> None:
    package = copy_package(tmp_path / "site")
    watch = CodeWatch(str(package))
    assert watch.watching and watch.stale() is None
    (package / "recall" / "__pycache__").mkdir()
    (package / "recall" / "__pycache__" / "paths.cpython-311.pyc").write_bytes(b"compiled")
    assert watch.stale() is None
    os.utime(package / "recall" / "memory" / "search.py")  # a touch, in a folder three deep
    assert watch.stale() == f"{package / 'recall' / 'memory' / 'search.py'} changed"
    assert watch.stale() is not None  # stale for good

    fresh = CodeWatch(str(package))
    (package / "recall" / "cli" / "extra.py").write_text("# a new module\n", encoding="utf-8")
    assert fresh.stale() == f"{package / 'recall' / 'cli' / 'extra.py'} changed"


def test_without_inotify_the_package_is_walked_before_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = copy_package(tmp_path / "site")

    def no_inotify() -> None:
        raise OSError(24, "inotify_init1 failed")

    monkeypatch.setattr(codewatch, "Inotify", no_inotify)
    watch = CodeWatch(str(package))
    assert not watch.watching and watch.fingerprint == code_fingerprint(str(package))
    assert watch.stale() is None
    with (package / "recall" / "paths.py").open("a", encoding="utf-8") as out:
        out.write("# edited\n")
    assert watch.stale() == "a file of the package changed"


def test_an_engine_whose_package_changes_stops_answering_and_stops(
    env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    package = copy_package(tmp_path / "site")
    env = {**env, "PYTHONPATH": str(package.parent), "KORG_RECALL_ENGINE": "on"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the calls compile the copy, as a user's first ones do
    front = [sys.executable, "-c", FRONT]
    engine = start(env, command=front, cwd=project)
    try:
        assert engine.info()["code_watch"] is True

        assert answered(env, project, front) and answered(
            env, project, front
        )  # the copy's bytecode, written meanwhile, is no change
        assert list(package.rglob("__pycache__/*.pyc"))
        os.utime(package / "recall" / "history" / "index.py")
        assert not answered(env, project, front)  # refused at once: run in its own process, same answer
        deadline = time.monotonic() + BOUND
        while engine.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.proc.returncode == 0
        assert engine.proc.stderr is not None
        said = engine.proc.stderr.read().decode()
        assert f"its code changed on disk ({package / 'recall' / 'history' / 'index.py'} changed)" in said
        assert not (engine.folder / "engine.sock").exists()
    finally:
        engine.stop()
