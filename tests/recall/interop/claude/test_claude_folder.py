"""Claude Code's memory folders read as memories: per project scope, links, changes, deletions,
instructions files -- and nothing of Claude's ever modified."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.claude import (
    ClaudeHome,
    git_repo,
    line_with,
    rows,
    store_file,
    topic,
    touch_later,
    tree_bytes,
    worktree,
)
from tests.helpers.cli import answer, call_recall, korg_recall


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "src" / "shop")
    monkeypatch.chdir(repo)
    return repo.resolve()


@pytest.fixture
def blog(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "src" / "blog.v2").resolve()


def fill(claude: ClaudeHome, shop: Path, blog: Path) -> None:
    """Two projects: shop (a transcript says where it is), blog (found on disk by its slug)."""
    claude.transcript(shop, "s1", shop)
    memory = claude.memory(shop)
    (memory / "MEMORY.md").write_text(
        "- [User role](user_role.md) — data scientist\n"
        "- [Testing](feedback_testing.md) — real database\n"
        "- [Freeze](project_release_freeze.md) — merge freeze\n"
    )
    (memory / "user_role.md").write_text(
        topic("User role", "The user is a data scientist", "user", "Explain frontend with backend analogies.")
    )
    (memory / "feedback_testing.md").write_text(
        topic(
            "Integration tests use a real database",
            "Never mock the database in integration tests",
            "feedback",
            "Mocked tests passed while a migration failed. See [[project_release_freeze]] and [[User role]].",
        )
    )
    (memory / "project_release_freeze.md").write_text(
        topic("Release freeze", "Merge freeze from 2026-03-05", "project", "Non-critical merges wait.")
    )
    (claude.memory(blog) / "reference_dashboards.md").write_text(
        topic("Dashboards", "Latency dashboards live in Grafana", "reference", "grafana.internal/d/latency")
    )


def test_each_projects_memories_are_listed_in_that_projects_scope(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    (shop / "CLAUDE.md").write_text("Run `make db` before the tests.\n")
    listed = answer(capsys, "memories")
    assert listed["scopes"] == ["user", f"project:{shop}"]
    assert listed["total"] == 4
    assert line_with(listed["lines"], "Standing instructions: CLAUDE.md").endswith("[instructions]")
    line = line_with(listed["lines"], "Integration tests use a real database")
    assert line.split()[1] == "feedback" and line.endswith("[claude-auto-memory]")
    assert not any("Dashboards" in line for line in listed["lines"])  # another project's
    other = answer(capsys, "memories", "--scope", f"project:{blog}")
    # A listing line has a fixed width: a long temporary path leaves the title less room ("Dashb…").
    [shown] = [line.split(f"(project:{blog}) ", 1)[1] for line in other["lines"]]
    title, _, kind = shown.rpartition(" ")
    assert kind == "[claude-auto-memory]"
    assert title == "Dashboards" or (
        title.endswith("…") and "Dashboards".startswith(title[:-1]) and len(title) > 1
    )
    by_scope = answer(capsys, "memories", "--stats")["by_scope"]
    assert by_scope == {f"project:{shop}": 4, f"project:{blog}": 1}


def test_a_topic_file_becomes_a_memory_by_claude_with_its_source(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    listed = answer(capsys, "memories")
    memory_id = line_with(listed["lines"], "Release freeze").split()[0]
    full = answer(capsys, "memories", "--ids", memory_id)["memories"][0]
    assert (full["type"], full["actor"], full["scope"]) == ("project", "claude", f"project:{shop}")
    assert full["body"] == "Merge freeze from 2026-03-05\n\nNon-critical merges wait."
    assert full["source"] == {
        "kind": "claude-auto-memory",
        "file": str(claude.memory(shop) / "project_release_freeze.md"),
    }


def test_wiki_links_are_stored_and_shown_with_the_memory(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    lines = answer(capsys, "memories")["lines"]
    testing, freeze, role = (
        line_with(lines, text).split()[0] for text in ("Integration tests", "Release freeze", "User role")
    )
    links = answer(capsys, "memories", "--ids", testing)["memories"][0]["links"]
    assert sorted((link["dst"], link["kind"]) for link in links) == sorted([(freeze, "wiki"), (role, "wiki")])


def test_a_changed_topic_file_is_picked_up_on_the_next_query(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    memory_id = line_with(answer(capsys, "memories")["lines"], "Release freeze").split()[0]
    path = claude.memory(shop) / "project_release_freeze.md"
    path.write_text(topic("Release freeze", "Merge freeze from 2026-03-12", "project", "Moved a week."))
    touch_later(path)
    found = answer(capsys, "recall", "--query", "merge freeze", "--kinds", "memory", "--json")["memories"]
    assert (found[0]["id"], found[0]["version"], found[0]["source_kind"]) == (
        memory_id,
        2,
        "claude-auto-memory",
    )
    assert "2026-03-12" in found[0]["body"]
    versions = rows(
        _store(), "SELECT version, actor, reason FROM memory WHERE id = ? ORDER BY version", [memory_id]
    )
    assert versions == [
        (1, "claude", "read from Claude Code's memory folder"),
        (2, "claude", "changed in Claude Code's memory folder"),
    ]


def _store() -> Path:
    return store_file(Path(os.environ["HOME"]))


def test_a_deleted_topic_file_retires_its_memory_and_restore_brings_it_back(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    memory_id = line_with(answer(capsys, "memories")["lines"], "User role").split()[0]
    (claude.memory(shop) / "user_role.md").unlink()  # Claude Code consolidating its memory
    listed = answer(capsys, "memories")
    assert not any("User role" in line for line in listed["lines"])
    retired = answer(capsys, "memories", "--include-retired")["lines"]
    assert line_with(retired, "User role").split()[0] == memory_id
    head = rows(
        _store(),
        "SELECT state, actor, reason FROM memory WHERE id = ? ORDER BY version DESC LIMIT 1",
        [memory_id],
    )
    assert head == [
        (
            "retired",
            "claude",
            f"{claude.memory(shop) / 'user_role.md'} was deleted from Claude Code's memory folder",
        )
    ]
    answer(capsys, "restore", "--id", memory_id)
    assert any("User role" in line for line in answer(capsys, "memories")["lines"])


def test_instructions_files_are_feedback_memories_marked_as_instructions(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    (claude.root / "CLAUDE.md").write_text("Answer in British English.\n")
    (shop / "CLAUDE.md").write_text("# Shop\n\nRun `make db` before the tests.\n")
    (shop / "AGENTS.md").symlink_to(shop / "CLAUDE.md")  # a common setup: read once
    listed = answer(capsys, "memories")
    assert listed["total"] == 2
    user = line_with(listed["lines"], "Standing instructions: CLAUDE.md (Claude Code, user)")
    assert user.split()[1] == "feedback" and user.endswith("[instructions]")
    mine = line_with(listed["lines"], "Standing instructions: CLAUDE.md [instructions]")
    full = answer(capsys, "memories", "--ids", mine.split()[0])["memories"][0]
    assert full["body"] == "# Shop\n\nRun `make db` before the tests."
    assert full["source"]["kind"] == "instructions"


def test_worktrees_of_one_repository_share_its_scope(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, tmp_path: Path
) -> None:
    tree = worktree(shop, tmp_path / "shop-feature")
    claude.transcript(tree, "s2", tree)  # an older Claude Code kept memory per worktree folder
    (claude.memory(tree) / "project_flags.md").write_text(
        topic("Feature flags", "Flags live in config/flags.yml", "project", "Toggle them there.")
    )
    listed = answer(capsys, "memories")
    assert listed["scopes"] == ["user", f"project:{shop}"]
    assert line_with(listed["lines"], "Feature flags").endswith("[claude-auto-memory]")


def test_nothing_in_claudes_folders_is_ever_modified(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    (shop / "CLAUDE.md").write_text("Use pnpm.\n")
    before = tree_bytes(claude.root), (shop / "CLAUDE.md").read_bytes()
    lines = answer(capsys, "memories")["lines"]
    memory_id = line_with(lines, "Release freeze").split()[0]
    answer(capsys, "remember", "--content", "Deploys need two approvals.", "--type", "project")
    answer(capsys, "forget", "--id", memory_id)
    assert call_recall(capsys, "recall", "--query", "database", "--kinds", "memory")[0] == 0
    assert (tree_bytes(claude.root), (shop / "CLAUDE.md").read_bytes()) == before


def test_revise_refuses_a_claude_memory_and_names_its_file(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    memory_id = line_with(answer(capsys, "memories")["lines"], "Release freeze").split()[0]
    code, out, err = call_recall(capsys, "revise", "--id", memory_id, "--content", "No freeze after all.")
    assert (code, out) == (2, "")
    assert "project_release_freeze.md" in err and "Edit that file" in err
    code, _, err = call_recall(
        capsys, "remember", "--content", "No freeze.", "--type", "project", "--supersedes", memory_id
    )
    assert code == 2 and "korg-recall does not change it" in err


def test_remember_never_merges_into_a_claude_memory(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    memory_id = line_with(answer(capsys, "memories")["lines"], "Release freeze").split()[0]
    made = answer(
        capsys,
        "remember",
        "--content",
        "Merge freeze from 2026-03-05. Non-critical merges wait!",
        "--type",
        "project",
    )
    assert made["status"] == "created" and made["id"] != memory_id
    assert rows(_store(), "SELECT count(*) FROM memory WHERE id = ?", [memory_id]) == [(1,)]


def test_claude_memories_are_not_copied_into_the_mirror(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    answer(capsys, "memories")
    made = answer(capsys, "remember", "--content", "Deploys need two approvals.", "--type", "project")
    mirror = _store().parent / "memories"
    assert [path.name.rsplit("--", 1)[1] for path in mirror.rglob("*.md")] == [f"{made['id']}.md"]


def test_recall_shows_claude_memories_as_blocks_with_their_source_kind(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    code, out, _ = call_recall(capsys, "recall", "--query", "integration database", "--kinds", "memory")
    assert code == 0
    assert 'source_kind="claude-auto-memory"' in out and "Never mock the database" in out


def test_reading_off_takes_nothing_in_and_creates_no_store(
    capsys: pytest.CaptureFixture[str],
    claude: ClaudeHome,
    shop: Path,
    blog: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fill(claude, shop, blog)
    monkeypatch.setenv("KORG_RECALL_CLAUDE_MEMORY", "0")
    assert answer(capsys, "memories")["total"] == 0
    assert not _store().exists()


def test_stats_counts_the_files_read(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    answer(capsys, "memories")
    claude_stats = answer(capsys, "memories", "--stats")["claude"]
    assert claude_stats["files"] == {"claude-auto-memory": {"taken": 5}}
    assert claude_stats["skipped"] == [] and claude_stats["folders_without_project"] == []
    assert json.dumps(claude_stats)  # plain JSON


def test_processes_reading_the_same_folder_at_once_take_each_file_in_once(
    claude: ClaudeHome, shop: Path, blog: Path
) -> None:
    fill(claude, shop, blog)
    children = [
        subprocess.Popen(
            [*korg_recall(), "memories"],
            cwd=shop,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert json.loads(out)["total"] == 3
    assert rows(_store(), "SELECT count(DISTINCT id), count(*) FROM memory") == [(4, 4)]  # 3 + 1, once each
