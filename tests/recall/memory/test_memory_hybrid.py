"""Memories found by meaning (issue #24) and the memory ranking fixes of issue #18 (item 11).

Without a model: a matching memory's keyword score is above 0 in a store of a few memories (it
read "bm25 0.0: relevance 1.0"), the breakdown says what its parts are, and being recalled never
raises a score. With the offline model: every write path leaves a vector (or the background
indexer fills it in), ``auto`` ranks memories by hybrid once they are embedded, a memory without a
vector is never penalised, a memory found by meaning alone never outranks better history, and
listing memories or the session brief never loads the model. Both backends, unless marked.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.memory.backend.sqlite.fulltext import idf, rescored
from korg_bridge.recall.memory.records import Version, iso, parse_iso
from korg_bridge.recall.memory.rows import add_link, insert_version
from korg_bridge.recall.memory.scoring import HISTORY_MIN_SCORE, MEANING_ALONE_FLOOR, Meaning, semantic_floor
from korg_bridge.recall.memory.search import search_memories
from tests.helpers.cli import call_recall
from tests.helpers.memory import PgTarget, answer, opened, rows
from tests.helpers.models import MODEL_DIR, needs_model

SHIP = "when do we ship to prod?"
DEPLOYS = "Deploys to production happen on Thursdays after the standup."
OTHERS = (
    "The user prefers pnpm over npm for installing JavaScript dependencies.",
    "Ana Lima owns the checkout service and reviews all payment changes.",
    "Database migrations use Alembic and must be backwards compatible for one release.",
    "Product images are stored in S3 bucket shop-media and served via CloudFront.",
)
VECTORS_OF_HEADS = (
    "SELECT count(*) FROM memory m JOIN memory_vectors v ON v.row = m.rowid "
    "WHERE m.id = ? AND m.superseded_by IS NULL"
)


@pytest.fixture
def with_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KORG_RECALL_MODEL_DIR", MODEL_DIR)


def remember(capsys: pytest.CaptureFixture[str], text: str, kind: str = "project") -> dict[str, Any]:
    return answer(capsys, "remember", "--content", text, "--type", kind)


def recall_json(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    code, out, err = call_recall(capsys, "recall", "--json", *flags)
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    return found


def memory_ids(found: dict[str, Any]) -> list[str]:
    return [str(memory["id"]) for memory in found["memories"]]


def fill(store: Path | PgTarget) -> None:
    """What the background indexer does, in this process: embed every live memory lacking a vector."""
    from korg_bridge.recall.memory.backfill import run_memory

    assert run_memory(dict(os.environ)) == 0


# --- without a model ------------------------------------------------------------------------------


def test_a_memory_that_matches_in_a_store_of_two_scores_above_zero_and_says_what_its_score_is(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    remember(capsys, DEPLOYS)
    remember(capsys, "Deploys of the mobile app go through the App Store review.")
    code, out, _ = call_recall(capsys, "recall", "--query", "deploys production", "--kinds", "memory")
    assert code == 0
    first = re.findall(r'score="([\d.]+)" breakdown="([^"]*)"', out)[0]
    assert float(first[0]) > 0.1  # FTS5 weighs a word half the rows hold 0.000001: this read "bm25 0.0"
    assert re.fullmatch(r"keyword match \(bm25\) 0\.\d\d \* age decay 1\.00 = 0\.\d\d", first[1]), first[1]
    assert "relevance" not in out


def test_being_returned_never_raises_a_memorys_score(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    made = remember(capsys, "The staging database is reset every Sunday night.")
    seen = [recall_json(capsys, "--query", "staging database", "--kinds", "memory") for _ in range(4)]
    scores = {json.dumps(found["memories"][0]["breakdown"], sort_keys=True) for found in seen}
    assert len(scores) == 1, scores  # the use factor grew 1.0 -> 1.07 -> 1.11 -> 1.14 with each recall
    assert seen[0]["memories"][0]["id"] == made["id"]


@pytest.mark.no_store
def test_the_sqlite_score_is_okapi_bm25_with_a_weight_above_zero_for_every_matched_word(
    tmp_path: Path,
) -> None:
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore

    docs = ("alpha beta gamma", "alpha delta", "epsilon zeta eta theta")
    with SqliteStore(tmp_path / "memory.sqlite") as store, store.write() as tx:
        for number, body in enumerate(docs, 1):
            tx.execute(
                "INSERT INTO memory (rowid, id, version, scope, type, title, body, content_hash, state, actor, "
                "recorded_at) VALUES (?, ?, 1, 'user', 'note', '', ?, ?, 'live', 'agent', ?)",
                (number, f"m{number}", body, f"h{number}", iso(0)),
            )
            tx.text.index(tx, number, "", body, [])
        fts5 = tx.execute(
            'SELECT rowid, -bm25(memory_fts) FROM memory_fts WHERE memory_fts MATCH \'"alpha" OR "beta"\''
        ).fetchall()
        found = rescored(tx, ["alpha", "beta"], [(int(r), float(v)) for r, v in fts5])
    average = sum(len(d.split()) for d in docs) / len(docs)

    def part(term: str, row: int) -> float:
        words = docs[row - 1].split()
        if term not in words:
            return 0.0
        held = sum(term in d.split() for d in docs)
        norm = 1 * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * len(words) / average))
        return idf(len(docs), held) * norm

    assert sorted(found) == [1, 2]  # each matched word once: exactly Okapi BM25 with these weights
    for row in (1, 2):
        assert math.isclose(found[row], part("alpha", row) + part("beta", row), rel_tol=1e-9)
    assert found[2] > 0.1  # "alpha" is in two rows of three: FTS5's own weight for it is 0.000001
    assert idf(3, 2, fts5=True) == 1e-6 and idf(3, 2) > 0.1


def test_semantic_and_hybrid_without_a_model_name_the_fix(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    remember(capsys, DEPLOYS)
    for mode in ("semantic", "hybrid"):
        code, out, err = call_recall(capsys, "recall", "--query", SHIP, "--kinds", "memory", "--mode", mode)
        assert (code, out) == (7, "")
        assert err.startswith("korg-recall: error: ") and "model" in err and len(err.splitlines()) == 1


def test_weights_are_checked_in_a_memory_only_recall_too(
    capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    remember(capsys, DEPLOYS)
    code, _, err = call_recall(
        capsys,
        "recall",
        "--query",
        "deploys",
        "--kinds",
        "memory",
        "--weights",
        '{"bm25": 0, "vector": 0, "recency": 0}',
    )
    assert code == 2 and "at least one of the weights" in err


# --- with the model ---------------------------------------------------------------------------------


@needs_model
def test_a_question_in_other_words_finds_the_memory_by_meaning_in_auto_and_hybrid(
    capsys: pytest.CaptureFixture[str], project: Path, with_model: None
) -> None:
    made = remember(capsys, DEPLOYS)
    for text in OTHERS:
        remember(capsys, text)
    assert call_recall(capsys, "recall", "--query", SHIP, "--kinds", "memory", "--mode", "keyword")[1] == (
        "[recall · memory] no relevant memories.\n"
    )
    for mode in ("auto", "hybrid", "semantic"):
        found = recall_json(capsys, "--query", SHIP, "--kinds", "memory", "--mode", mode)
        assert found["memory_mode"] == ("hybrid" if mode == "auto" else mode)
        assert memory_ids(found)[0] == made["id"], (mode, found["memories"])
    hit = recall_json(capsys, "--query", SHIP, "--kinds", "memory")["memories"][0]
    assert set(hit["breakdown"]) == {"bm25", "vector", "recency", "pinned", "decay", "total"}
    assert hit["breakdown"]["bm25"] == 0 and hit["breakdown"]["vector"] > 0.3
    _, out, _ = call_recall(capsys, "recall", "--query", SHIP, "--kinds", "memory")
    assert re.search(
        r'breakdown="0\.1 \* keyword match \(bm25\) 0\.00 \+ 0\.9 \* meaning \(cosine\) 0\.\d\d', out
    )
    _, out, _ = call_recall(
        capsys, "recall", "--query", SHIP, "--kinds", "memory", "--weights", '{"recency": 0.5}'
    )
    assert re.search(
        r'breakdown="0\.1 \* keyword match \(bm25\) 0\.00 \+ 0\.9 \* meaning \(cosine\) 0\.\d\d \+ 0\.5 \* recency',
        out,
    )


@needs_model
def test_semantic_mode_finds_a_question_in_other_words_whose_cosine_is_below_history_s_floor(
    capsys: pytest.CaptureFixture[str], project: Path, with_model: None
) -> None:
    for text in (DEPLOYS, *OTHERS):
        remember(capsys, text)
    question = "can an old build still read the tables after a schema change"
    found = recall_json(capsys, "--query", question, "--kinds", "memory", "--mode", "semantic")
    first = found["memories"][0]  # the recall default min_score 0.30 is history's: it found nothing
    assert first["title"].startswith("Database migrations use Alembic")
    assert 0.15 <= first["breakdown"]["vector"] < 0.30 and first["breakdown"]["decay"] is None
    strict = recall_json(
        capsys, "--query", question, "--kinds", "memory", "--mode", "semantic", "--min-score", "0.5"
    )
    assert strict["memories"] == []  # a floor the call sets holds


@needs_model
def test_every_write_path_leaves_a_vector_on_the_version_it_writes(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, with_model: None
) -> None:
    made = remember(capsys, DEPLOYS)
    assert rows(store, VECTORS_OF_HEADS, [made["id"]]) == [(1,)]
    revised = answer(
        capsys, "revise", "--id", made["id"], "--content", "Deploys to production happen on Tuesdays."
    )
    assert revised["version"] == 2 and rows(store, VECTORS_OF_HEADS, [made["id"]]) == [(1,)]
    answer(capsys, "forget", "--id", made["id"])
    restored = answer(capsys, "restore", "--id", made["id"])
    assert restored["status"] == "restored" and rows(store, VECTORS_OF_HEADS, [made["id"]]) == [(1,)]
    same = rows(
        store,
        "SELECT count(DISTINCT v.vector) FROM memory m JOIN memory_vectors v ON v.row = m.rowid "
        "WHERE m.id = ? AND m.version >= 2",
        [made["id"]],
    )
    assert same == [(1,)]  # the restored text took the vector its lineage had


@needs_model
def test_imported_memories_are_embedded_behind_and_stats_shows_how_many_are(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    store: Path | PgTarget,
    with_model: None,
    tmp_path: Path,
) -> None:
    remember(capsys, "Warm-up so the store exists.", "note")
    mem0 = tmp_path / "mem0.json"
    mem0.write_text(
        json.dumps({"results": [{"id": str(n), "memory": text} for n, text in enumerate((DEPLOYS, *OTHERS))]})
    )
    imported = answer(capsys, "import", str(mem0))
    assert imported["created"] == 5
    stats = answer(capsys, "memories", "--stats")["vectors"]
    assert (stats["live"], stats["embedded"], stats["not_embedded"]) == (6, 1, 5)  # the import never waited
    found = recall_json(capsys, "--query", SHIP, "--kinds", "memory")
    assert found["memory_mode"] == "keyword" and found["memories"] == []
    _, out, _ = call_recall(capsys, "recall", "--query", SHIP, "--kinds", "memory")
    assert "[recall] memories searched by keyword: 1 of 6 embedded so far (16 %, hybrid from 90 %)." in out
    fill(store)
    assert answer(capsys, "memories", "--stats")["vectors"]["coverage"] == 1.0
    found = recall_json(capsys, "--query", SHIP, "--kinds", "memory")
    assert found["memory_mode"] == "hybrid" and found["memories"][0]["title"].startswith(
        "Deploys to production"
    )


@needs_model
def test_a_memory_without_a_vector_yet_keeps_the_place_its_keywords_give_it(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, with_model: None
) -> None:
    made = remember(capsys, "The Helm rollback command is helm rollback shop 0, within ten minutes.")
    for text in (DEPLOYS, *OTHERS, "Roll back a bad release by reverting the merge commit."):
        remember(capsys, text)
    with opened(store) as handle, handle.write() as tx:
        tx.execute(
            "DELETE FROM memory_vectors WHERE row IN (SELECT rowid FROM memory WHERE id = ?)", (made["id"],)
        )
    found = recall_json(capsys, "--query", "helm rollback", "--kinds", "memory", "--mode", "hybrid")
    first = found["memories"][0]
    assert first["id"] == made["id"]
    assert first["breakdown"]["vector"] is None and first["breakdown"]["vector_imputed"] > 0


@needs_model
def test_a_memory_found_by_meaning_alone_never_outranks_matching_history(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    with_model: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = tmp_path / "ledgers" / "s-1.jsonl"
    ledger.parent.mkdir()
    events = [
        {"seq": n, "source_agent": "agent:korgex@0.2.2", "tool_name": "user_prompt", "success": True,
         "args": {"prompt": text}, "result": {}, "timestamp": iso(time.time() - n * 86_400)}
        for n, text in enumerate(("when do we ship to prod? we ship to prod on Thursdays", "lunch menu"), 1)
    ]  # fmt: skip
    ledger.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(ledger))
    monkeypatch.setenv("KORG_RECALL_INDEX", str(tmp_path / "cache" / "index.sqlite"))
    remember(capsys, DEPLOYS)
    assert call_recall(capsys, "index")[0] == 0
    found = recall_json(capsys, "--query", SHIP, "--mode", "hybrid")
    memory, history = found["memories"][0], found["hits"][0]
    assert memory["breakdown"]["bm25"] == 0 and memory["score"] < history["score"]
    assert memory["below_history"] is True
    _, out, _ = call_recall(capsys, "recall", "--query", SHIP, "--mode", "hybrid")
    lines = out.splitlines()
    assert re.fullmatch(r"\[recall · hybrid\] 1 memory, \d history match\(es\):", lines[0])
    assert lines[1].startswith("  · seq=1 ")  # the history hit first, the memory after the history
    assert lines[-3].startswith("<memory ") and lines[-1] == "</memory>"


@needs_model
@pytest.mark.sqlite_only("the mirror is a SQLite store's folder")
def test_a_hand_edit_is_found_through_its_lineage_s_vector_until_the_indexer_embeds_it(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path, with_model: None
) -> None:
    made = remember(capsys, "The standup is at 9:30.")
    for text in OTHERS:
        remember(capsys, text)
    mirror = next((store.parent / "memories").rglob(f"*{made['id']}*.md"))
    mirror.write_text(
        mirror.read_text(encoding="utf-8").replace("9:30", "10:00 in the small room"), encoding="utf-8"
    )
    found = recall_json(capsys, "--query", "standup room", "--kinds", "memory", "--mode", "hybrid")
    first = found["memories"][0]
    assert first["id"] == made["id"] and first["version"] == 2 and first["breakdown"]["vector"] is not None
    # the lineage's older version has a vector, so it ranks by meaning; its new head gets one behind
    assert rows(store, VECTORS_OF_HEADS, [made["id"]]) == [(0,)]
    fill(store)
    assert rows(store, VECTORS_OF_HEADS, [made["id"]]) == [(1,)]


@needs_model
def test_listing_memories_and_the_session_brief_never_load_the_model(project: Path, with_model: None) -> None:
    probe = (
        "import sys\n"
        "from korg_bridge.recall.cli import app as cli\n"
        "code = cli.main(sys.argv[1:])\n"
        "heavy = sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers') if m in sys.modules)\n"
        "print('HEAVY', ','.join(heavy), file=sys.stderr)\n"
        "raise SystemExit(code)\n"
    )

    def heavy(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL,
            env=dict(os.environ), cwd=project, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return [line for line in done.stderr.splitlines() if line.startswith("HEAVY")][-1]

    assert (
        heavy("remember", "--content", DEPLOYS, "--type", "project") == "HEAVY numpy,onnxruntime,tokenizers"
    )
    assert heavy("memories") == "HEAVY "
    assert heavy("context") == "HEAVY "
    assert heavy("recall", "--query", "deploys", "--kinds", "memory", "--mode", "keyword") == "HEAVY "


@needs_model
def test_the_background_indexer_embeds_the_memories_a_recall_found_without_a_vector(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    store: Path | PgTarget,
    with_model: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from korg_bridge.recall.memory.backfill import memory_lock_path
    from korg_bridge.recall.semantic.indexer import wait_idle

    remember(capsys, "Warm-up so the store exists.", "note")
    mem0 = tmp_path / "mem0.json"
    mem0.write_text(json.dumps([{"id": str(n), "memory": text} for n, text in enumerate((DEPLOYS, *OTHERS))]))
    answer(capsys, "import", str(mem0))  # background off: nothing started
    monkeypatch.setenv("KORG_RECALL_BACKGROUND", "1")
    found = recall_json(capsys, "--query", SHIP, "--kinds", "memory")
    assert found["memory_mode"] == "keyword"
    lock = memory_lock_path(dict(os.environ))
    assert wait_idle(lock, 120.0, lock_file=lock)
    assert answer(capsys, "memories", "--stats")["vectors"]["not_embedded"] == 0
    assert "embedded" in lock.with_suffix(".log").read_text(encoding="utf-8")


@needs_model
@pytest.mark.postgres_only
def test_a_tenants_recall_by_meaning_sees_its_own_memories_only(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    pg_roles: Any,
    with_model: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KORG_RECALL_STORE", pg_roles.app_url())
    mine = uuid.uuid4().hex[:12]
    monkeypatch.setenv("KORG_RECALL_TENANT", f"t-other-{mine}")
    remember(capsys, "Production deploys happen on Fridays at noon for the other team.")
    monkeypatch.setenv("KORG_RECALL_TENANT", f"t-mine-{mine}")
    made = remember(capsys, DEPLOYS)
    found = recall_json(
        capsys, "--query", SHIP, "--kinds", "memory", "--mode", "semantic", "--min-score", "0"
    )
    assert memory_ids(found) == [made["id"]]


@pytest.mark.no_store
def test_the_ranking_suite_has_its_questions_and_a_split_by_memory_fixed_in_the_file() -> None:
    import hashlib

    from tests.helpers.paths import REPO

    suite = json.loads((REPO / "bench" / "golden" / "memories.json").read_text(encoding="utf-8"))
    keys = {memory["key"]: memory["half"] for memory in suite["memories"]}
    keys.update({update["key"]: update["half"] for update in suite["updates"]})
    assert len(suite["memories"]) >= 150 and len(keys) == len(suite["memories"]) + len(suite["updates"])
    kinds = [question["kind"] for question in suite["questions"]]
    assert kinds.count("paraphrase") >= 300 and kinds.count("keyword") >= 150
    for key, half in keys.items():  # the half is the key's, never chosen by hand
        assert half == ("tune" if hashlib.sha256(key.encode()).digest()[0] % 2 == 0 else "held-out"), key
    assert all(keys[question["target"]] == question["half"] for question in suite["questions"])


@needs_model
@pytest.mark.sqlite_only("Claude Code's files are read into one person's store only")
def test_a_memory_taken_from_claude_code_s_files_is_embedded_behind_then_found_by_meaning(
    capsys: pytest.CaptureFixture[str],
    project: Path,
    store: Path,
    with_model: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    remember(capsys, "Warm-up so the store exists.", "note")
    (project / "CLAUDE.md").write_text(DEPLOYS + "\n", encoding="utf-8")
    found = recall_json(capsys, "--query", SHIP, "--kinds", "memory")
    assert found["memory_mode"] == "keyword"  # taken in before the search, without a vector: 1 of 2
    fill(store)
    found = recall_json(capsys, "--query", SHIP, "--kinds", "memory")
    first = found["memories"][0]
    assert found["memory_mode"] == "hybrid" and first["source_kind"] == "instructions"
    assert first["breakdown"]["vector"] > 0.3


# --- ranking by meaning: what the pipeline adds to the cosine (issue #24's quality goal) ---------
#
# Vectors are made by hand here (unit vectors of a small dimension, stored as a model's would be):
# what is tested is how the pipeline ranks given cosines, on both backends, without the model.

DIM = 8
MODEL = "test-model"
SHOP = "project:/src/shop"
NOW = parse_iso("2026-06-01T12:00:00Z")
DAY = 86_400.0


def unit(*parts: tuple[int, float]) -> Any:
    """A unit vector of :data:`DIM` with these (axis, value) parts; the first axis takes the rest."""
    import numpy as np

    vector = np.zeros(DIM, dtype=np.float32)
    for axis, value in parts:
        vector[axis] = value
    rest = 1.0 - float(np.dot(vector, vector))
    vector[7] = math.sqrt(max(0.0, rest))  # axis 7 is nobody's: it only makes the length 1
    return vector


def put(tx: Any, memory_id: str, body: str, vector: Any, *, days_ago: float) -> Version:
    """A version as a write leaves it: its row, its full-text entry and its vector."""
    version = insert_version(
        tx,
        Version(
            id=memory_id, version=1, scope=SHOP, type="project", title=body[:40], body=body,
            content_hash=memory_id, actor="agent", recorded_at=iso(NOW - days_ago * DAY),
        ),
    )  # fmt: skip
    assert version.rowid is not None
    tx.vectors.put(tx, version.rowid, MODEL, DIM, vector)
    return version


def by_meaning(tx: Any, query: str, mode: str, **fields: Any) -> list[str]:
    meaning = Meaning(mode, unit((0, 1.0)), MODEL, DIM, **fields)
    return [hit.version.id for hit in search_memories(tx, query, scopes=[SHOP], now=NOW, meaning=meaning)]


@pytest.mark.no_store
def test_memories_take_their_own_noise_floor_in_semantic_mode_unless_the_call_sets_one() -> None:
    assert semantic_floor(None) == semantic_floor(0.30) == MEANING_ALONE_FLOOR == 0.15  # 0.30 is history's
    assert semantic_floor(0.5) == 0.5 and semantic_floor(0.0) == 0.0  # a call's own floor holds
    from korg_bridge.recall.cli.schemas import RECALL_SCHEMA
    from korg_bridge.recall.semantic.rank import DEFAULT_MIN_SCORE

    assert HISTORY_MIN_SCORE == DEFAULT_MIN_SCORE == RECALL_SCHEMA["properties"]["min_score"]["default"]


def test_by_meaning_age_does_not_lower_a_memory_closer_to_the_question(store: Path | PgTarget) -> None:
    with opened(store) as handle, handle.write() as tx:
        put(tx, "maaaaaaaaaa", "Release trains leave on Thursdays.", unit((0, 0.60)), days_ago=300)
        put(tx, "mbbbbbbbbbb", "The office plants are watered daily.", unit((0, 0.55), (1, 0.5)), days_ago=1)
        for mode in ("semantic", "hybrid"):
            meaning = Meaning(mode, unit((0, 1.0)), MODEL, DIM)
            hits = search_memories(tx, "when do we ship", scopes=[SHOP], now=NOW, meaning=meaning)
            # a 300-day-old memory lost a sixth of its score to age decay, and with it its place
            assert [hit.version.id for hit in hits] == ["maaaaaaaaaa", "mbbbbbbbbbb"], mode
            assert hits[0].breakdown["decay"] is None and "decay" not in hits[0].how
            assert math.isclose(
                hits[0].breakdown["total"] or 0, (0.6 if mode == "semantic" else 0.9 * 0.6), abs_tol=1e-3
            )
        hits = search_memories(tx, "release trains", scopes=[SHOP], now=NOW)
        assert (
            hits[0].breakdown["decay"] is not None and hits[0].breakdown["decay"] < 0.85
        )  # by keyword it still counts


def test_semantic_mode_ranks_memories_above_the_noise_floor_by_default(store: Path | PgTarget) -> None:
    with opened(store) as handle, handle.write() as tx:
        put(tx, "maaaaaaaaaa", "Pull requests stay under 400 lines.", unit((0, 0.26)), days_ago=5)
        put(tx, "mbbbbbbbbbb", "The office plants are watered daily.", unit((0, 0.05), (1, 0.9)), days_ago=5)
        assert by_meaning(tx, "max size of a merge request", "semantic") == ["maaaaaaaaaa"]  # 0.05 is noise
        assert (
            by_meaning(tx, "max size of a merge request", "semantic", min_score=0.3) == []
        )  # a call's own floor


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_by_meaning_two_memories_sharing_a_query_word_by_chance_are_no_tie(
    store: Path | PgTarget, mode: str
) -> None:
    with opened(store) as handle, handle.write() as tx:
        # both hold "team" and nothing else of the query; the older one is the closer in meaning
        put(
            tx,
            "maaaaaaaaaa",
            "Ideas from sales land on the Linear board of the team.",
            unit((0, 0.9), (1, 0.43)),
            days_ago=90,
        )
        put(
            tx,
            "mbbbbbbbbbb",
            "The team office is on the third floor.",
            unit((0, 0.7), (1, -0.71)),
            days_ago=2,
        )
        # the newer one was put first: the two scores lie within the tie band, and the tie rule
        # read the shared word as two statements of one fact, though the two are 0.32 alike
        assert by_meaning(tx, "where do team wishes go", mode) == ["maaaaaaaaaa", "mbbbbbbbbbb"]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_by_meaning_two_statements_of_one_fact_still_show_the_newest_first(
    store: Path | PgTarget, mode: str
) -> None:
    with opened(store) as handle, handle.write() as tx:
        put(
            tx,
            "maaaaaaaaaa",
            "The team office is on the third floor.",
            unit((0, 0.9), (1, 0.43)),
            days_ago=90,
        )
        put(
            tx,
            "mbbbbbbbbbb",
            "The team office moved to the fifth floor.",
            unit((0, 0.7), (1, 0.71)),
            days_ago=2,
        )
        assert by_meaning(tx, "where does the team sit", mode) == ["mbbbbbbbbbb", "maaaaaaaaaa"]  # 0.94 alike


def test_a_similar_link_lifts_the_newer_memory_to_the_older_ones_place_instead_of_burying_the_older(
    store: Path | PgTarget,
) -> None:
    with opened(store) as handle, handle.write() as tx:
        put(tx, "maaaaaaaaaa", "Kestrel port 8080.", unit((0, 1.0)), days_ago=60)
        put(tx, "mcccccccccc", "Port 9090 is free.", unit((1, 1.0)), days_ago=10)
        put(
            tx, "mbbbbbbbbbb",
            "The kestrel service moved: ask ops where it listens these days, it changed last week with the rest.",
            unit((2, 1.0)), days_ago=1,
        )  # fmt: skip
        add_link(tx, "mbbbbbbbbbb", "maaaaaaaaaa", "similar", iso(NOW))
        hits = search_memories(tx, "kestrel port", scopes=[SHOP], now=NOW)
        # the older one matched best: it used to be moved below the newer one, under "Port 9090 is free."
        assert [hit.version.id for hit in hits] == ["mbbbbbbbbbb", "maaaaaaaaaa", "mcccccccccc"]
        assert hits[1].older_than == "mbbbbbbbbbb"


@needs_model
def test_a_revise_that_sets_only_the_title_gives_the_new_version_a_vector_of_its_new_text(
    capsys: pytest.CaptureFixture[str], project: Path, store: Path | PgTarget, with_model: None
) -> None:
    made = remember(capsys, DEPLOYS)
    answer(capsys, "revise", "--id", made["id"], "--set", '{"title": "Release days of the shop"}')
    distinct = rows(
        store,
        "SELECT count(*), count(DISTINCT v.vector) FROM memory m JOIN memory_vectors v ON v.row = m.rowid "
        "WHERE m.id = ?",
        [made["id"]],
    )
    assert distinct == [(2, 2)]  # the title is embedded with the body: it took the old title's vector
