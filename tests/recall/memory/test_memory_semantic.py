"""With a local embedding model the write policy also compares meanings: a rewording that shares
too few words to merge by keywords merges by cosine (still guarded), and purging drops vectors."""

from __future__ import annotations

import importlib.util
import json
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


def test_a_note_is_embedded_as_its_body_unless_someone_titled_it(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path, with_model: None
) -> None:
    """A title made from the body (its first line, cut, or a heading's words) adds nothing to the
    body: put before it, it filled the model's window (the end of a long note went unembedded)."""
    import numpy as np

    from korg_bridge.recall.semantic.modes import shared_embedder

    long_body = (
        "The staging database is restored from the nightly snapshot every Sunday at 03:00 UTC, "
        "so anything written to staging over the weekend is gone on Monday morning."
    )
    heading_body = "# Release checklist\nTag the commit, then run the deploy script from main."
    titled_body = "Tag the commit, then run the deploy script from main."
    written = {
        body: answer(capsys, "remember", "--content", body, "--type", "project", *extra)
        for body, extra in (
            (long_body, ()),
            (heading_body, ()),
            (titled_body, ("--title", "How a release is cut")),
        )
    }
    embedder = shared_embedder({"KORG_RECALL_MODEL_DIR": MODEL_DIR})
    expected = {
        long_body: long_body,
        heading_body: heading_body,
        titled_body: f"How a release is cut\n{titled_body}",
    }
    for body, result in written.items():
        assert result["status"] == "created", result
        title, blob = rows(
            store,
            "SELECT m.title, v.vector FROM memory m JOIN memory_vectors v ON v.row = m.rowid WHERE m.id = ?",
            [result["id"]],
        )[0]
        if body == long_body:
            assert title.endswith("…")  # a title cut from the body
        want = embedder.embed([expected[body]])[0]
        if isinstance(blob, bytes):  # SQLite keeps the float32 bytes
            assert np.array_equal(np.frombuffer(blob, dtype=np.float32), want), body
        else:  # a team store keeps pgvector's halfvec, in its text form
            stored = np.asarray(json.loads(blob), dtype=np.float32)
            assert np.allclose(stored, want, atol=1e-3), body
