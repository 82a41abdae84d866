"""Real Claude Code transcripts and Codex rollouts (``../shared/peers/transcripts``), read as a
user's history: every kind counted as the folder's README counts it independently, nothing
machine-written labelled as typed, and the whole of each event findable."""

from __future__ import annotations

import gzip
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.query.search import search
from tests.helpers.paths import PEERS, peers_missing

COMPACTED = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
TOOLS = "tools"
PAIRED = "paired"

EXPECTED: dict[str, dict[str, int]] = {
    # README "Independent counts": typed → user_prompt; command → command; local-command →
    # command_output; bash mode → shell; ide → ide_context; interrupt; compact summary;
    # task-notification; system-reminder and meta → system_note; sidechain → subagent_prompt.
    "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl": {
        "user_prompt": 2,
        "command": 1,
        "command_output": 2,
        "llm_inference": 8,
        TOOLS: 40,
        PAIRED: 40,
    },
    "agent-aef063ba534d73153.jsonl": {"subagent_prompt": 1, "llm_inference": 3, TOOLS: 6, PAIRED: 6},
    f"{COMPACTED}.jsonl": {
        "user_prompt": 1,
        "compact_summary": 1,
        "task_notification": 1,
        "llm_inference": 78,
        TOOLS: 177,
        PAIRED: 177,
    },
    "agent-acompact-f46190.jsonl": {"system_note": 5, "subagent_prompt": 1, "llm_inference": 1},
    "71c9afe9-d9cc-4583-86b3-e62ba682b83a.jsonl": {
        "user_prompt": 1,
        "command": 1,
        "command_output": 1,
        "shell": 2,
        "system_note": 1,
        "llm_inference": 3,
        TOOLS: 2,
        PAIRED: 2,
    },
    "3680252d-d4e3-4416-bddd-8f5b5b4fdb7f.jsonl": {
        "command": 1,
        "command_output": 1,
        "system_note": 1,
        "session_title": 3,
    },
    "5ed31c36-bca8-40fd-8d24-f1a1f0af7901.jsonl": {
        "user_prompt": 1,
        "ide_context": 1,
        "llm_inference": 3,
        TOOLS: 4,
        PAIRED: 4,
    },
    "agent-3ea04571.jsonl": {"subagent_prompt": 1, "llm_inference": 1},
    "debug_image_message.jsonl": {"user_prompt": 1, "ide_context": 1},
    "short.jsonl": {"user_prompt": 1, "interrupt": 1, "llm_inference": 1, TOOLS: 2, PAIRED: 2},
    # Codex: user_message events are the typed prompts; 99 function calls + 3 apply_patch calls,
    # each with its output, and 3 web searches; AGENTS.md and the environment context that Codex
    # injects as a user message are one system_note.
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl": {
        "user_prompt": 2,
        "llm_inference": 13,
        "system_note": 1,
        "web_search": 3,
        TOOLS: 102,
        PAIRED: 102,
    },
    "rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl": {
        "user_prompt": 3,
        "llm_inference": 3,
        TOOLS: 38,
        PAIRED: 38,
    },
}
KINDS = {kind for counts in EXPECTED.values() for kind in counts} - {TOOLS, PAIRED}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The transcripts folder as a history: read in place, the gzipped session unpacked beside."""
    folder = PEERS / "transcripts"
    if not folder.is_dir():
        pytest.skip(peers_missing(folder))
    unpacked = tmp_path_factory.mktemp("unpacked") / "claude" / "projects" / "spotter-fum"
    unpacked.mkdir(parents=True)
    packed = next(folder.rglob(f"{COMPACTED}.jsonl.gz"))
    with gzip.open(packed, "rb") as source, (unpacked / f"{COMPACTED}.jsonl").open("wb") as target:
        shutil.copyfileobj(source, target)
    return unpacked.parents[2]


@pytest.fixture(scope="module")
def sources(history: Path) -> list[Path]:
    folder = PEERS / "transcripts"
    return [folder.resolve(), history]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, sources: list[Path]) -> Iterator[Index]:
    with Index(tmp_path_factory.mktemp("index") / "index.sqlite") as opened:
        report = opened.refresh(sources)
        assert (report.files_scanned, report.skipped_lines) == (12, 0)
        yield opened


def per_file(index: Index) -> dict[str, Counter[str]]:
    rows = index.read(
        lambda conn: conn.execute(
            "SELECT s.path, e.tool, e.result IS NOT NULL FROM events e JOIN sources s ON s.id = e.source_id"
        ).fetchall()
    )
    counts: dict[str, Counter[str]] = {}
    for path, tool, paired in rows:
        count = counts.setdefault(Path(path).name, Counter())
        if tool in KINDS:
            count[tool] += 1
        else:
            count[TOOLS] += 1
            count[PAIRED] += int(paired)
    return counts


def test_every_file_has_the_independently_counted_kinds(index: Index) -> None:
    assert per_file(index) == {name: Counter(counts) for name, counts in EXPECTED.items()}


def test_stats_count_every_kind_and_no_machine_written_text_as_typed(index: Index) -> None:
    by_tool = index.stats()["by_tool"]
    for kind in KINDS:
        assert by_tool[kind] == sum(counts.get(kind, 0) for counts in EXPECTED.values()), kind
    typed = search(
        index,
        "caveat command local stdout interrupted reminder",
        mode="keyword",
        top_n=50,
        min_score=0,
        sources=[Path("/")],
        tool_filter=["user_prompt"],
    )
    assert all(not hit.snippet.startswith(("<", "[Request", "Caveat:")) for hit in typed)


def test_a_term_deep_inside_the_compaction_summary_is_found(index: Index, sources: list[Path]) -> None:
    # "cyclomatic" first appears 3,697 characters into the 12 KB summary, past the head's 2,000 (line 715).
    hits = search(index, "cyclomatic", mode="keyword", top_n=5, min_score=0, sources=sources)
    summary = next(hit for hit in hits if hit.tool == "compact_summary")
    assert "cyclomatic" in summary.snippet
    assert summary.seq == 715
    assert (summary.project or "").startswith("/home/USER/projects/spotter-worktrees/spotter-fum")


def test_an_error_deep_in_a_long_test_output_is_found(index: Index, sources: list[Path]) -> None:
    hits = search(index, "secret_key_base", mode="keyword", top_n=10, min_score=0, sources=sources)
    bash = [hit for hit in hits if hit.tool == "Bash"]
    assert bash and "no :secret_key_base configuration found" in bash[0].snippet
    head = index.read(
        lambda conn: conn.execute("SELECT text FROM events WHERE id = ?", (bash[0].event_id,)).fetchone()
    )
    assert "secret_key_base" not in head[0]  # past the head's 300-character preview: found in the body


def test_hits_carry_the_context_they_are_judged_by(index: Index, sources: list[Path]) -> None:
    [hit] = search(
        index,
        "Warmup",
        mode="keyword",
        top_n=1,
        min_score=0,
        sources=sources,
        tool_filter=["subagent_prompt"],
    )
    assert hit.context["sidechain"] is True
    assert hit.context["agent_id"] == "3ea04571"
    codex = search(
        index,
        "compaction threshold",
        mode="keyword",
        top_n=3,
        min_score=0,
        sources=sources,
        agent_filter=["codex"],
    )
    assert codex and all(
        hit.context.get("git_branch") == "feat/codex-agent-plugin"
        for hit in codex
        if hit.session == "019e1625-789d-76c0-80ab-3724b5ddb799"
    )


def test_the_project_filter_keeps_one_project(index: Index, sources: list[Path]) -> None:
    spotter = "/home/USER/projects/spotter-worktrees/spotter-fum"
    hits = search(index, "test", mode="keyword", top_n=50, min_score=0, sources=sources, project=spotter)
    assert hits
    assert {hit.project for hit in hits} <= {spotter, f"{spotter}/assets"}
    assert any(hit.project == f"{spotter}/assets" for hit in hits)  # a folder under it, as cwd changed


def test_hits_never_read_a_thing_into_tool_names(index: Index) -> None:
    assert not set(index.stats()["by_tool"]) & {"None", "null", ""}
