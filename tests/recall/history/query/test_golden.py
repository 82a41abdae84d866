"""Hybrid never ranks a keyword-style golden target below keyword mode's top 5, embedded or not.

The golden set (``bench/golden``: 448 events, 56 targets) is indexed and
embedded once per module with the real offline model. "Keyword-style" is the
set's ``keyword`` and ``deep`` queries (the target's own words, from its head
or from deep inside a long event). The half-embedded index masks the vectors
of every other event, as a stale vector is masked: to ranking they are events
the background indexer has not reached yet.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from korg_bridge.recall.history.index import Index
from tests.helpers.models import MODEL_DIR, needs_model
from tests.helpers.paths import REPO

GOLDEN = REPO / "bench" / "golden"
KEYWORD_STYLE = ("keyword", "deep")


def queries() -> list[dict[str, Any]]:
    spec = json.loads((GOLDEN / "queries.json").read_text(encoding="utf-8"))
    return [item for item in spec["queries"] if item["kind"] in KEYWORD_STYLE]


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Index, Any]]:
    from korg_bridge.recall.semantic.embed import load_embedder
    from korg_bridge.recall.semantic.embedpass import embed_pending

    embedder = load_embedder({"KORG_RECALL_MODEL_DIR": MODEL_DIR})
    with Index(tmp_path_factory.mktemp("golden") / "index.sqlite") as index:
        index.refresh([GOLDEN / "ledger"])
        assert embed_pending(index, embedder).pending == 0
        yield index, embedder


def found_in_top5(index: Index, embedder: Any, mode: str) -> set[str]:
    from korg_bridge.recall.history.query.search import search
    from korg_bridge.recall.semantic.rank import SemanticRanker

    found = set()
    for item in queries():
        hits = search(
            index,
            item["query"],
            mode=mode,
            top_n=5,
            min_score=0.3,
            sources=[GOLDEN / "ledger"],
            ranker=SemanticRanker(embedder),
        )
        if (item["session"], item["seq"]) in [(hit.session, hit.seq) for hit in hits]:
            found.add(f"{item['kind']}:{item['target']}")
    return found


@needs_model
def test_the_golden_split_is_fixed_by_target_id_and_keeps_a_targets_queries_together() -> None:
    spec = json.loads((GOLDEN / "queries.json").read_text(encoding="utf-8"))
    halves: dict[str, set[str]] = {}
    for item in spec["queries"]:
        halves.setdefault(item["target"], set()).add(item["half"])
    assert all(len(seen) == 1 for seen in halves.values())
    held_out = [target for target, seen in halves.items() if seen == {"held-out"}]
    assert len(held_out) == 29 and len(halves) == 56


@needs_model
def test_hybrid_finds_every_keyword_style_target_keyword_mode_finds(golden: tuple[Index, Any]) -> None:
    index, embedder = golden
    keyword = found_in_top5(index, embedder, "keyword")
    assert len(keyword) >= 50  # of 56 keyword-style queries
    assert keyword - found_in_top5(index, embedder, "hybrid") == set()


@needs_model
def test_on_a_half_embedded_index_hybrid_finds_what_keyword_mode_finds(golden: tuple[Index, Any]) -> None:
    index, embedder = golden
    ids = index.read(lambda conn: [row[0] for row in conn.execute("SELECT id FROM events ORDER BY id")])
    with index.write() as conn:
        conn.executemany("INSERT INTO vector_stale (event_id) VALUES (?)", [(i,) for i in ids[::2]])
    try:
        keyword = found_in_top5(index, embedder, "keyword")
        hybrid = found_in_top5(index, embedder, "hybrid")
    finally:
        with index.write() as conn:
            conn.execute("DELETE FROM vector_stale")
    assert keyword - hybrid == set()
    assert len(hybrid & keyword) == len(keyword)
