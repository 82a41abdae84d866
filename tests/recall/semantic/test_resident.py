"""The history vectors a resident engine keeps: a child scoring with the kept copy gets exactly what
a fresh process reading every chunk gets, after appends (the open chunk is deleted and inserted
again, under the same id), after stale vectors are dropped (a chunk rewritten in place), and when
only part of the vectors fit the budget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("numpy", reason="vector storage needs the [semantic] extra (numpy)")

import numpy as np

from korg_bridge.recall.history.index import Index
from korg_bridge.recall.semantic import resident, vectors
from korg_bridge.recall.semantic.embedpass import embed_pending
from tests.helpers.models import HashEmbedder

MODEL, DIM = "test/synthetic", 64


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    resident._KEPT.clear()
    yield
    resident._KEPT.clear()


def _rows(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _append(index: Index, first_id: int, count: int, seed: int) -> None:
    with index.write() as conn:
        ids = np.arange(first_id, first_id + count, dtype=np.int64)
        vectors.append(conn, MODEL, DIM, ids, _rows(count, seed))


def _query(seed: int = 99) -> np.ndarray:
    return _rows(1, seed)[0]


def _fresh(index: Index, query: np.ndarray) -> tuple[list[int], bytes]:
    """What a fresh process computes: nothing kept."""
    saved = dict(resident._KEPT)
    resident._KEPT.clear()
    try:
        ids, sims = vectors.similarities(index, MODEL, DIM, query)
    finally:
        resident._KEPT.update(saved)
    return ids.tolist(), sims.tobytes()


def _served(index: Index, query: np.ndarray) -> tuple[list[int], bytes]:
    assert resident.chunks(index, MODEL, DIM) is not None, "nothing kept: the test would prove nothing"
    ids, sims = vectors.similarities(index, MODEL, DIM, query)
    return ids.tolist(), sims.tobytes()


def test_the_kept_copy_scores_exactly_as_the_index(index: Index) -> None:
    _append(index, 1, 3 * vectors.CHUNK_ROWS + 17, seed=1)
    assert vectors.keep_resident(index, MODEL, DIM) == 4
    assert _served(index, _query()) == _fresh(index, _query())


def test_a_chunk_written_since_under_a_reused_id_is_read_from_the_index(index: Index) -> None:
    _append(index, 1, vectors.CHUNK_ROWS + 10, seed=1)  # a full chunk and an open one
    vectors.keep_resident(index, MODEL, DIM)
    before = index.read(lambda conn: conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0])
    _append(index, 10_000, 5, seed=2)  # the open chunk is deleted and inserted again
    after = index.read(lambda conn: conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0])
    assert after == before, "SQLite handed the freed id out again: the case the stamps are for"
    served = _served(index, _query())
    assert 10_004 in served[0]
    assert served == _fresh(index, _query())
    assert vectors.keep_resident(index, MODEL, DIM) == 1  # only the rewritten chunk is read again


def test_a_chunk_rewritten_in_place_by_dropping_stale_vectors_is_read_from_the_index(
    index: Index, ledgers: Path
) -> None:
    ledger = ledgers / "a.jsonl"
    ledger.write_text(
        "".join(
            f'{{"seq": {n}, "source_agent": "agent:t", "tool_name": "user_prompt", "args": {{"prompt": "p{n}"}}}}\n'
            for n in range(40)
        )
    )
    index.refresh([ledgers])
    embedder = HashEmbedder()
    embed_pending(index, embedder)
    vectors.keep_resident(index, embedder.model_id, embedder.dim)
    ledger.write_text("".join(ledger.read_text().splitlines(keepends=True)[:25]))  # 15 events gone
    index.refresh([ledgers])
    index.prune_gone()
    embed_pending(index, embedder)  # drops the stale vectors: UPDATE of the chunk in place
    query = embedder.vector("p3")
    kept_ids, kept_sims = vectors.similarities(index, embedder.model_id, embedder.dim, query)
    resident._KEPT.clear()
    fresh_ids, fresh_sims = vectors.similarities(index, embedder.model_id, embedder.dim, query)
    assert (kept_ids.tolist(), kept_sims.tobytes()) == (fresh_ids.tolist(), fresh_sims.tobytes())
    assert len(fresh_ids) == 25


def test_vectors_past_the_budget_are_read_per_call(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    _append(index, 1, 4 * vectors.CHUNK_ROWS, seed=3)
    monkeypatch.setattr(resident, "BUDGET_BYTES", 2 * vectors.CHUNK_ROWS * DIM * 4)
    vectors.keep_resident(index, MODEL, DIM)
    kept = resident.chunks(index, MODEL, DIM)
    assert kept is not None and len(kept) == 2
    assert _served(index, _query()) == _fresh(index, _query())


def test_another_index_or_model_has_nothing_kept(index: Index, tmp_path: Path) -> None:
    _append(index, 1, 10, seed=4)
    vectors.keep_resident(index, MODEL, DIM)
    assert resident.chunks(index, "another/model", DIM) is None
    with Index(tmp_path / "other.sqlite") as other:
        assert resident.chunks(other, MODEL, DIM) is None
