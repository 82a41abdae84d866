"""Semantic and hybrid recall through the korg-recall CLI, with the real offline model.

The model tests run when ``KORG_RECALL_MODEL_DIR`` names a model directory
(CI builds one with ``.ci/build_model_dir.py``; the variable is read at import,
before the autouse fixture tidies the environment). The tests of what happens
*without* a model, and of cold-start discipline, run everywhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.errors import UsageError
from korg_bridge.recall.cli import app as cli
from korg_bridge.recall.semantic.rank import SemanticRanker, Weights, parse_weights
from tests.helpers.cli import call_recall
from tests.helpers.models import (
    HAVE_MODEL,
    MODEL_DIR,
    lay_out_hub_cache,
    needs_model,
    require_semantic_backend,
)
from tests.helpers.paths import REPO

HEAVY = ("numpy", "fastembed", "onnxruntime", "tokenizers")

TARGET = "postgres container is not ready when migrations start"
PARAPHRASE = "the database wasn't up when CI started"
DISTRACTORS = [
    # Each shares a word with the paraphrase, so keyword search ranks them with or above the target.
    "rename the database column user_name to username",
    "started the frontend dev server on port 3000",
    "up the font size on the settings page",
    "database backup script for the nightly cron",
    "Fix the rate limiter in the API gateway",
    "update the README typo in the install section",
    "write the changelog for release 2.3",
    "add a retry with backoff to the HTTP client",
]


def iso(days_ago: float) -> str:
    moment = datetime.fromtimestamp(time.time() - days_ago * 86400, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def prompt(seq: int, text: str, *, days_ago: float | None = 5.0, session: str = "s1") -> str:
    record: dict[str, Any] = {
        "seq": seq,
        "source_agent": "agent:test",
        "session_id": session,
        "tool_name": "user_prompt",
        "args": {"prompt": text},
    }
    if days_ago is not None:
        record["timestamp"] = iso(days_ago)
    return json.dumps(record) + "\n"


@pytest.fixture
def ledgers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "ledgers"
    folder.mkdir()
    lines = [prompt(1, TARGET)] + [prompt(n + 2, text) for n, text in enumerate(DISTRACTORS)]
    (folder / "history.jsonl").write_text("".join(lines), encoding="utf-8")
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(folder))
    monkeypatch.setenv("KORG_RECALL_INDEX", str(tmp_path / "index.sqlite"))
    return folder


@pytest.fixture
def embedded(ledgers: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The ledgers, indexed and embedded in the foreground by `korg-recall index`."""
    code, _, err = call_recall(capsys, "index")
    assert code == 0, err
    return ledgers


@pytest.fixture
def no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    empty = tmp_path / "no-model"
    empty.mkdir()
    monkeypatch.setenv("KORG_RECALL_MODEL_DIR", str(empty))
    return empty


def recall_json(capsys: pytest.CaptureFixture[str], query: str, *extra: str) -> dict[str, Any]:
    code, out, err = call_recall(capsys, "recall", "--query", query, "--json", "--top-n", "10", *extra)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def snippets(result: dict[str, Any]) -> list[str]:
    return [hit["snippet"] for hit in result["hits"]]


# --- without a model (run everywhere) ----------------------------------------------------------


def test_auto_is_keyword_when_the_model_directory_is_empty(
    ledgers: Path, no_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = call_recall(capsys, "recall", "--query", "database")
    assert code == 0
    assert out.startswith("[recall · keyword] ")


def test_auto_is_keyword_when_no_model_is_configured(
    ledgers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)  # and HOME's cache is empty
    assert cli.resolve_mode("auto") == "keyword"
    result = recall_json(capsys, "database")
    assert result["mode"] == "keyword"
    assert "embedded_now" not in result
    for hit in result["hits"]:
        assert hit["breakdown"] == {
            "bm25": hit["score"],
            "vector": None,
            "recency": None,
            "total": hit["score"],
        }


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_explicit_semantic_without_a_model_exits_7_naming_the_fix(
    ledgers: Path, no_model: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    require_semantic_backend()  # without it the message names the extra, not the folder
    code, out, err = call_recall(capsys, "recall", "--query", "database", "--mode", mode)
    assert (code, out) == (7, "")
    assert err.count("\n") == 1
    assert f"KORG_RECALL_MODEL_DIR={no_model} holds no usable model" in err
    assert "korg-recall model pull" in err


def test_without_the_extra_the_fix_is_install_then_pull(
    ledgers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what an install without [semantic] looks like
    code, _, err = call_recall(capsys, "recall", "--query", "database", "--mode", "semantic")
    assert code == 7
    assert "run `pip install 'korg-bridge[semantic]' && korg-recall model pull`" in err


def test_index_embed_without_a_model_exits_7(
    ledgers: Path, no_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = call_recall(capsys, "index", "--embed")
    assert code == 7
    assert "korg-recall model pull" in err


@pytest.mark.parametrize(
    "weights",
    [
        '{"bm25": -0.1}',
        '{"tau_days": 0}',
        '{"recency": "high"}',
        '{"speed": 1}',
        '{"bm25": 0, "vector": 0, "recency": 0}',
        "[0.5, 0.5]",
    ],
)
def test_bad_weights_are_usage_errors(
    ledgers: Path, no_model: Path, weights: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call_recall(capsys, "recall", "--query", "database", "--weights", weights)
    assert (code, out) == (2, "")
    assert "weight" in err


def test_weights_parse_to_defaults_overridden_per_key() -> None:
    assert parse_weights(None) == Weights(0.45, 0.45, 0.10, 30.0)
    assert parse_weights({"recency": 0, "tau_days": 7}) == Weights(0.45, 0.45, 0.0, 7.0)
    for bad in ({"bm25": float("nan")}, {"vector": True}, {"tau_days": -1}):
        with pytest.raises(UsageError):
            parse_weights(bad)


def test_the_bm25_of_a_vector_candidate_is_the_value_a_full_keyword_ranking_gives_it(
    ledgers: Path, tmp_path: Path
) -> None:
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.history.query.fts import Filters, keyword_sql, quote_fts
    from korg_bridge.recall.semantic.rank import LISTED_MAX, _bm25_of, bm25_of_sql

    match = quote_fts("database started")
    sql = bm25_of_sql(2)
    assert sql.endswith("WHERE events_fts MATCH ? AND rowid IN (?, ?)")
    with Index(tmp_path / "index.sqlite") as index:
        index.refresh([ledgers])
        exact = index.read(lambda conn: dict(conn.execute(sql, [match, 1, 6]).fetchall()))
        full_sql, params = keyword_sql(match, Filters(sources=None), limit=100)
        ranked = index.read(lambda conn: dict(conn.execute(full_sql, params).fetchall()))
        # Past LISTED_MAX rowids, one pass over the span: the same values for the rows asked about.
        many = [*range(1, LISTED_MAX + 2), 6]
        spanned = _bm25_of(index, match, many)
        listed = {
            i: v for i in many for i, v in index.read(lambda c, i=i: c.execute(sql, [match, i, i]).fetchall())
        }
    assert set(exact) == {1}  # event 6 matches no term: absent, so its BM25 counts as 0
    assert exact[1] == pytest.approx(ranked[1])
    assert spanned == pytest.approx(listed) and 6 not in spanned and set(spanned) <= set(many)
    assert bm25_of_sql(LISTED_MAX + 1).endswith("rowid BETWEEN ? AND ?")


def test_the_all_terms_check_quotes_each_term_so_no_operator_survives() -> None:
    from korg_bridge.recall.semantic.rank import complete_sql

    sql, match = complete_sql(["not", 'a"b', "x*", "col:val"], 2)
    assert match == '"not" AND "a""b" AND "x*" AND "col:val"'
    assert sql.endswith("WHERE events_fts MATCH ? AND rowid IN (?, ?)")
    assert complete_sql(["a"], 50)[0].endswith("WHERE events_fts MATCH ? AND rowid BETWEEN ? AND ?")


def test_ranking_modules_never_import_the_search_dispatcher() -> None:
    import ast

    for name in (
        "semantic/rank",
        "history/query/keyword",
        "history/query/scores",
        "semantic/vectors",
        "semantic/embedpass",
    ):
        tree = ast.parse((REPO / "korg_bridge" / "recall" / f"{name}.py").read_text(encoding="utf-8"))
        imported = {
            node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        } | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert "korg_bridge.recall.history.query.search" not in imported, name


# --- cold start --------------------------------------------------------------------------------

_PROBE = (
    "import sys\n"
    "from korg_bridge.recall.cli import app as cli\n"
    "code = cli.main(sys.argv[1:])\n"
    f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def heavy_after(argv: list[str], env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = [row for row in done.stderr.splitlines() if row.startswith("HEAVY ")][-1]
    loaded: list[str] = json.loads(line[len("HEAVY ") :].replace("'", '"'))
    return loaded


@pytest.mark.parametrize("mode", ["keyword", "substring"])
def test_keyword_and_substring_recall_never_import_the_embedding_stack(ledgers: Path, mode: str) -> None:
    env = dict(os.environ)
    if HAVE_MODEL:
        env["KORG_RECALL_MODEL_DIR"] = MODEL_DIR  # a model on disk must not tempt them
    assert heavy_after(["recall", "--query", "database", "--mode", mode], env) == []


def test_auto_without_a_model_imports_nothing_heavy(ledgers: Path, no_model: Path) -> None:
    assert heavy_after(["recall", "--query", "database"], dict(os.environ)) == []


@needs_model
def test_auto_below_full_coverage_searches_by_keyword_without_importing_the_model(ledgers: Path) -> None:
    env = {**os.environ, "KORG_RECALL_MODEL_DIR": MODEL_DIR}
    assert heavy_after(["recall", "--query", "database"], env) == []


@needs_model
def test_auto_checks_for_the_model_without_importing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    code = (
        "import sys\n"
        "from korg_bridge.recall.cli import app as cli\n"
        "print(cli.resolve_mode('auto'), sorted(m for m in sys.argv[1:] if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *HEAVY],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "KORG_RECALL_MODEL_DIR": MODEL_DIR},
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "hybrid []"


# --- with the model ----------------------------------------------------------------------------


@needs_model
def test_auto_uses_hybrid_once_the_events_are_embedded(
    embedded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = call_recall(capsys, "recall", "--query", PARAPHRASE)
    assert code == 0
    assert out.startswith("[recall · hybrid] ")


@needs_model
def test_auto_searches_by_keyword_with_a_note_until_most_events_are_embedded(
    ledgers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = call_recall(capsys, "recall", "--query", PARAPHRASE)
    assert code == 0
    assert out.startswith("[recall · keyword] ")
    assert out.splitlines()[-1] == (
        "[recall] searched by keyword: 0 of 9 events embedded so far (0 %, hybrid from 90 %); "
        "run `korg-recall index` to embed them."
    )
    result = recall_json(capsys, PARAPHRASE)
    assert result["mode"] == "keyword"
    assert result["embedding"] == {
        "model": "sentence-transformers/all-MiniLM-L6-v2-int8",
        "events": 9,
        "embedded": 0,
        "not_embedded": 9,
        "coverage": 0.0,
        "indexer": "off",
    }


@needs_model
def test_a_paraphrase_finds_the_event_keyword_search_ranks_low(
    embedded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keyword = snippets(recall_json(capsys, PARAPHRASE, "--mode", "keyword"))
    assert keyword[0] != TARGET  # it shares only "start" with the query
    # The CI model (int8 MiniLM) scores this paraphrase at about 0.27: below the 0.30 default.
    semantic = recall_json(capsys, PARAPHRASE, "--mode", "semantic", "--min-score", "0.2")
    assert snippets(semantic)[0] == TARGET
    hybrid = recall_json(capsys, PARAPHRASE, "--mode", "hybrid")
    assert snippets(hybrid)[0] == TARGET


@needs_model
def test_a_query_embeds_only_itself_and_index_embeds_only_what_is_new(
    ledgers: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.semantic.embedpass import embedded_by

    for mode in ("semantic", "hybrid"):
        result = recall_json(capsys, PARAPHRASE, "--mode", mode)
        assert result["embedding"]["embedded"] == 0 and result["embedding"]["not_embedded"] == 9
        assert result["hits"] == [] if mode == "semantic" else result["hits"]  # hybrid: keywords alone
    code, out, _ = call_recall(capsys, "index")
    assert code == 0 and json.loads(out)["embedding"]["embedded"] == 9
    code, out, _ = call_recall(capsys, "stats")
    described = json.loads(out)
    assert described["vectors"] == {described["embedding"]["model"]: 9}
    assert described["embedding"]["coverage"] == 1.0
    with (ledgers / "history.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(prompt(20, "one more prompt about flaky tests"))
    assert recall_json(capsys, "flaky", "--mode", "hybrid")["embedding"]["not_embedded"] == 1
    code, out, _ = call_recall(capsys, "index")
    assert json.loads(out)["embedding"]["embedded"] == 1  # only the new event
    with Index(tmp_path / "index.sqlite") as index:
        assert index.read(embedded_by) == {"index": 10}  # nothing else ever embedded an event


@needs_model
def test_min_score_filters_semantic_hits(embedded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loose = recall_json(capsys, PARAPHRASE, "--mode", "semantic", "--min-score", "0.15")
    strict = recall_json(capsys, PARAPHRASE, "--mode", "semantic", "--min-score", "0.25")
    assert len(strict["hits"]) < len(loose["hits"])
    assert all(hit["breakdown"]["vector"] >= 0.25 for hit in strict["hits"])
    assert all(hit["score"] == hit["breakdown"]["vector"] for hit in loose["hits"])
    none = recall_json(capsys, PARAPHRASE, "--mode", "semantic", "--min-score", "0.99")
    assert none["hits"] == []


@needs_model
@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_filters_restrict_the_vector_candidates(
    embedded: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert recall_json(capsys, PARAPHRASE, "--mode", mode, "--min-score", "0.2")["hits"]
    assert (
        recall_json(capsys, PARAPHRASE, "--mode", mode, "--min-score", "0.2", "--since", "1d")["hits"] == []
    )
    assert recall_json(capsys, PARAPHRASE, "--mode", mode, "--tool-filter", "Bash")["hits"] == []


@needs_model
def test_json_hits_carry_a_breakdown_that_adds_up(embedded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = recall_json(capsys, PARAPHRASE, "--mode", "hybrid")
    assert result["weights"] == {"bm25": 0.45, "vector": 0.45, "recency": 0.1, "tau_days": 30.0}
    for hit in result["hits"]:
        parts = hit["breakdown"]
        assert set(parts) == {"bm25", "vector", "recency", "total"}
        expected = 0.45 * parts["bm25"] + 0.45 * parts["vector"] + 0.1 * parts["recency"]
        assert parts["total"] == pytest.approx(expected, abs=2e-4)
        assert hit["score"] == parts["total"]
        assert parts["recency"] == pytest.approx(0.846, abs=0.01)  # five days old, tau 30 days
    totals = [hit["score"] for hit in result["hits"]]
    assert totals == sorted(totals, reverse=True)


@needs_model
def test_weights_override_the_hybrid_mix(embedded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bm25_only = recall_json(
        capsys, PARAPHRASE, "--mode", "hybrid", "--weights", '{"vector": 0, "recency": 0}'
    )
    assert bm25_only["weights"]["vector"] == 0
    assert all(
        hit["score"] == pytest.approx(0.45 * hit["breakdown"]["bm25"], abs=2e-4) for hit in bm25_only["hits"]
    )
    vector_only = recall_json(
        capsys, PARAPHRASE, "--mode", "hybrid", "--weights", '{"bm25": 0, "recency": 0, "vector": 1}'
    )
    assert snippets(vector_only)[0] == TARGET
    assert vector_only["hits"][0]["score"] == vector_only["hits"][0]["breakdown"]["vector"]


@needs_model
def test_recency_lifts_the_recent_of_two_equal_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "recency"
    folder.mkdir()
    (folder / "h.jsonl").write_text(
        prompt(1, "deploy the payments service", days_ago=1, session="new")
        + prompt(2, "deploy the payments service", days_ago=300, session="old")
        + prompt(3, "an event without a timestamp about payments", days_ago=None, session="old"),
        encoding="utf-8",
    )
    monkeypatch.setenv("KORG_RECALL_LEDGER", str(folder))
    monkeypatch.setenv("KORG_RECALL_INDEX", str(tmp_path / "recency.sqlite"))
    assert call_recall(capsys, "index")[0] == 0
    ranked = recall_json(capsys, "deploy payments", "--mode", "hybrid")["hits"]
    assert [hit["session"] for hit in ranked[:2]] == ["new", "old"]
    assert ranked[0]["breakdown"]["recency"] > 0.9 > 0.01 > ranked[1]["breakdown"]["recency"]
    undated = next(hit for hit in ranked if "timestamp" in hit["snippet"])
    assert undated["breakdown"]["recency"] == 0
    flat = recall_json(capsys, "deploy payments", "--mode", "hybrid", "--weights", '{"recency": 0}')["hits"]
    assert flat[0]["score"] == flat[1]["score"]


@needs_model
def test_show_with_a_query_explains_each_event(embedded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ref = recall_json(capsys, PARAPHRASE, "--mode", "hybrid", "--min-score", "0.2")["hits"][0]["ref"]
    code, out, _ = call_recall(capsys, "show", "--ref", ref, "--query", PARAPHRASE)
    assert code == 0
    shown = json.loads(out)
    assert shown["model"] and shown["query"] == PARAPHRASE
    [event] = shown["events"]
    assert event["text"] == TARGET
    assert event["breakdown"]["vector"] == pytest.approx(0.27, abs=0.03)
    code, out, _ = call_recall(capsys, "show", "--ref", ref)
    assert "breakdown" not in json.loads(out)["events"][0]


@needs_model
def test_index_embeds_in_the_foreground_with_a_one_line_summary(
    ledgers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call_recall(capsys, "index")
    assert code == 0
    report = json.loads(out)
    assert report["events_added"] == 9
    assert report["embedding"]["embedded"] == 9
    assert report["embedding"]["not_embedded"] == 0
    assert report["embedding"]["events_per_s"] > 0
    assert re.fullmatch(
        r"korg-recall: embedded 9 event\(s\) in [\d.]+ s \([\d,.]+ events/s\); 0 left\.\n", err
    )
    assert recall_json(capsys, PARAPHRASE, "--mode", "semantic")["embedding"]["coverage"] == 1.0


@needs_model
def test_index_with_no_embed_leaves_the_vectors_to_the_background(
    ledgers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call_recall(capsys, "index", "--no-embed")
    assert (code, err) == (0, "")
    assert json.loads(out)["embedding"]["not_embedded"] == 9
    assert json.loads(out)["embedding"]["indexer"] == "off"  # KORG_RECALL_BACKGROUND=0 in tests
    code, _, err = call_recall(capsys, "index", "--embed", "--no-embed")
    assert code == 2 and "contradict" in err


@needs_model
def test_hybrid_ranks_events_without_vectors_by_keywords_never_below_them(
    ledgers: Path, tmp_path: Path
) -> None:
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.history.query.search import search
    from korg_bridge.recall.semantic.embed import load_embedder
    from korg_bridge.recall.semantic.embedpass import embed_pending

    embedder = load_embedder({"KORG_RECALL_MODEL_DIR": MODEL_DIR})
    with Index(tmp_path / "index.sqlite") as index:
        index.refresh([ledgers])
        target = index.read(
            lambda conn: conn.execute("SELECT id FROM events WHERE text LIKE 'database backup%'").fetchone()[
                0
            ]
        )
        embed_pending(index, embedder)
        # Everything but the target has a vector (its own is masked as stale, as after a late result).
        with index.write() as conn:
            conn.execute("INSERT INTO vector_stale (event_id) VALUES (?)", (target,))
        hits = search(
            index,
            "database backup",
            mode="hybrid",
            top_n=3,
            min_score=0.3,
            sources=[ledgers],
            ranker=SemanticRanker(embedder),
        )
    assert hits[0].snippet == "database backup script for the nightly cron"
    breakdown = hits[0].breakdown
    assert breakdown is not None and breakdown["vector"] is None
    assert breakdown["vector_imputed"] == max(
        hit.breakdown["vector"] or 0 for hit in hits[1:] if hit.breakdown
    )


@needs_model
def test_model_pull_records_a_cached_model_and_reports_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = lay_out_hub_cache(tmp_path / "cache" / "korg-recall" / "models")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR")
    code, out, err = call_recall(capsys, "model", "pull", "--model", "sentence-transformers/all-MiniLM-L6-v2")
    assert code == 0, err
    assert json.loads(out) == {"model": "sentence-transformers/all-MiniLM-L6-v2", "path": str(snapshot)}
