"""The vector store and the embedding pass: chunks, windows, model identity, staleness, slices.

Most tests use :class:`~_models.HashEmbedder`, a deterministic stand-in (a
vector per distinct text or window, counted), so the storage mechanics are
checked fast and exactly; the tests marked ``needs_model`` use the real offline
model (``KORG_RECALL_MODEL_DIR``, which CI builds with ``.ci/build_model_dir.py``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("numpy", reason="vector storage needs the [semantic] extra (numpy)")

import numpy as np

from korg_bridge.config import ENV_RECALL_MODEL_DIR
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.migrations import MIGRATIONS, migrate
from korg_bridge.recall.semantic import embed, embedpass, model, vectors
from korg_bridge.recall.semantic.embedpass import embed_pending
from tests.helpers.models import MODEL_DIR, HashEmbedder, needs_model


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


def fill(index: Index, ledgers: Path, count: int, name: str = "a.jsonl", start: int = 0) -> None:
    append(
        ledgers / name, "".join(prompt(seq, f"prompt number {seq}") for seq in range(start, start + count))
    )
    index.refresh([ledgers])


def chunk_rows(index: Index) -> list[tuple[Any, ...]]:
    return index.read(
        lambda conn: conn.execute(
            "SELECT model_id, dim, count, events, length(ids), length(vectors) FROM vector_chunks ORDER BY id"
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


def test_the_window_migration_follows_the_others_and_counts_events_per_chunk(tmp_path: Path) -> None:
    names = [name for name, _ in MIGRATIONS]
    assert names.index("m008_vector_windows") > names.index("m007_full_text_kinds_projects")
    conn = sqlite3.connect(tmp_path / "blank.sqlite", isolation_level=None)
    try:
        migrate(conn)
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        columns = [row[1] for row in conn.execute("PRAGMA table_info(vector_chunks)")]
    finally:
        conn.close()
    assert {"vector_chunks", "vector_stale", "events_vector_text", "events_vector_delete"} <= tables
    assert columns == ["id", "model_id", "dim", "count", "ids", "vectors", "events", "stamp"]


def test_upgrading_drops_vectors_of_the_old_form(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.sqlite", isolation_level=None)
    try:
        names = [name for name, _ in MIGRATIONS]
        migrate(conn, MIGRATIONS[: names.index("m008_vector_windows")])
        conn.execute(
            "INSERT INTO vector_chunks (model_id, dim, count, ids, vectors) VALUES ('m', 2, 1, x'00', x'00')"
        )
        conn.execute("INSERT INTO vector_stale (event_id) VALUES (7)")
        assert migrate(conn)[0] == "m008_vector_windows"
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
    report = embed_pending(index, embedder)
    assert (report.embedded, report.pending) == (10, 0)
    assert chunk_rows(index) == [("test/hash", 16, 10, 10, 80, 10 * 16 * 4)]
    assert stored_ids(index) == event_ids(index)
    assert vectors.counts(index) == {"test/hash": 10}
    assert vectors.coverage(index, "test/hash", 16).to_dict() == {
        "model": "test/hash",
        "events": 10,
        "embedded": 10,
        "not_embedded": 0,
        "coverage": 1.0,
    }

    again = embed_pending(index, embedder)
    assert (again.embedded, again.pending) == (0, 0)
    assert len(embedder.embedded) == 10  # the second pass embedded nothing


def test_coverage_counts_events_not_windows_and_leaves_stale_vectors_out(index: Index, ledgers: Path) -> None:
    long_prompt = " ".join(f"word{n}" for n in range(30))
    append(ledgers / "a.jsonl", prompt(1, long_prompt) + prompt(2, "short"))
    index.refresh([ledgers])
    embed_pending(index, HashEmbedder(window_words=10))
    assert [row[2:4] for row in chunk_rows(index)] == [(4, 2)]  # 3 windows + 1, two events
    assert vectors.coverage(index, "test/hash", 16).embedded == 2
    assert vectors.coverage(index, "test/other").embedded == 0
    with index.write() as conn:
        conn.execute("INSERT INTO vector_stale (event_id) VALUES (?)", (event_ids(index)[0],))
    assert vectors.coverage(index, "test/hash", 16).fraction == 0.5


def test_new_events_fill_the_open_chunk_before_starting_another(index: Index, ledgers: Path) -> None:
    embedder = HashEmbedder()
    for start in range(0, 600, 100):
        fill(index, ledgers, 100, start=start)
        embed_pending(index, embedder)
    assert [row[2] for row in chunk_rows(index)] == [256, 256, 88]
    assert stored_ids(index) == event_ids(index)


def test_a_long_text_is_stored_as_windows_and_scores_by_its_best_one(index: Index, ledgers: Path) -> None:
    words = [f"w{n}" for n in range(25)]
    append(ledgers / "a.jsonl", prompt(1, " ".join(words)) + prompt(2, "unrelated"))
    index.refresh([ledgers])
    embedder = HashEmbedder(window_words=10)
    embed_pending(index, embedder)
    first, second = event_ids(index)
    assert stored_ids(index) == [first, first, first, second]
    query = embedder.vector(" ".join(words[20:]))  # the third window exactly
    ids, sims = vectors.similarities(index, "test/hash", 16, query)
    assert sorted(ids.tolist()) == [first, second]  # one score per event, not per window
    assert float(sims[ids.tolist().index(first)]) == pytest.approx(1.0, abs=1e-6)


def test_identical_texts_are_embedded_once_per_pass(index: Index, ledgers: Path) -> None:
    append(
        ledgers / "a.jsonl", "".join(prompt(seq, "git status") for seq in range(300)) + prompt(301, "other")
    )
    index.refresh([ledgers])
    embedder = HashEmbedder()
    report = embed_pending(index, embedder)
    assert report.embedded == 301
    assert sorted(embedder.embedded) == ["git status", "other"]
    assert report.texts == 2


def test_an_event_with_nothing_to_read_gets_a_zero_vector_without_a_model_call(
    index: Index, ledgers: Path
) -> None:
    append(ledgers / "a.jsonl", prompt(1, "") + prompt(2, "something"))
    index.refresh([ledgers])
    embedder = HashEmbedder()
    assert embed_pending(index, embedder).embedded == 2
    assert embedder.embedded == ["something"]
    ids, sims = vectors.similarities(index, "test/hash", 16, embedder.vector("something"))
    assert dict(zip(ids.tolist(), sims.tolist(), strict=True))[event_ids(index)[0]] == 0.0


def test_stored_vectors_are_the_embedders_rows(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 3)
    embedder = HashEmbedder()
    embed_pending(index, embedder)
    texts = dict(index.read(lambda conn: conn.execute("SELECT id, text FROM events").fetchall()))
    query = embedder.vector("prompt number 1")
    ids, sims = vectors.similarities(index, embedder.model_id, embedder.dim, query)
    expected = {event_id: float(embedder.vector(text) @ query) for event_id, text in texts.items()}
    assert {int(i): pytest.approx(float(s), abs=1e-6) for i, s in zip(ids, sims, strict=True)} == expected


def test_a_zero_budget_embeds_nothing_and_reports_everything_pending(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 40)
    embedder = HashEmbedder()
    report = embed_pending(index, embedder, budget_s=0)
    assert (report.embedded, report.pending) == (0, 40)
    assert embedder.embedded == []
    assert vectors.coverage(index, embedder.model_id, embedder.dim).missing == 40


def test_embedding_goes_newest_first_a_slice_per_transaction(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 300)
    embedder = HashEmbedder()
    seen: list[tuple[int, int]] = []
    committed: list[int] = []
    embed_pending(
        index,
        embedder,
        progress=lambda done, total: seen.append((done, total)),
        on_commit=lambda conn, report: committed.append(report.embedded),
        slice_events=100,
    )
    assert set(embedder.embedded[:100]) == {f"prompt number {seq}" for seq in range(200, 300)}
    assert seen == [(100, 300), (200, 300), (300, 300)]
    assert committed == [100, 200, 300]


def test_a_pass_stopped_between_slices_keeps_what_it_stored_and_the_next_one_resumes(
    index: Index, ledgers: Path
) -> None:
    fill(index, ledgers, 300)
    first = HashEmbedder()
    calls = iter([False, True])
    report = embed_pending(index, first, stop=lambda: next(calls), slice_events=100)
    assert (report.embedded, report.pending) == (100, 200)
    second = HashEmbedder()
    assert embed_pending(index, second).embedded == 200
    assert len(second.embedded) == 200  # nothing embedded twice
    assert stored_ids(index) == event_ids(index)


def test_who_embedded_what_is_counted_by_role(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 5)
    embed_pending(index, HashEmbedder(), role="indexer")
    fill(index, ledgers, 2, start=5)
    embed_pending(index, HashEmbedder(), role="index")
    assert index.read(embedpass.embedded_by) == {"index": 2, "indexer": 5}


def test_a_different_model_embeds_lazily_and_never_mixes(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 5)
    first, second = HashEmbedder("test/first"), HashEmbedder("test/second", dim=8)
    embed_pending(index, first)
    ids, _ = vectors.similarities(index, second.model_id, second.dim, second.vector("x"))
    assert len(ids) == 0  # the first model's vectors are never compared with the second's
    assert vectors.coverage(index, second.model_id, second.dim).missing == 5
    embed_pending(index, second)
    assert vectors.counts(index) == {"test/first": 5, "test/second": 5}
    # Switching back costs nothing: the first model's vectors were kept.
    assert embed_pending(index, first).embedded == 0


# --- staleness ---------------------------------------------------------------------------------


def test_a_late_tool_result_re_embeds_its_event(index: Index, ledgers: Path) -> None:
    transcript = ledgers / "t.jsonl"
    transcript.write_text(tool_use("toolu_1", "/tmp/zoo.txt"))
    index.refresh([ledgers])
    embedder = HashEmbedder()
    embed_pending(index, embedder)
    [event_id] = event_ids(index)

    append(transcript, tool_result("toolu_1", "zebra stripes"))
    index.refresh([ledgers])
    ids, _ = vectors.similarities(index, embedder.model_id, embedder.dim, embedder.vector("/tmp/zoo.txt"))
    assert event_id not in ids.tolist()  # the old vector is masked at once

    report = embed_pending(index, embedder)
    assert (report.dropped, report.embedded) == (1, 1)
    assert embedder.embedded[-1] == "/tmp/zoo.txt → zebra stripes"
    assert stored_ids(index) == [event_id]
    assert index.read(lambda conn: conn.execute("SELECT count(*) FROM vector_stale").fetchone()[0]) == 0


def test_deleted_events_lose_their_vectors(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 300, name="a.jsonl")
    fill(index, ledgers, 20, name="b.jsonl")
    embedder = HashEmbedder()
    embed_pending(index, embedder)
    (ledgers / "a.jsonl").unlink()
    index.refresh([ledgers])  # its events are kept, marked gone, until pruned
    index.prune_gone()
    ids, _ = vectors.similarities(index, embedder.model_id, embedder.dim, embedder.vector("x"))
    assert sorted(ids.tolist()) == event_ids(index)
    report = embed_pending(index, embedder)
    assert (report.dropped, report.embedded) == (300, 0)
    assert stored_ids(index) == event_ids(index)
    assert sum(row[3] for row in chunk_rows(index)) == 20


def test_events_another_process_stored_meanwhile_are_not_stored_twice(tmp_path: Path, ledgers: Path) -> None:
    with Index(tmp_path / "index.sqlite") as first, Index(tmp_path / "index.sqlite") as second:
        fill(first, ledgers, 10)
        embedder = HashEmbedder()
        found = first.read(lambda conn: embedpass.event_texts(conn, event_ids(first)))
        heads = {event_id: texts[0] for event_id, texts in found.items()}
        rows = {event_id: embedder.embed([texts[1]]) for event_id, texts in found.items()}
        embed_pending(second, embedder)  # the other process, between our read and our write
        report = embedpass.EmbedReport(embedder.model_id, embedder.dim)
        stored, _ = embedpass._store(first, embedder, heads, rows, 0, "index", report, None)
        assert stored == 0
        assert stored_ids(first) == event_ids(first)


def test_a_text_changed_while_embedding_is_not_stored(index: Index, ledgers: Path) -> None:
    fill(index, ledgers, 2)
    embedder = HashEmbedder()
    first, second = event_ids(index)
    heads = {first: "prompt number 0", second: "an older text"}
    rows = {first: embedder.embed(["a"]), second: embedder.embed(["b"])}
    report = embedpass.EmbedReport(embedder.model_id, embedder.dim)
    stored, _ = embedpass._store(index, embedder, heads, rows, 0, "index", report, None)
    assert stored == 1
    assert stored_ids(index) == [first]


# --- the real model ----------------------------------------------------------------------------


@needs_model
def test_a_copy_of_the_model_under_another_id_re_embeds(index: Index, ledgers: Path, tmp_path: Path) -> None:
    fill(index, ledgers, 4)
    base = embed.load_embedder({ENV_RECALL_MODEL_DIR: MODEL_DIR})
    embed_pending(index, base)
    other_dir = tmp_path / "other-model"
    shutil.copytree(MODEL_DIR, other_dir)
    manifest = json.loads((other_dir / model.MANIFEST).read_text(encoding="utf-8"))
    (other_dir / model.MANIFEST).write_text(
        json.dumps({**manifest, "model_id": "test/renamed"}), encoding="utf-8"
    )
    other = embed.load_embedder({ENV_RECALL_MODEL_DIR: str(other_dir)})
    report = embed_pending(index, other)
    assert report.embedded == 4
    assert vectors.counts(index) == {base.model_id: 4, "test/renamed": 4}
    assert {row[1] for row in chunk_rows(index)} == {384}


@needs_model
def test_the_real_model_finds_a_sentence_deep_in_a_long_reply_by_its_window(
    index: Index, ledgers: Path
) -> None:
    filler = " ".join(
        f"The {word} module was reviewed and nothing changed there." for word in ("a", "b") * 40
    )
    reply = filler + " The outage came from an expired TLS certificate on the load balancer."
    append(ledgers / "a.jsonl", prompt(1, reply) + prompt(2, filler))
    index.refresh([ledgers])
    embedder = embed.load_embedder({ENV_RECALL_MODEL_DIR: MODEL_DIR})
    embed_pending(index, embedder)
    assert sum(row[2] for row in chunk_rows(index)) > 2  # the long texts have several windows
    ids, sims = vectors.similarities(
        index,
        embedder.model_id,
        embedder.dim,
        embedder.embed(["certificate expired on the load balancer"])[0],
    )
    scores = dict(zip(ids.tolist(), sims.tolist(), strict=True))
    with_it, without = event_ids(index)
    assert scores[with_it] > scores[without] + 0.2


# --- scan --------------------------------------------------------------------------------------


def synthetic(index: Index, count: int, dim: int = 384) -> None:
    rng = np.random.default_rng(0)
    with index.write() as conn:
        for start in range(0, count, vectors.CHUNK_ROWS):
            rows = rng.standard_normal((min(vectors.CHUNK_ROWS, count - start), dim)).astype(np.float32)
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
            ids = np.arange(start + 1, start + 1 + len(rows), dtype=np.int64)
            vectors.append(conn, "test/synthetic", dim, ids, rows)


def test_exact_search_scores_every_stored_event(index: Index) -> None:
    synthetic(index, 10_000)
    query = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    ids, sims = vectors.similarities(index, "test/synthetic", 384, query)
    assert sorted(ids.tolist()) == list(range(1, 10_001))
    assert float(sims.max()) <= 1.0
