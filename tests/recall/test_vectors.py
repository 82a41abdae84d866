"""Vector storage in the recall index: chunks, model identity, staleness, budgets, scan speed.

Most tests use :class:`HashEmbedder`, a deterministic stand-in for a model
(a vector per distinct text, counted), so the storage mechanics are checked
fast and exactly; the tests marked ``needs_model`` use the real offline model
(``KORG_RECALL_MODEL_DIR``, which CI builds with ``.ci/build_model_dir.py``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy", reason="vector storage needs the [semantic] extra (numpy)")

import numpy as np
from _models import MODEL_DIR, needs_model
from numpy.typing import NDArray

from korg_bridge.recall import embed, vectors
from korg_bridge.recall.index import Index
from korg_bridge.recall.migrations import MIGRATIONS, migrate


class HashEmbedder:
    """A deterministic embedder: one pseudo-random unit vector per text; counts what it embeds."""

    def __init__(self, model_id: str = "test/hash", dim: int = 16) -> None:
        self.model_id = model_id
        self.dim = dim
        self.embedded: list[str] = []

    def vector(self, text: str) -> NDArray[np.float32]:
        seed = int.from_bytes(hashlib.sha256(f"{self.model_id}:{text}".encode()).digest()[:8], "little")
        row = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return row / np.linalg.norm(row)

    def embed(self, texts: Sequence[str], *, batch_size: int = 32) -> NDArray[np.float32]:
        self.embedded.extend(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.vector(text) for text in texts])


def prompt(seq: int, text: str) -> str:
    record = {"seq": seq, "source_agent": "agent:test", "tool_name": "user_prompt", "args": {"prompt": text}}
    return json.dumps(record) + "\n"


def tool_use(tool_use_id: str, path: str) -> str:
    block = {"type": "tool_use", "id": tool_use_id, "name": "Read", "input": {"file_path": path}}
    return (
        json.dumps(
            {"type": "assistant", "sessionId": "s1", "message": {"role": "assistant", "content": [block]}}
        )
        + "\n"
    )


def tool_result(tool_use_id: str, output: str) -> str:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": output}
    return (
        json.dumps({"type": "user", "sessionId": "s1", "message": {"role": "user", "content": [block]}})
        + "\n"
    )


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "index.sqlite") as opened:
        yield opened


@pytest.fixture
def ledgers(tmp_path: Path) -> Path:
    folder = tmp_path / "ledgers"
    folder.mkdir()
    return folder


def fill(index: Index, ledgers: Path, count: int, name: str = "a.jsonl", start: int = 0) -> None:
    append(
        ledgers / name, "".join(prompt(seq, f"prompt number {seq}") for seq in range(start, start + count))
    )
    index.refresh([ledgers])


def chunk_rows(index: Index) -> list[tuple[Any, ...]]:
    return index.read(
        lambda conn: conn.execute(
            "SELECT model_id, dim, count, length(ids), length(vectors) FROM vector_chunks ORDER BY id"
        ).fetchall()
    )


def stored_ids(index: Index, model_id: str = "test/hash") -> list[int]:
    rows = index.read(
        lambda conn: conn.execute("SELECT ids FROM vector_chunks WHERE model_id = ?", (model_id,)).fetchall()
    )
    return sorted(int(x) for (blob,) in rows for x in np.frombuffer(blob, dtype="<i8"))


def event_ids(index: Index) -> list[int]:
    return index.read(lambda conn: [row[0] for row in conn.execute("SELECT id FROM events ORDER BY id")])


# --- schema ------------------------------------------------------------------------------------


def test_the_vector_migrations_follow_each_other_and_create_tables_and_triggers(tmp_path: Path) -> None:
    names = [name for name, _ in MIGRATIONS]
    assert names[names.index("m004_vectors") + 1] == "m005_vectors_of_prose_text"
    conn = sqlite3.connect(tmp_path / "blank.sqlite", isolation_level=None)
    try:
        migrate(conn)
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert {"vector_chunks", "vector_stale", "events_vector_text", "events_vector_delete"} <= names


def test_upgrading_drops_vectors_of_the_old_text_form(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.sqlite", isolation_level=None)
    try:
        names = [name for name, _ in MIGRATIONS]
        migrate(conn, MIGRATIONS[: names.index("m005_vectors_of_prose_text")])
        conn.execute(
            "INSERT INTO vector_chunks (model_id, dim, count, ids, vectors) VALUES ('m', 2, 1, x'00', x'00')"
        )
        conn.execute("INSERT INTO vector_stale (event_id) VALUES (7)")
        assert migrate(conn)[0] == "m005_vectors_of_prose_text"
        left = conn.execute(
            "SELECT (SELECT count(*) FROM vector_chunks), (SELECT count(*) FROM vector_stale)"
        )
        assert left.fetchone() == (0, 0)
    finally:
        conn.close()


def test_an_index_without_vectors_records_no_stale_events(index: Index, ledgers: Path) -> None:
    (ledgers / "a.jsonl").write_text(prompt(1, "one") + prompt(2, "two"))
    index.refresh([ledgers])
    (ledgers / "a.jsonl").write_text(prompt(1, "rewritten"))  # smaller: re-read, old events deleted
    index.refresh([ledgers])
    assert index.read(lambda conn: conn.execute("SELECT count(*) FROM vector_stale").fetchone()[0]) == 0


# --- embedding passes --------------------------------------------------------------------------


def test_every_event_is_embedded_once_with_model_id_and_dim_beside_it(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 10)
    embedder = HashEmbedder()
    report = vectors.embed_pending(index, embedder)
    assert (report.embedded, report.pending) == (10, 0)
    assert chunk_rows(index) == [("test/hash", 16, 10, 80, 10 * 16 * 4)]
    assert stored_ids(index) == event_ids(index)
    assert vectors.counts(index) == {"test/hash": 10}

    again = vectors.embed_pending(index, embedder)
    assert (again.embedded, again.pending) == (0, 0)
    assert len(embedder.embedded) == 10  # the second pass embedded nothing


def test_new_events_fill_the_open_chunk_before_starting_another(index: Index, ledgers: Path) -> None:
    embedder = HashEmbedder()
    for start in range(0, 600, 100):
        fill(index, ledgers, 100, start=start)
        vectors.embed_pending(index, embedder)
    assert [row[2] for row in chunk_rows(index)] == [256, 256, 88]
    assert stored_ids(index) == event_ids(index)


def test_stored_vectors_are_the_embedders_rows(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 3)
    embedder = HashEmbedder()
    vectors.embed_pending(index, embedder)
    texts = dict(index.read(lambda conn: conn.execute("SELECT id, text FROM events").fetchall()))
    query = embedder.vector("prompt number 1")
    ids, sims = vectors.similarities(index, embedder.model_id, embedder.dim, query)
    expected = {event_id: float(embedder.vector(text) @ query) for event_id, text in texts.items()}
    assert {int(i): pytest.approx(float(s), abs=1e-6) for i, s in zip(ids, sims, strict=True)} == expected
    assert max(sims) == pytest.approx(1.0, abs=1e-6)


def test_a_zero_budget_embeds_nothing_and_reports_everything_pending(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 40)
    embedder = HashEmbedder()
    report = vectors.embed_pending(index, embedder, budget_s=0)
    assert (report.embedded, report.pending) == (0, 40)
    assert embedder.embedded == []
    assert vectors.pending_count(index, embedder.model_id, embedder.dim) == 40


def test_embedding_goes_newest_first_and_reports_progress(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 300)
    embedder = HashEmbedder()
    seen: list[tuple[int, int]] = []
    vectors.embed_pending(
        index, embedder, progress=lambda done, total: seen.append((done, total)), batch_size=100
    )
    assert set(embedder.embedded[:256]) == {f"prompt number {seq}" for seq in range(44, 300)}
    assert seen == [(100, 300), (200, 300), (256, 300), (300, 300)]


def test_texts_are_embedded_shortest_first_within_a_slice(index: Index, ledgers: Path) -> None:
    append(
        ledgers / "a.jsonl",
        prompt(1, "a rather longer prompt text") + prompt(2, "short") + prompt(3, "mid length"),
    )
    index.refresh([ledgers])
    embedder = HashEmbedder()
    vectors.embed_pending(index, embedder)
    assert embedder.embedded == ["short", "mid length", "a rather longer prompt text"]
    assert stored_ids(index) == event_ids(index)
    ids, sims = vectors.similarities(index, embedder.model_id, embedder.dim, embedder.vector("short"))
    assert int(ids[int(np.argmax(sims))]) == event_ids(index)[1]  # ids stayed with their vectors


def test_a_different_model_embeds_lazily_and_never_mixes(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 5)
    first, second = HashEmbedder("test/first"), HashEmbedder("test/second", dim=8)
    vectors.embed_pending(index, first)
    ids, _ = vectors.similarities(index, second.model_id, second.dim, second.vector("x"))
    assert len(ids) == 0  # the first model's vectors are never compared with the second's
    assert vectors.pending_count(index, second.model_id, second.dim) == 5
    vectors.embed_pending(index, second)
    assert vectors.counts(index) == {"test/first": 5, "test/second": 5}
    ids, sims = vectors.similarities(index, second.model_id, second.dim, second.vector("prompt number 2"))
    assert len(ids) == 5 and max(sims) == pytest.approx(1.0, abs=1e-6)
    # Switching back costs nothing: the first model's vectors were kept.
    assert vectors.embed_pending(index, first).embedded == 0


# --- staleness ---------------------------------------------------------------------------------


def test_a_late_tool_result_re_embeds_its_event(index: Index, ledgers: Path) -> None:
    transcript = ledgers / "t.jsonl"
    transcript.write_text(tool_use("toolu_1", "/tmp/zoo.txt"))
    index.refresh([ledgers])
    embedder = HashEmbedder()
    vectors.embed_pending(index, embedder)
    [event_id] = event_ids(index)

    append(transcript, tool_result("toolu_1", "zebra stripes"))
    index.refresh([ledgers])
    query = embedder.vector("Read file_path=/tmp/zoo.txt")
    ids, _ = vectors.similarities(index, embedder.model_id, embedder.dim, query)
    assert event_id not in ids.tolist()  # the old vector is masked at once

    report = vectors.embed_pending(index, embedder)
    assert (report.dropped, report.embedded) == (1, 1)
    assert embedder.embedded[-1] == "/tmp/zoo.txt → zebra stripes"  # embed_text: prose, not key=value
    assert stored_ids(index) == [event_id]
    assert index.read(lambda conn: conn.execute("SELECT count(*) FROM vector_stale").fetchone()[0]) == 0


def test_deleted_events_lose_their_vectors(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 300, name="a.jsonl")
    fill(index, ledgers, 20, name="b.jsonl")
    embedder = HashEmbedder()
    vectors.embed_pending(index, embedder)
    (ledgers / "a.jsonl").unlink()
    index.refresh([ledgers])  # its events are kept, marked gone, until pruned
    index.prune_gone()
    ids, _ = vectors.similarities(index, embedder.model_id, embedder.dim, embedder.vector("x"))
    assert sorted(ids.tolist()) == event_ids(index)
    report = vectors.embed_pending(index, embedder)
    assert (report.dropped, report.embedded) == (300, 0)
    assert stored_ids(index) == event_ids(index)
    assert sum(row[2] for row in chunk_rows(index)) == 20


def test_events_another_process_stored_meanwhile_are_not_stored_twice(tmp_path: Path, ledgers: Path) -> None:
    with Index(tmp_path / "index.sqlite") as first, Index(tmp_path / "index.sqlite") as second:
        fill(first, ledgers, 10)
        embedder = HashEmbedder()
        ids = event_ids(first)
        texts = [f"prompt number {seq}" for seq in range(10)]
        matrix = embedder.embed(texts)
        vectors.embed_pending(second, embedder)  # the other process, between our read and our write
        stored, _ = vectors._store(first, embedder, ids, texts, matrix, watermark=0)
        assert stored == 0
        assert stored_ids(first) == ids


def test_a_text_changed_while_embedding_is_not_stored(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 2)
    embedder = HashEmbedder()
    ids = event_ids(index)
    stored, _ = vectors._store(
        index, embedder, ids, ["prompt number 0", "an older text"], embedder.embed(["a", "b"]), 0
    )
    assert stored == 1
    assert stored_ids(index) == ids[:1]


# --- the real model ----------------------------------------------------------------------------


@needs_model
def test_a_copy_of_the_model_under_another_id_re_embeds(index: Index, ledgers: Path, tmp_path: Path) -> None:
    fill(index, ledgers, 4)
    base = embed.load_embedder({embed.MODEL_DIR_ENV: MODEL_DIR})
    vectors.embed_pending(index, base)
    other_dir = tmp_path / "other-model"
    shutil.copytree(MODEL_DIR, other_dir)
    manifest = json.loads((other_dir / embed.MANIFEST).read_text(encoding="utf-8"))
    (other_dir / embed.MANIFEST).write_text(
        json.dumps({**manifest, "model_id": "test/renamed"}), encoding="utf-8"
    )
    other = embed.load_embedder({embed.MODEL_DIR_ENV: str(other_dir)})
    report = vectors.embed_pending(index, other)
    assert report.embedded == 4
    assert vectors.counts(index) == {base.model_id: 4, "test/renamed": 4}
    assert {row[1] for row in chunk_rows(index)} == {384}


@needs_model
def test_indexing_throughput_is_reported(
    index: Index, ledgers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(index, ledgers, 256)
    embedder = embed.load_embedder({embed.MODEL_DIR_ENV: MODEL_DIR})
    report = vectors.embed_pending(index, embedder)
    assert report.embedded == 256
    with capsys.disabled():
        print(
            f"\n[vectors] embedded {report.embedded} short prompts at {report.to_dict()['events_per_s']} events/s"
        )


# --- scan speed --------------------------------------------------------------------------------


def synthetic(index: Index, count: int, dim: int = 384) -> None:
    rng = np.random.default_rng(0)
    with index.write() as conn:
        for start in range(0, count, vectors.CHUNK_ROWS):
            rows = rng.standard_normal((min(vectors.CHUNK_ROWS, count - start), dim)).astype(np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            ids = np.arange(start + 1, start + 1 + len(rows), dtype=np.int64)
            vectors._append(conn, "test/synthetic", dim, ids, rows)


def test_exact_search_over_10k_vectors_is_fast(index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    synthetic(index, 10_000)
    query = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        ids, sims = vectors.similarities(index, "test/synthetic", 384, query)
        top = ids[np.argsort(-sims)[:100]]
        timings.append(time.perf_counter() - started)
    assert len(ids) == 10_000 and len(top) == 100
    assert min(timings) < 0.5  # about 3 ms here; the bound only catches a pathological regression
    with capsys.disabled():
        print(f"\n[vectors] 10k x 384 scan + top-100: best {min(timings) * 1000:.1f} ms")
