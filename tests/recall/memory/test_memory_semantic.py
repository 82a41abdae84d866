"""With a local embedding model the write policy also compares meanings: a rewording that shares
too few words to merge by keywords merges by cosine (still guarded), and purging drops vectors."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.helpers.cli import answer
from tests.helpers.memory import rows

MODEL_DIR = os.environ.get("KORG_RECALL_MODEL_DIR", "")
"""Read at import, as tests/recall/_models.py does: the autouse fixtures strip it from each test."""

pytestmark = pytest.mark.skipif(
    not (MODEL_DIR and Path(MODEL_DIR).is_dir() and importlib.util.find_spec("fastembed")),
    reason="needs KORG_RECALL_MODEL_DIR and the [semantic] extra (see tests/recall/_models.py)",
)


@pytest.fixture
def with_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KORG_RECALL_MODEL_DIR", MODEL_DIR)


def test_a_rewording_merges_by_cosine_and_purge_drops_the_vectors(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path, with_model: None
) -> None:
    first = answer(
        capsys, "remember", "--content", "The user prefers pnpm as the package manager.", "--type", "user"
    )
    assert first["checks"]["semantic"].startswith("ran: ")
    reworded = answer(
        capsys, "remember", "--content", "For package management the user prefers pnpm.", "--type", "user"
    )
    assert (reworded["status"], reworded["id"]) == (
        "merged",
        first["id"],
    )  # word overlap 0.67 alone would not
    changed = answer(
        capsys, "remember", "--content", "For package management the user prefers bun.", "--type", "user"
    )
    assert changed["status"] == "created"
    assert changed["similar"][0]["id"] == first["id"]
    vectors = "SELECT count(*) FROM memory_vectors WHERE row IN (SELECT rowid FROM memory WHERE id = ?)"
    assert rows(store, vectors, [first["id"]])[0][0] >= 1
    answer(capsys, "forget", "--id", str(first["id"]), "--mode", "purge")
    assert rows(store, vectors, [first["id"]]) == [(0,)]
