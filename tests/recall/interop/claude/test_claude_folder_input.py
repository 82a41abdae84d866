"""Bad input in Claude Code's folders is skipped with a one-line reason naming the file, and the
slug rule is checked against real Claude Code project folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from korg_bridge.recall.interop.claude.paths import decode_on_disk, folder_matches, resolve_folder, slug
from tests.helpers.claude import ClaudeHome, git_repo, line_with, store_file, topic, touch_later
from tests.helpers.cli import answer, call_recall


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "src" / "shop")
    monkeypatch.chdir(repo)
    return repo.resolve()


def skipped(capsys: pytest.CaptureFixture[str]) -> list[str]:
    stats = answer(capsys, "memories", "--stats")["claude"]
    return list(stats["skipped"])


def test_bad_files_are_skipped_with_a_reason_that_names_them(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, tmp_path: Path
) -> None:
    claude.transcript(shop, "s1", shop)
    memory = claude.memory(shop)
    (memory / "good.md").write_text(topic("Good", "A readable memory", "project", "Body."))
    (memory / "broken.md").write_text("---\nname: no closing line\nthis is not yaml\n")
    (memory / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (memory / "huge.md").write_text("x" * (300 * 1024))
    secret = tmp_path / "outside.md"
    secret.write_text(topic("Outside", "Not in the folder", "user", "A file elsewhere."))
    (memory / "escape.md").symlink_to(secret)
    (memory / "MEMORY.md").write_text("".join(f"- note {n}\n" for n in range(500)))
    os.mkfifo(memory / "pipe.md")  # would block a plain open() forever
    code, out, err = call_recall(capsys, "memories")
    assert code == 0 and err == ""
    assert line_with(json.loads(out)["lines"], "Good").endswith("[claude-auto-memory]")
    reasons = dict(line.split(": ", 1) for line in skipped(capsys))
    assert reasons[str(memory / "broken.md")].startswith("unreadable front matter")
    assert reasons[str(memory / "binary.md")] == "binary (it holds NUL bytes)"
    assert "larger than the 256 KB read" in reasons[str(memory / "huge.md")]
    assert reasons[str(memory / "escape.md")] == f"a symlink pointing outside {memory}"
    assert reasons[str(memory / "MEMORY.md")].startswith("500 lines, ")
    assert (
        "over what Claude Code loads of MEMORY.md (200 lines, 25000 bytes)"
        in reasons[str(memory / "MEMORY.md")]
    )
    assert reasons[str(memory / "pipe.md")] == "not a regular file"
    assert answer(capsys, "memories")["total"] == 1


def test_a_file_that_turns_unreadable_keeps_what_it_said_before(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    claude.transcript(shop, "s1", shop)
    path = claude.memory(shop) / "project_ports.md"
    path.write_text(topic("Ports", "The API listens on 8080", "project", "Set in .env."))
    memory_id = line_with(answer(capsys, "memories")["lines"], "Ports").split()[0]
    path.write_text("---\nname: [unclosed\n---\nhalf an edit\n")
    touch_later(path)
    listed = answer(capsys, "memories")["lines"]
    assert line_with(listed, "Ports").split()[0] == memory_id
    assert skipped(capsys) == [f"{path}: unreadable front matter (unclosed list '[unclosed')"]


def test_a_folder_of_an_unknown_project_is_named_and_its_files_skipped(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    gone = claude.memory("/nowhere/on/this/machine")
    (gone / "user_role.md").write_text(topic("Role", "Data scientist", "user", "Body."))
    answer(capsys, "memories")
    stats = answer(capsys, "memories", "--stats")["claude"]
    assert stats["folders_without_project"] == [str(gone.parent)]
    assert stats["skipped"] == [
        f"{gone / 'user_role.md'}: cannot tell which project this folder belongs to: no transcript beside "
        "it names a directory of that name, and no directory on this machine has it"
    ]


def test_a_memory_folder_without_transcripts_is_found_on_disk(tmp_path: Path) -> None:
    project = tmp_path / "my_app.v2" / "web-ui"
    project.mkdir(parents=True)
    (tmp_path / "my-app-v2").mkdir()  # the same slug prefix, a dead end
    assert decode_on_disk(slug(str(project))) == str(project)
    assert decode_on_disk(slug(str(tmp_path / "missing"))) is None


def test_long_paths_match_claudes_truncated_folder_names() -> None:
    long = "/" + "/".join(["segment"] * 40)
    name = slug(long)[:200] + "-1a2b3c"
    assert folder_matches(name, long)
    assert not folder_matches(slug(long)[:200], long)
    assert folder_matches("-home-ana-my-app-v2", "/home/ana/my_app.v2")


def test_real_claude_folders_map_back_only_to_the_directory_their_transcripts_name(
    peers: Path, tmp_path: Path
) -> None:
    real = peers / "transcripts" / "claude" / "projects"
    resolved: dict[str, tuple[str | None, str]] = {}
    for folder in sorted(real.iterdir()):
        copy = tmp_path / "projects" / folder.name
        copy.mkdir(parents=True)
        for transcript in folder.glob("*.jsonl"):
            (copy / transcript.name).symlink_to(transcript)
        resolved[folder.name] = resolve_folder(copy)
    # The slug rule, checked on real folders: a dot became "-" too (not just "/").
    assert resolved["-Users-dain-workspace-danieldemmel-me-next"] == (
        "/Users/dain/workspace/danieldemmel.me-next",
        "transcript",
    )
    assert resolved["-experiments-worktrees"] == ("-experiments/worktrees", "transcript")
    # Folders whose transcripts name another directory (renamed or sanitised test data), or that
    # hold only a gzipped one, are never guessed.
    for name in (
        "-Users-dain-workspace-claude-code-log-sample",
        "-home-marco-projects-spotter-worktrees-spotter-fum",
        "ccl-test-data",
        "spotter-fixtures",
    ):
        assert resolved[name] == (None, "unresolved"), name


def test_no_store_is_made_when_claude_has_nothing(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    claude.transcript(shop, "s1", shop)  # sessions but no memory folder
    assert answer(capsys, "memories")["total"] == 0
    assert not store_file(Path(os.environ["HOME"])).exists()
