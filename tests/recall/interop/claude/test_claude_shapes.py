"""Claude Code's memory files in the shapes it writes today (a nested ``metadata:`` block with
``node_type``, ``type``, ``modified``, ``originSessionId``) and the older flat ``type:`` -- read
through the real CLI from a copy of a real folder (``shared/peers/claude-memory``), dated by
what they say, written back with every byte outside korg-recall's own lines kept; and what
``KORG_RECALL_WRITES=confirm`` means for them."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from korg_bridge.recall.memory.mirror.frontmatter import FrontMatterError, parse, set_values
from korg_bridge.recall.memory.records import iso, parse_iso
from korg_bridge.recall.memory.safety import age_label
from tests.helpers.claude import ClaudeHome, git_repo, line_with, rows, store_file, tree_bytes
from tests.helpers.cli import ok, run_recall

REAL_FOLDER = Path("claude-memory") / "-home-dev-work-acme-api" / "memory"
FLAT_MTIME = datetime(2026, 1, 5, 9, 30, tzinfo=UTC).timestamp()
"""The older, flat file says no time: its mtime dates it."""


@pytest.fixture
def api(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "work" / "acme-api").resolve()


def copy_real_folder(peers: Path, claude: ClaudeHome, project: Path) -> Path:
    """Claude Code's real memory folder, as the memory folder of ``project`` (writable copies)."""
    claude.transcript(project, "s1", project)
    memory = claude.memory(project)
    for source in sorted((peers / REAL_FOLDER).iterdir()):
        shutil.copyfile(source, memory / source.name)
        os.chmod(memory / source.name, 0o644)
    os.utime(memory / "user_role.md", (FLAT_MTIME, FLAT_MTIME))
    return memory


def listing(project: Path, *args: str, **env: str) -> dict[str, object]:
    return ok(run_recall("memories", *args, cwd=project, env=env))


def store() -> Path:
    return store_file(Path(os.environ["HOME"]))


def test_claude_codes_current_memory_files_are_read_with_the_type_their_metadata_names(
    peers: Path, claude: ClaudeHome, api: Path
) -> None:
    memory = copy_real_folder(peers, claude, api)
    before = tree_bytes(memory)
    listed = listing(api)
    assert listed["total"] == 4 and "mirror_problems" not in listed, listed
    lines = listed["lines"]
    assert isinstance(lines, list)
    kinds = {
        name: line_with(lines, name).split()[1]
        for name in ("feedback_testing", "project_freeze", "reference_ci", "user_role")
    }
    assert kinds == {
        "feedback_testing": "feedback",
        "project_freeze": "project",
        "reference_ci": "reference",
        "user_role": "user",
    }
    stats = listing(api, "--stats")["claude"]
    assert stats["skipped"] == [] and stats["files"] == {"claude-auto-memory": {"taken": 5}}  # type: ignore[index]
    assert tree_bytes(memory) == before  # read, never written


def test_a_memorys_age_is_when_the_file_says_it_was_written_else_its_mtime(
    peers: Path, claude: ClaudeHome, api: Path
) -> None:
    copy_real_folder(peers, claude, api)
    lines = listing(api)["lines"]
    assert isinstance(lines, list)
    now = time.time()
    expected = {
        "feedback_testing": "2026-10-20T09:12:44.120Z",
        "project_freeze": "2026-10-27T17:51:14.486Z",
        "reference_ci": "2026-10-22T16:03:10.004Z",
        "user_role": iso(FLAT_MTIME),
    }
    for name, said in expected.items():
        written = iso(min(parse_iso(said), now))  # a clock behind the file's date cannot date it ahead
        assert rows(store(), "SELECT recorded_at FROM memory WHERE title = ?", [name]) == [(written,)], name
        assert f" {age_label(written, time.time())} " in line_with(lines, name), name


def test_the_body_may_start_right_after_the_front_matter_and_every_link_form_is_a_link(
    peers: Path, claude: ClaudeHome, api: Path
) -> None:
    copy_real_folder(peers, claude, api)
    lines = listing(api)["lines"]
    assert isinstance(lines, list)
    ids = {
        name: line_with(lines, name).split()[0]
        for name in ("feedback_testing", "project_freeze", "reference_ci")
    }
    freeze = listing(api, "--ids", ids["project_freeze"])["memories"][0]  # type: ignore[index]
    assert freeze["body"].startswith("merge freeze until the 3rd for the mobile release\n\nNo merges to main")
    # [[feedback_testing|the testing rule]] and [[reference_ci#Reruns]] both name their file.
    assert sorted(link["dst"] for link in freeze["links"]) == sorted(
        [ids["feedback_testing"], ids["reference_ci"]]
    )


def test_recall_and_the_brief_carry_claude_codes_current_memories(
    peers: Path, claude: ClaudeHome, api: Path
) -> None:
    copy_real_folder(peers, claude, api)
    found = ok(run_recall("recall", "--query", "integration suite", "--kinds", "memory", "--json", cwd=api))
    assert found["memories"][0]["title"] == "feedback_testing"
    assert found["memories"][0]["source_kind"] == "claude-auto-memory"
    brief = json.loads(
        run_recall("context", "--hook", "codex", cwd=api, timeout=60).stdout
    )  # Codex has no auto memory
    text = brief["hookSpecificOutput"]["additionalContext"]
    assert all(
        name in text for name in ("feedback_testing", "user_role", "project_freeze", "reference_ci")
    ), text


def test_set_values_keeps_a_bom_and_crlf_and_refuses_a_block_value() -> None:
    text = "\ufeff---\r\nname: a\r\nmetadata:\r\n  type: user\r\ntags:\r\n  - x\r\n---\r\nbody\r\n"
    assert set_values(text, {("name",): "b", ("metadata", "type"): "project"}, "new") == (
        "\ufeff---\r\nname: b\r\nmetadata:\r\n  type: project\r\ntags:\r\n  - x\r\n---\r\nnew\r\n"
    )
    assert set_values(text, {("tags",): "y"}, "new") is None  # a list is not korg-recall's to rewrite
    assert set_values(text, {("other", "key"): "y"}, "new") is None  # no block to add it to
    with pytest.raises(FrontMatterError, match="nested deeper than 4 levels"):
        parse("---\na:\n b:\n  c:\n   d:\n    e: 1\n---\n")
    with pytest.raises(FrontMatterError, match="line 3 is not 'key: value'"):
        parse("---\nmetadata:\n\ttype: user\n---\n")


def test_import_takes_claude_codes_current_files_with_the_type_their_metadata_names(
    peers: Path, claude: ClaudeHome, api: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "exported"
    shutil.copytree(peers / REAL_FOLDER, folder)
    imported = ok(
        run_recall("import", str(folder), "--scope", "user", cwd=api, env={"KORG_RECALL_CLAUDE_MEMORY": "0"})
    )
    assert imported["created"] == 4, imported
    kinds = rows(store(), "SELECT title, type FROM memory ORDER BY title")
    assert kinds == [
        ("feedback_testing", "feedback"),
        ("project_freeze", "project"),
        ("reference_ci", "reference"),
        ("user_role", "user"),
    ]


@pytest.fixture
def writeback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KORG_RECALL_CLAUDE_WRITEBACK", "1")


def test_a_new_topic_file_is_written_in_claude_codes_current_shape(
    claude: ClaudeHome, api: Path, writeback: None
) -> None:
    made = ok(
        run_recall(
            "remember",
            "--content",
            "Deploys need two approvals.",
            "--type",
            "feedback",
            "--title",
            "Deploy approvals",
            cwd=api,
        )
    )
    text = (claude.memory(api) / "feedback_deploy_approvals.md").read_text()
    recorded = rows(store(), "SELECT recorded_at FROM memory WHERE id = ?", [made["id"]])[0][0]
    assert text == (
        '---\nname: "Deploy approvals"\ndescription: "Deploys need two approvals."\nmetadata:\n'
        f"  node_type: memory\n  type: feedback\n  modified: {recorded[:23]}Z\n---\nDeploys need two approvals.\n"
    )


CLAUDES_REWRITE = {
    "current": (
        "---\r\nname: deploy_approvals\r\ndescription: two approvals for deploys\r\nmetadata:\r\n"
        "  node_type: memory\r\n  type: feedback\r\n  modified: 2026-11-01T08:00:00.000Z\r\n"
        "  originSessionId: 7c1f0e3a-5b2d-4f7e-9a61-2d8c4b0e9f13\r\n  futureKey: [a, b]\r\n"
        "---\r\nDeploys need two approvals from the platform team.\r\n"
    ),
    "flat": (
        "---\nname: deploy_approvals\ndescription: two approvals for deploys\ntype: feedback\n"
        "owner: platform  # a key korg-recall does not know\n---\n\n"
        "Deploys need two approvals from the platform team.\n"
    ),
}
OURS_AFTER_REVISE = {
    "current": (
        '---\r\nname: "deploy_approvals"\r\ndescription: "Deploys need two approvals from the platform team '
        'and one from security."\r\nmetadata:\r\n  node_type: memory\r\n  type: feedback\r\n  modified: {modified}\r\n'
        "  originSessionId: 7c1f0e3a-5b2d-4f7e-9a61-2d8c4b0e9f13\r\n  futureKey: [a, b]\r\n"
        "---\r\nDeploys need two approvals from the platform team and one from security.\r\n"
    ),
    "flat": (
        '---\nname: "deploy_approvals"\ndescription: "Deploys need two approvals from the platform team and one '
        'from security."\ntype: feedback\nowner: platform  # a key korg-recall does not know\n---\n\n'
        "Deploys need two approvals from the platform team and one from security.\n"
    ),
}


@pytest.mark.parametrize("shape", ["current", "flat"])
def test_a_topic_file_claude_code_reshaped_is_written_back_byte_identical_outside_korg_recalls_lines(
    claude: ClaudeHome, api: Path, writeback: None, shape: str
) -> None:
    made = ok(
        run_recall(
            "remember",
            "--content",
            "Deploys need two approvals.",
            "--type",
            "feedback",
            "--title",
            "Deploy approvals",
            cwd=api,
        )
    )
    path = claude.memory(api) / "feedback_deploy_approvals.md"
    path.write_bytes(CLAUDES_REWRITE[shape].encode())  # Claude Code rewrites the file its own way
    os.utime(path, (time.time() + 2, time.time() + 2))
    listing(api)  # the edit is taken in (a version by claude) …
    ok(
        run_recall(
            "revise",
            "--id",
            str(made["id"]),
            "--content",
            "Deploys need two approvals from the platform team and one from security.",
            cwd=api,
        )
    )
    recorded = rows(
        store(), "SELECT recorded_at FROM memory WHERE id = ? AND superseded_by IS NULL", [made["id"]]
    )[0][0]
    # … and our revision changes only name, description, the type, modified and the body.
    assert path.read_bytes().decode() == OURS_AFTER_REVISE[shape].format(modified=recorded[:23] + "Z")


# --- KORG_RECALL_WRITES=confirm -------------------------------------------------------------------


def test_under_confirm_what_claude_code_wrote_waits_for_a_persons_approval(
    peers: Path, claude: ClaudeHome, api: Path
) -> None:
    memory = copy_real_folder(peers, claude, api)
    held = listing(api, KORG_RECALL_WRITES="confirm")
    assert held["total"] == 0  # nothing an agent wrote is served before a person approves it
    assert len(held["mirror_problems"]) == 4  # type: ignore[arg-type]
    line = line_with(held["mirror_problems"], "feedback_testing.md")  # type: ignore[arg-type]
    assert (
        "held for approval (KORG_RECALL_WRITES=confirm); approve it with `korg-recall memories --approve m"
        in line
    )
    pending = listing(api, "--pending", KORG_RECALL_WRITES="confirm")["lines"]
    assert isinstance(pending, list) and len(pending) == 4
    testing = line.rsplit(" ", 1)[1].rstrip("`")
    ok(run_recall("memories", "--approve", testing, cwd=api, env={"KORG_RECALL_WRITES": "confirm"}))
    assert line_with(listing(api, KORG_RECALL_WRITES="confirm")["lines"], "feedback_testing").startswith(
        testing
    )
    # Claude Code changes the file: the change is a proposal, and the approved text is what is served.
    path = memory / "feedback_testing.md"
    path.write_text(path.read_text().replace("npm run test:int", "npm run test:integration"))
    os.utime(path, (time.time() + 2, time.time() + 2))
    listing(api, KORG_RECALL_WRITES="confirm")
    found = ok(
        run_recall(
            "recall",
            "--query",
            "integration suite",
            "--kinds",
            "memory",
            "--json",
            cwd=api,
            env={"KORG_RECALL_WRITES": "confirm"},
        )
    )
    assert "npm run test:int`" in found["memories"][0]["body"]
    ok(run_recall("memories", "--approve", testing, cwd=api, env={"KORG_RECALL_WRITES": "confirm"}))
    found = ok(run_recall("recall", "--query", "integration suite", "--kinds", "memory", "--json", cwd=api))
    assert "npm run test:integration" in found["memories"][0]["body"]


def test_under_confirm_a_file_changed_back_withdraws_its_proposal(
    peers: Path, claude: ClaudeHome, api: Path
) -> None:
    memory = copy_real_folder(peers, claude, api)
    listing(api)  # taken in under auto: live
    path = memory / "reference_ci.md"
    original = path.read_text()
    path.write_text(original.replace("gh run rerun --failed", "gh run rerun"))
    os.utime(path, (time.time() + 2, time.time() + 2))
    listing(api, KORG_RECALL_WRITES="confirm")
    assert len(listing(api, "--pending", KORG_RECALL_WRITES="confirm")["lines"]) == 1  # type: ignore[arg-type]
    path.write_text(original)
    os.utime(path, (time.time() + 4, time.time() + 4))
    listing(api, KORG_RECALL_WRITES="confirm")
    assert listing(api, "--pending", KORG_RECALL_WRITES="confirm")["lines"] == []
