"""Semantic and hybrid recall through the korg-recall CLI, with the real offline model.

The model tests run when ``KORG_RECALL_MODEL_DIR`` names a model directory
(CI builds one with ``.ci/build_model_dir.py``; the variable is read at import,
before the autouse fixture tidies the environment). The tests of what happens
*without* a model, and of cold-start discipline, run everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from _models import HAVE_MODEL, MODEL_DIR, lay_out_hub_cache, needs_model

from korg_bridge.errors import UsageError
from korg_bridge.recall import cli
from korg_bridge.recall.semantic import Weights, parse_weights

REPO = Path(__file__).resolve().parents[2]
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
def no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    empty = tmp_path / "no-model"
    empty.mkdir()
    monkeypatch.setenv("KORG_RECALL_MODEL_DIR", str(empty))
    return empty


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def recall_json(capsys: pytest.CaptureFixture[str], query: str, *extra: str) -> dict[str, Any]:
    code, out, err = run(capsys, "recall", "--query", query, "--json", "--top-n", "10", *extra)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def snippets(result: dict[str, Any]) -> list[str]:
    return [hit["snippet"] for hit in result["hits"]]


# --- without a model (run everywhere) ----------------------------------------------------------


def test_auto_is_keyword_when_the_model_directory_is_empty(
    ledgers: Path, no_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "recall", "--query", "database")
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
    code, out, err = run(capsys, "recall", "--query", "database", "--mode", mode)
    assert (code, out) == (7, "")
    assert err.count("\n") == 1
    assert f"KORG_RECALL_MODEL_DIR={no_model} holds no usable model" in err
    assert "korg-recall model pull" in err


def test_without_the_extra_the_fix_is_install_then_pull(
    ledgers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR", raising=False)
    monkeypatch.setitem(sys.modules, "fastembed", None)  # what an install without [semantic] looks like
    code, _, err = run(capsys, "recall", "--query", "database", "--mode", "semantic")
    assert code == 7
    assert "run `pip install 'korg-bridge[semantic]' && korg-recall model pull`" in err


def test_index_embed_without_a_model_exits_7(
    ledgers: Path, no_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "index", "--embed")
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
    code, out, err = run(capsys, "recall", "--query", "database", "--weights", weights)
    assert (code, out) == (2, "")
    assert "weight" in err


def test_weights_parse_to_defaults_overridden_per_key() -> None:
    assert parse_weights(None) == Weights(0.45, 0.45, 0.10, 30.0)
    assert parse_weights({"recency": 0, "tau_days": 7}) == Weights(0.45, 0.45, 0.0, 7.0)
    for bad in ({"bm25": float("nan")}, {"vector": True}, {"tau_days": -1}):
        with pytest.raises(UsageError):
            parse_weights(bad)


def test_one_fts_pass_scores_the_vector_candidates_and_the_top_keyword_hits(
    ledgers: Path, tmp_path: Path
) -> None:
    from korg_bridge.recall.fts import Filters, quote_fts
    from korg_bridge.recall.index import Index
    from korg_bridge.recall.semantic import bm25_of_sql, hybrid_keyword_sql

    match = quote_fts("database started")
    sql, params = hybrid_keyword_sql(match, Filters(sources=None), [1, 6], limit=2)
    assert "ORDER BY rowid IN (?, ?) DESC, rank" in sql
    assert params == [match, 1, 6, 4]
    filtered, _ = hybrid_keyword_sql(match, Filters(sources=None, tools=("Bash",)), [1], limit=2)
    assert "ORDER BY e.id IN (?) DESC, rank" in filtered and "e.tool IN (?)" in filtered
    with Index(tmp_path / "index.sqlite") as index:
        index.refresh([ledgers])
        rows = index.read(lambda conn: conn.execute(sql, params).fetchall())
        exact = index.read(lambda conn: dict(conn.execute(bm25_of_sql(2), [match, 1, 6]).fetchall()))
    by_id = dict(rows)
    assert {1, 6} - set(by_id) == {6}  # event 6 matches no term: absent, so its BM25 is 0
    assert by_id[1] == pytest.approx(exact[1])
    others = [rank for event_id, rank in rows[1:]]
    assert rows[0][0] == 1 and len(others) >= 2  # the candidate that matched, then at least two others
    assert others == sorted(others)


# --- cold start --------------------------------------------------------------------------------

_PROBE = (
    "import sys\n"
    "from korg_bridge.recall import cli\n"
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
def test_auto_checks_for_the_model_without_importing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    code = (
        "import sys\n"
        "from korg_bridge.recall import cli\n"
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
def test_auto_uses_hybrid_when_a_model_is_on_disk(ledgers: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "recall", "--query", PARAPHRASE)
    assert code == 0
    assert out.startswith("[recall · hybrid] ")


@needs_model
def test_a_paraphrase_finds_the_event_keyword_search_ranks_low(
    ledgers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keyword = snippets(recall_json(capsys, PARAPHRASE, "--mode", "keyword"))
    assert keyword[0] != TARGET  # it shares only "start" with the query
    # The CI model (int8 MiniLM) scores this paraphrase at about 0.27: below the 0.30 default.
    semantic = recall_json(capsys, PARAPHRASE, "--mode", "semantic", "--min-score", "0.2")
    assert snippets(semantic)[0] == TARGET
    hybrid = recall_json(capsys, PARAPHRASE, "--mode", "hybrid", "--min-score", "0.2")
    assert snippets(hybrid)[0] == TARGET


@needs_model
def test_vectors_are_computed_once_and_reused(ledgers: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = recall_json(capsys, PARAPHRASE, "--mode", "semantic")
    assert (first["embedded_now"], first["not_embedded"]) == (9, 0)
    second = recall_json(capsys, "rate limiter", "--mode", "hybrid")
    assert (second["embedded_now"], second["not_embedded"]) == (0, 0)
    code, out, _ = run(capsys, "stats")
    assert code == 0
    assert json.loads(out)["vectors"] == {first["model"]: 9}
    with (ledgers / "history.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(prompt(20, "one more prompt about flaky tests"))
    third = recall_json(capsys, "flaky", "--mode", "hybrid")
    assert third["embedded_now"] == 1  # only the new event


@needs_model
def test_min_score_filters_semantic_hits(ledgers: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    ledgers: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert recall_json(capsys, PARAPHRASE, "--mode", mode, "--min-score", "0.2")["hits"]
    assert (
        recall_json(capsys, PARAPHRASE, "--mode", mode, "--min-score", "0.2", "--since", "1d")["hits"] == []
    )
    assert recall_json(capsys, PARAPHRASE, "--mode", mode, "--tool-filter", "Bash")["hits"] == []


@needs_model
def test_json_hits_carry_a_breakdown_that_adds_up(ledgers: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
def test_weights_override_the_hybrid_mix(ledgers: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    ranked = recall_json(capsys, "deploy payments", "--mode", "hybrid")["hits"]
    assert [hit["session"] for hit in ranked[:2]] == ["new", "old"]
    assert ranked[0]["breakdown"]["recency"] > 0.9 > 0.01 > ranked[1]["breakdown"]["recency"]
    undated = next(hit for hit in ranked if "timestamp" in hit["snippet"])
    assert undated["breakdown"]["recency"] == 0
    flat = recall_json(capsys, "deploy payments", "--mode", "hybrid", "--weights", '{"recency": 0}')["hits"]
    assert flat[0]["score"] == flat[1]["score"]


@needs_model
def test_show_with_a_query_explains_each_event(ledgers: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ref = recall_json(capsys, PARAPHRASE, "--mode", "hybrid", "--min-score", "0.2")["hits"][0]["ref"]
    code, out, _ = run(capsys, "show", "--ref", ref, "--query", PARAPHRASE)
    assert code == 0
    shown = json.loads(out)
    assert shown["model"] and shown["query"] == PARAPHRASE
    [event] = shown["events"]
    assert event["text"] == TARGET
    assert event["breakdown"]["vector"] == pytest.approx(0.27, abs=0.03)
    code, out, _ = run(capsys, "show", "--ref", ref)
    assert "breakdown" not in json.loads(out)["events"][0]


@needs_model
def test_index_embed_embeds_everything_and_reports_throughput(
    ledgers: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "index", "--embed")
    assert code == 0
    report = json.loads(out)
    assert report["events_added"] == 9
    assert report["embedding"]["embedded"] == 9
    assert report["embedding"]["not_embedded"] == 0
    assert report["embedding"]["events_per_s"] > 0
    assert recall_json(capsys, PARAPHRASE, "--mode", "semantic")["embedded_now"] == 0


@needs_model
def test_hybrid_ranks_events_without_vectors_by_keywords(ledgers: Path, tmp_path: Path) -> None:
    from korg_bridge.recall.embed import load_embedder
    from korg_bridge.recall.index import Index
    from korg_bridge.recall.search import search

    with Index(tmp_path / "index.sqlite") as index:
        index.refresh([ledgers])
        hits = search(
            index,
            "database backup",
            mode="hybrid",
            top_n=3,
            min_score=0.3,
            sources=[ledgers],
            embedder=load_embedder({"KORG_RECALL_MODEL_DIR": MODEL_DIR}),
        )
    assert hits[0].snippet == "database backup script for the nightly cron"
    assert hits[0].breakdown is not None and hits[0].breakdown["vector"] is None


@needs_model
def test_model_pull_records_a_cached_model_and_reports_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = lay_out_hub_cache(tmp_path / "cache" / "korg-recall" / "models")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("KORG_RECALL_MODEL_DIR")
    code, out, err = run(capsys, "model", "pull", "--model", "sentence-transformers/all-MiniLM-L6-v2")
    assert code == 0, err
    assert json.loads(out) == {"model": "sentence-transformers/all-MiniLM-L6-v2", "path": str(snapshot)}
