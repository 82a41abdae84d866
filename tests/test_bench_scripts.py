"""Every benchmark script still imports: a rename in the package must not leave a bench that only
fails when someone reruns it to check a figure (``sync_bench`` once imported a module renamed
away)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

SCRIPTS = sorted(path.stem for path in (REPO / "bench").glob("*.py") if not path.stem.startswith("_"))


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_bench_script_imports(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, 'bench'); import {name}"],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1:]


def test_there_are_bench_scripts() -> None:
    assert len(SCRIPTS) >= 10 and Path(REPO / "bench" / "engine_bench.py").is_file()
