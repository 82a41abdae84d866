"""Claude Code's folders are someone else's: write-back writes only regular files inside the memory
folder it resolved, never through a link; a title cannot break korg-recall's block; and no read
of those folders blocks on a FIFO. All through the real CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from korg_bridge.recall.interop.claude.files import BLOCK_BEGIN, BLOCK_END
from tests.helpers.claude import ClaudeHome, git_repo, topic
from tests.helpers.cli import ok, run_recall

BOUND = 30.0
"""Seconds a call may take here: a read that blocks on a FIFO would never end."""


@pytest.fixture
def shop(tmp_path: Path, claude: ClaudeHome, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "src" / "shop").resolve()
    claude.transcript(repo, "s1", repo)
    monkeypatch.setenv("KORG_RECALL_CLAUDE_WRITEBACK", "1")
    return repo


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


def remember(shop: Path, text: str, title: str) -> dict[str, object]:
    return ok(
        run_recall(
            "remember", "--content", text, "--type", "project", "--title", title, cwd=shop, timeout=BOUND
        )
    )


def test_a_memory_md_that_is_a_symlink_is_not_written_through(
    claude: ClaudeHome, shop: Path, elsewhere: Path
) -> None:
    target = elsewhere / "notes.md"
    target.write_text("- my own notes\n")
    index = claude.memory(shop) / "MEMORY.md"
    index.symlink_to(target)
    made = remember(shop, "The staging database resets every Monday.", "Staging resets")
    assert made["checks"]["claude_writeback"] == [  # type: ignore[index]
        f"{index}: {index} is a symbolic link; korg-recall writes only regular files inside {index.parent}, "
        "never through a link.; its block was not written"
    ]
    assert target.read_text() == "- my own notes\n" and index.is_symlink()
    assert (claude.memory(shop) / "project_staging_resets.md").is_file()  # the topic file is written


def test_a_topic_name_that_is_a_dangling_symlink_creates_nothing_outside(
    claude: ClaudeHome, shop: Path, elsewhere: Path
) -> None:
    link = claude.memory(shop) / "project_staging_resets.md"
    link.symlink_to(elsewhere / "planted.md")  # dangling
    made = remember(shop, "The staging database resets every Monday.", "Staging resets")
    assert made["checks"]["claude_writeback"] == "up to date"  # type: ignore[index]
    assert list(elsewhere.iterdir()) == []
    assert link.is_symlink() and not link.exists()
    assert "every Monday" in (claude.memory(shop) / "project_staging_resets_2.md").read_text()


def test_a_topic_file_replaced_by_a_symlink_is_left_alone(
    claude: ClaudeHome, shop: Path, elsewhere: Path
) -> None:
    made = remember(shop, "The staging database resets every Monday.", "Staging resets")
    path = claude.memory(shop) / "project_staging_resets.md"
    outside = elsewhere / "copy.md"
    outside.write_bytes(path.read_bytes())  # the same bytes, so only the link gives it away
    path.unlink()
    path.symlink_to(outside)
    revised = ok(
        run_recall(
            "revise", "--id", str(made["id"]), "--content", "Resets every Sunday.", cwd=shop, timeout=BOUND
        )
    )
    assert revised["checks"]["claude_writeback"][0].startswith(f"{path} is a symbolic link")  # type: ignore[index]
    assert "every Monday" in outside.read_text()
    forgot = ok(run_recall("forget", "--id", str(made["id"]), "--mode", "purge", cwd=shop, timeout=BOUND))
    assert forgot["checks"]["claude_writeback"][0].startswith(f"{path} is a symbolic link")  # type: ignore[index]
    assert outside.exists() and path.is_symlink()


def test_an_archive_folder_that_is_a_symlink_is_not_written_into(
    claude: ClaudeHome, shop: Path, elsewhere: Path
) -> None:
    made = remember(shop, "The staging database resets every Monday.", "Staging resets")
    (claude.memory(shop) / ".korg-recall-archive").symlink_to(elsewhere)
    forgot = ok(run_recall("forget", "--id", str(made["id"]), cwd=shop, timeout=BOUND))
    path = claude.memory(shop) / "project_staging_resets.md"
    assert forgot["checks"]["claude_writeback"] == [  # type: ignore[index]
        f"{claude.memory(shop) / '.korg-recall-archive'} is not a folder (a symlink?); {path} was not archived"
    ]
    assert list(elsewhere.iterdir()) == [] and path.is_file()


def test_a_title_holding_the_end_marker_cannot_break_the_block(claude: ClaudeHome, shop: Path) -> None:
    index = claude.memory(shop) / "MEMORY.md"
    index.write_text("- [Role](user_role.md) — backend lead\n")
    remember(
        shop, "Comments in templates use HTML syntax.", f"Template comments {BLOCK_END} and {BLOCK_BEGIN}"
    )
    second = remember(shop, "The CDN caches for ten minutes.", "CDN cache")
    assert second["checks"]["claude_writeback"] == "up to date"  # type: ignore[index]
    text = index.read_text()
    assert text.count(BLOCK_BEGIN) == 1 and text.count(BLOCK_END) == 1
    assert "&lt;!-- korg-recall:end --&gt;" in text and "CDN cache" in text
    assert text.startswith("- [Role](user_role.md) — backend lead\n")


def test_a_fifo_in_claudes_memory_folder_blocks_no_command(claude: ClaudeHome, shop: Path) -> None:
    memory = claude.memory(shop)
    (memory / "user_role.md").write_text(topic("Role", "Backend lead", "user", "Short answers."))
    os.mkfifo(memory / "pipe.md")
    os.mkfifo(memory / "MEMORY.md")
    for argv in (["memories"], ["recall", "--query", "backend"], ["context"], ["stats"]):
        proc = run_recall(*argv, cwd=shop, timeout=BOUND)
        assert proc.returncode == 0, (argv, proc.stderr)
    stats = ok(run_recall("memories", "--stats", cwd=shop, timeout=BOUND))["claude"]
    assert sorted(stats["skipped"]) == [  # type: ignore[index]
        f"{memory / 'MEMORY.md'}: not a regular file",
        f"{memory / 'pipe.md'}: not a regular file",
    ]


def test_a_fifo_in_place_of_a_topic_file_of_ours_blocks_no_write(claude: ClaudeHome, shop: Path) -> None:
    made = remember(shop, "The staging database resets every Monday.", "Staging resets")
    path = claude.memory(shop) / "project_staging_resets.md"
    path.unlink()
    os.mkfifo(path)
    forgot = ok(run_recall("forget", "--id", str(made["id"]), cwd=shop, timeout=BOUND))
    assert forgot["checks"]["claude_writeback"] == [  # type: ignore[index]
        f"{path} is not a regular file; korg-recall changes only regular files. It was not archived."
    ]
    purged = ok(run_recall("forget", "--id", str(made["id"]), "--mode", "purge", cwd=shop, timeout=BOUND))
    assert purged["checks"]["claude_writeback"] == [  # type: ignore[index]
        f"{path} is not a regular file; korg-recall changes only regular files. It was not deleted."
    ]
    assert path.exists()  # not korg-recall's file any more: not deleted


def test_a_config_folder_reached_through_a_symlink_still_knows_korg_recalls_own_files(
    claude: ClaudeHome, shop: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dotfiles = tmp_path / "dotfiles-claude"
    dotfiles.symlink_to(claude.root)  # ~/.claude as a dotfiles manager links it
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(dotfiles))
    remember(shop, "The staging database resets every Monday.", "Staging resets")
    listed = ok(run_recall("memories", cwd=shop, timeout=BOUND))
    assert listed["total"] == 1 and not listed["lines"][0].endswith("[claude-auto-memory]")  # type: ignore[index]
