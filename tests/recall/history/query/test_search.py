"""Searching the index: keyword and substring modes, filters, collapsing, snippets, scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.errors import UsageError
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.query.hits import Hit
from korg_bridge.recall.history.query.search import search
from korg_bridge.recall.history.query.snippets import SNIPPET_CHARS, make_snippet
from korg_bridge.recall.history.query.timeparse import parse_time


def record(seq: int, tool: str, text: str = "", **fields: Any) -> dict[str, Any]:
    if tool == "user_prompt":
        args, result = {"prompt": text}, {}
    elif tool == "llm_inference":
        args, result = {"model": "m"}, {"text": text}
    else:
        args, result = {"command": text}, {"output": fields.pop("output", "")}
    base = {"seq": seq, "source_agent": "agent:test", "tool_name": tool, "args": args, "result": result}
    return {**base, **fields}


def write(path: Path, *records: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(item) + "\n" for item in records))
    return path


def run(index: Index, query: str, sources: list[Path], mode: str = "keyword", **options: Any) -> list[Hit]:
    index.refresh(sources)
    options.setdefault("top_n", 10)
    options.setdefault("min_score", 0.3)
    return search(index, query, mode=mode, sources=sources, **options)


def snippets(hits: list[Hit]) -> list[str]:
    return [hit.snippet for hit in hits]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return write(
        tmp_path / "ledgers" / "s.jsonl",
        record(1, "user_prompt", "Fix the rate limiter in the API gateway"),
        record(2, "llm_inference", "I'll look at the limiter configuration first."),
        record(3, "Bash", "grep -rn limiter src/", output="src/gateway.py: limiter = RateLimiter(10)"),
        record(4, "user_prompt", "Now write the changelog"),
        record(5, "Bash", "pytest -q", output="12 passed"),
    )


# --- keyword -----------------------------------------------------------------------------------


def test_keyword_ranks_fuller_matches_first_and_keeps_partial_ones(index: Index, ledger: Path) -> None:
    hits = run(index, "rate limiter gateway", [ledger.parent])
    assert hits[0].snippet == "Fix the rate limiter in the API gateway"
    assert "I'll look at the limiter configuration first." in snippets(hits)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0 <= score < 1 for score in scores)  # near 0 for words most events share


def test_keyword_stems_words(index: Index, ledger: Path) -> None:
    assert snippets(run(index, "fixing", [ledger.parent])) == ["Fix the rate limiter in the API gateway"]


def test_hit_carries_ref_metadata_and_event_id(index: Index, ledger: Path) -> None:
    [hit] = run(index, "changelog", [ledger.parent])
    assert hit.ref == f"e{hit.event_id}"
    assert (hit.seq, hit.tool, hit.agent, hit.session) == (4, "user_prompt", "agent:test", "s")
    assert index.get_events([hit.ref])[0]["args"] == {"prompt": "Now write the changelog"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("foo NOT bar", ["foo not bar", "not a foo"]),
        ("foo OR", ["foo not bar", "not a foo"]),
        ("AND foo", ["foo not bar", "not a foo"]),
        ('foo "bar', ["foo not bar", "not a foo"]),
        ('"unbalanced', []),
        ("foo*", ["foo not bar", "not a foo"]),
        ("col:foo", ["col:foo here"]),
        ("text:foo", []),
        ("(foo", ["foo not bar", "not a foo"]),
        ("foo)", ["foo not bar", "not a foo"]),
        ("-foo", ["foo not bar", "not a foo"]),
        ("^foo", ["foo not bar", "not a foo"]),
        ("NEAR(foo bar)", ["foo not bar"]),  # the words "near foo", and "bar"
        ("{text}: qux", ["qux"]),
    ],
)
def test_fts_syntax_in_a_query_is_plain_words(
    index: Index, tmp_path: Path, query: str, expected: list[str]
) -> None:
    ledger = write(
        tmp_path / "l" / "s.jsonl",
        record(1, "user_prompt", "foo not bar"),
        record(2, "user_prompt", "not a foo"),
        record(3, "user_prompt", "qux"),
        record(4, "user_prompt", "col:foo here"),
    )
    hits = run(index, query, [ledger.parent])
    if query.startswith(("col", "text")):
        assert snippets(hits) == expected
    else:
        assert sorted(snippet for snippet in snippets(hits) if snippet != "col:foo here") == sorted(expected)


def test_foo_not_bar_finds_a_text_with_all_three_words(index: Index, tmp_path: Path) -> None:
    ledger = write(
        tmp_path / "l" / "s.jsonl", record(1, "user_prompt", "foo not bar"), record(2, "user_prompt", "foo")
    )
    assert snippets(run(index, "foo NOT bar", [ledger.parent]))[0] == "foo not bar"
    assert snippets(run(index, "foo NOT bar", [ledger.parent], mode="substring")) == ["foo not bar"]


@pytest.mark.parametrize("query", ["", "   ", "*", '"', "- ( ) ^ :"])
@pytest.mark.parametrize("mode", ["keyword", "substring"])
def test_empty_or_punctuation_query_gives_no_hits(index: Index, ledger: Path, query: str, mode: str) -> None:
    assert run(index, query, [ledger.parent], mode=mode) == []


def test_min_score_does_not_drop_keyword_hits(index: Index, ledger: Path) -> None:
    assert len(run(index, "pytest", [ledger.parent], min_score=0.99)) == 1


def test_unknown_mode_is_a_usage_error(index: Index, ledger: Path) -> None:
    with pytest.raises(UsageError, match="use one of substring, keyword"):
        run(index, "x", [ledger.parent], mode="semantic")


def test_top_n_limits_hits(index: Index, tmp_path: Path) -> None:
    ledger = write(tmp_path / "l" / "s.jsonl", *(record(n, "user_prompt", f"needle {n}") for n in range(30)))
    assert len(run(index, "needle", [ledger.parent], top_n=7)) == 7
    assert len(run(index, "needle", [ledger.parent], mode="substring", top_n=7)) == 7
    assert run(index, "needle", [ledger.parent], top_n=0) == []


# --- substring ---------------------------------------------------------------------------------


def test_substring_needs_every_term_and_prefers_short_texts(index: Index, ledger: Path) -> None:
    hits = run(index, "LIMITER the", [ledger.parent], mode="substring")
    assert snippets(hits) == [
        "Fix the rate limiter in the API gateway",
        "I'll look at the limiter configuration first.",
    ]
    assert [hit.score for hit in hits] == [
        round(1 - len(hits[0].snippet) / 2000, 4),
        round(1 - len(hits[1].snippet) / 2000, 4),
    ]


def test_substring_matches_inside_words(index: Index, ledger: Path) -> None:
    assert snippets(run(index, "ytes", [ledger.parent], mode="substring")) == [
        "Bash command=pytest -q → 12 passed"
    ]


def test_substring_folds_non_ascii_case(index: Index, tmp_path: Path) -> None:
    ledger = write(
        tmp_path / "l" / "s.jsonl", record(1, "user_prompt", "ÜBER Straße"), record(2, "user_prompt", "uber")
    )
    assert snippets(run(index, "über", [ledger.parent], mode="substring")) == ["ÜBER Straße"]


def test_substring_treats_like_wildcards_literally(index: Index, tmp_path: Path) -> None:
    ledger = write(
        tmp_path / "l" / "s.jsonl",
        record(1, "user_prompt", "100% done"),
        record(2, "user_prompt", "100 done"),
    )
    assert snippets(run(index, "100%", [ledger.parent], mode="substring")) == ["100% done"]
    assert run(index, "a_b", [ledger.parent], mode="substring") == []


def test_long_texts_share_the_floor_score(index: Index, tmp_path: Path) -> None:
    ledger = write(tmp_path / "l" / "s.jsonl", record(1, "user_prompt", "word " * 500))
    [hit] = run(index, "word", [ledger.parent], mode="substring")
    assert hit.score == 0.5


# --- filters -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["keyword", "substring"])
def test_tool_filter_is_exact(index: Index, ledger: Path, mode: str) -> None:
    hits = run(index, "limiter", [ledger.parent], mode=mode, tool_filter=["Bash"])
    assert [hit.tool for hit in hits] == ["Bash"]
    assert run(index, "limiter", [ledger.parent], mode=mode, tool_filter=["bash"]) == []


@pytest.mark.parametrize("mode", ["keyword", "substring"])
def test_agent_filter_matches_exact_names_and_prefixes(index: Index, tmp_path: Path, mode: str) -> None:
    ledger = write(
        tmp_path / "l" / "s.jsonl",
        record(1, "user_prompt", "shared one", source_agent="claude-code#ab12cd34"),
        record(2, "user_prompt", "shared two", source_agent="agent:claude-code@2.1.0"),
        record(3, "user_prompt", "shared three", source_agent="agent:korgex"),
    )
    sources = [ledger.parent]
    assert len(run(index, "shared", sources, mode=mode, agent_filter=["claude-code"])) == 2
    assert snippets(run(index, "shared", sources, mode=mode, agent_filter=["agent:korgex"])) == [
        "shared three"
    ]
    assert snippets(run(index, "shared", sources, mode=mode, agent_filter=["claude-code#ab12cd34"])) == [
        "shared one"
    ]
    assert run(index, "shared", sources, mode=mode, agent_filter=["codex"]) == []


@pytest.mark.parametrize("mode", ["keyword", "substring"])
def test_since_and_until_bound_the_timestamp(index: Index, tmp_path: Path, mode: str) -> None:
    ledger = write(
        tmp_path / "l" / "s.jsonl",
        record(1, "user_prompt", "event early", timestamp="2026-05-01T00:00:00Z"),
        record(2, "user_prompt", "event middle", timestamp="2026-05-15T12:00:00+02:00"),
        record(3, "user_prompt", "event late", timestamp="2026-05-30T00:00:00Z"),
        record(4, "user_prompt", "event undated"),
    )
    sources = [ledger.parent]
    since, until = parse_time("2026-05-10"), parse_time("2026-05-20")
    assert snippets(run(index, "event", sources, mode=mode, since=since, until=until)) == ["event middle"]
    assert len(run(index, "event", sources, mode=mode, since=since)) == 2
    assert len(run(index, "event", sources, mode=mode)) == 4


def test_only_files_under_the_given_sources_are_searched(index: Index, tmp_path: Path) -> None:
    inside = write(tmp_path / "led" / "a.jsonl", record(1, "user_prompt", "common inside"))
    sibling = write(tmp_path / "ledgers2" / "b.jsonl", record(1, "user_prompt", "common sibling"))
    index.refresh([inside.parent, sibling.parent])
    assert snippets(run(index, "common", [tmp_path / "led"])) == ["common inside"]
    assert snippets(run(index, "common", [sibling])) == ["common sibling"]
    assert len(run(index, "common", [tmp_path])) == 2
    assert run(index, "common", []) == []


# --- collapsing and snippets -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["keyword", "substring"])
def test_repeats_in_one_session_collapse_but_other_sessions_stay(
    index: Index, tmp_path: Path, mode: str
) -> None:
    repeated = [record(n, "Bash", "make deploy", output="ok") for n in range(1, 40)]
    write(tmp_path / "l" / "one.jsonl", *repeated, record(40, "Bash", "make deploy --force", output="ok"))
    write(tmp_path / "l" / "two.jsonl", record(1, "Bash", "make   DEPLOY", output="ok"))
    hits = run(index, "deploy", [tmp_path / "l"], mode=mode, top_n=5)
    assert sorted((hit.session, hit.snippet) for hit in hits) == [
        ("one", "Bash command=make deploy --force → ok"),
        ("one", "Bash command=make deploy → ok"),
        ("two", "Bash command=make DEPLOY → ok"),
    ]


def test_collapsing_still_fills_top_n_from_later_pages(index: Index, tmp_path: Path) -> None:
    repeated = [record(n, "user_prompt", "needle again") for n in range(1, 120)]
    distinct = [
        record(200 + n, "user_prompt", f"needle again and again {n} " + "pad " * 30) for n in range(3)
    ]
    write(tmp_path / "l" / "s.jsonl", *repeated, *distinct)
    assert len(run(index, "needle", [tmp_path / "l"], top_n=4)) == 4


def test_snippet_is_one_line_of_at_most_200_chars_around_the_match(index: Index, tmp_path: Path) -> None:
    text = "intro line\n" + "filler " * 100 + "the walrus appears here\n" + "tail " * 100
    write(tmp_path / "l" / "s.jsonl", record(1, "user_prompt", text))
    for mode in ("keyword", "substring"):
        [hit] = run(index, "walrus", [tmp_path / "l"], mode=mode)
        assert len(hit.snippet) <= SNIPPET_CHARS
        assert "\n" not in hit.snippet
        assert "walrus" in hit.snippet
        assert hit.snippet.startswith("…")
        assert hit.snippet.endswith("…")


def test_snippets_cut_between_words_so_a_secret_is_whole_or_absent() -> None:
    key = "sk-" + "ant-api03-" + "x1Y2z3" * 8
    text = "word " * 30 + f"export KEY={key} " + "after " * 40 + "needle " + "tail " * 40
    for term in ("needle", "export", "absent"):
        snippet = make_snippet(text, [term])
        assert len(snippet) <= SNIPPET_CHARS
        for word in snippet.strip("…").split():
            assert word in text.split(), (term, word)


def test_make_snippet_keeps_short_text_and_marks_cuts() -> None:
    assert make_snippet("a\n b  c", ["b"]) == "a b c"
    long = "start " + "x" * 300 + " needle " + "y" * 300
    cut = make_snippet(long, ["needle"])
    assert len(cut) <= SNIPPET_CHARS
    assert cut.startswith("…")
    assert cut.endswith("…")
    assert "needle" in cut
    assert make_snippet("z" * 500, ["absent"]).startswith("zzz")
    end = make_snippet("a" * 500 + " needle", ["needle"])
    assert end.endswith(" needle")
    assert len(end) == SNIPPET_CHARS
    words = make_snippet("lorem ipsum " * 40 + "needle " + "dolor sit " * 40, ["needle"])
    assert words.startswith("… ") is False
    assert words.startswith("…")
    assert words.endswith("…")
    assert "needle" in words
    assert all(word in ("lorem", "ipsum", "needle", "dolor", "sit") for word in words.strip("…").split())


def test_make_snippet_finds_a_stemmed_term_by_its_first_letters() -> None:
    text = "x" * 300 + " configured the limiter"
    assert "configured" in make_snippet(text, ["configuring"])


def test_very_broad_queries_rank_the_newest_matches_and_filters_still_find_older_ones(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import korg_bridge.recall.history.query.fts as fts

    monkeypatch.setattr(fts, "RANK_WINDOW", 5)
    monkeypatch.setattr(fts, "SELECTIVE_MAX_DF", 2)  # "common" is in all 20 events: not selective
    records = [record(i, "Bash" if i > 1 else "Read", f"common word number {i}") for i in range(1, 21)]
    path = write(tmp_path / "broad.jsonl", *records)
    hits = run(index, "common", [path], top_n=3)
    assert len(hits) == 3 and all(h.seq > 15 for h in hits)  # only the newest five were ranked
    older = run(index, "common", [path], top_n=3, tool_filter=["Read"])
    assert [h.seq for h in older] == [1]  # the window held too few: everything was ranked


def test_broad_query_still_ranks_an_old_event_holding_a_rare_term(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import korg_bridge.recall.history.query.fts as fts

    monkeypatch.setattr(fts, "RANK_WINDOW", 5)
    monkeypatch.setattr(fts, "SELECTIVE_MAX_DF", 2)
    records = [record(1, "Bash", "common word with the zebra crossing")]
    records += [record(i, "Bash", f"common word number {i}") for i in range(2, 41)]
    path = write(tmp_path / "broad.jsonl", *records)
    hits = run(index, "common zebra", [path], top_n=3)
    assert hits[0].seq == 1  # far older than the newest five, but it holds the rare term
    assert all(h.seq > 35 for h in hits[1:])


def test_old_events_holding_a_rare_term_get_exactly_their_full_ranking_score(
    index: Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import korg_bridge.recall.history.query.fts as fts

    texts = [f"common word number {i}" + (" zebra" * (i % 3) if i % 5 == 0 else "") for i in range(1, 61)]
    records = [record(i, "Bash", text) for i, text in enumerate(texts, start=1)]
    path = write(tmp_path / "broad.jsonl", *records)
    full = [(h.ref, h.score) for h in run(index, "zebra common", [path], top_n=12, min_score=0)]
    monkeypatch.setattr(fts, "RANK_WINDOW", 4)
    monkeypatch.setattr(fts, "SELECTIVE_MAX_DF", 20)  # zebra (8 events) is selective, common (60) is not
    windowed = [(h.ref, h.score) for h in run(index, "zebra common", [path], top_n=12, min_score=0)]
    assert windowed[:8] == full[:8]  # every zebra event, old or new, scored as by a full ranking


def test_a_snippet_comes_from_the_body_when_the_head_holds_no_term() -> None:
    head = "Bash command=mix test → Compiling 3 files (.ex)"
    body = "→ " + "ok " * 300 + "** (RuntimeError) no :secret_key_base configuration found " + "ok " * 100
    snippet = make_snippet(head, ["secret_key_base"], body=body)
    assert snippet.startswith("…") and "no :secret_key_base configuration found" in snippet
    assert make_snippet(head, ["compiling"], body=body) == head
