"""A FIFO in every place korg-recall and korg-bridge read: nothing hangs, each gives its usual answer
or its clear one-line error.

Opening a FIFO for reading waits for a writer, forever; every reader goes through
:mod:`korg_bridge._fs.safe_read`, which refuses one without opening it for a read. Each case runs the
real command as a child process under a timeout (``subprocess.TimeoutExpired`` is the hang), in the
isolated home of ``tests/conftest.py`` with FIFOs planted where a person, another program or a model
could leave one: ledger folders, the Markdown mirror, Claude Code's memory folder and instructions
files, its ``settings.json``, import paths, token and tenant-ledgers files, a model folder, the audit
path, the index and store paths, a project's ``.git``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.bridge_client import THUMP, child_env
from tests.helpers.claude import ClaudeHome
from tests.helpers.memory import git_repo, run

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")

BOUND = 120.0
"""Seconds one command may take: far above any of these calls, far below forever."""


def fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def succeeds(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0, (proc.args, proc.stderr)


def refuses(
    proc: subprocess.CompletedProcess[str], code: int, phrase: str, program: str = "korg-recall"
) -> None:
    """A one-line error with the exit code of the table, naming what was wrong."""
    assert proc.returncode == code, (proc.args, proc.returncode, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if not line.startswith(f"{program}: note: ")]
    assert len(errors) == 1 and errors[0].startswith(f"{program}: error: "), proc.stderr
    assert phrase in errors[0], errors[0]


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "shop")


@pytest.fixture
def claude(isolated_env: Path) -> ClaudeHome:
    return ClaudeHome(isolated_env / ".claude")


def test_fifos_in_every_history_folder_are_passed_over(
    isolated_env: Path, shop: Path, claude: ClaudeHome
) -> None:
    home = isolated_env
    claude.transcript(shop, "s1", shop, ("where do herons nest", "by the north pond"))
    fifo(home / ".korg" / "sessions" / "pipe.jsonl")
    fifo(claude.project(shop) / "pipe.jsonl")
    fifo(home / ".codex" / "sessions" / "2026" / "pipe.jsonl")
    for argv in (["index"], ["recall", "--query", "herons"], ["stats"], ["context"], ["prune", "--gone"]):
        succeeds(run(*argv, cwd=shop, timeout=BOUND))
    assert "north pond" in run("recall", "--query", "herons", cwd=shop, timeout=BOUND).stdout


def test_a_fifo_in_place_of_a_default_ledger_file_is_a_usage_error_naming_it(
    isolated_env: Path, shop: Path
) -> None:
    pipe = fifo(isolated_env / ".korg" / "claude-events.jsonl")
    for argv in (["index"], ["recall", "--query", "herons"]):
        refuses(run(*argv, cwd=shop, timeout=BOUND), 2, str(pipe))


def test_a_fifo_named_as_a_ledger_is_a_usage_error(shop: Path, tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "named.jsonl")
    refuses(
        run("recall", "--query", "x", "--ledger", str(pipe), cwd=shop, timeout=BOUND), 2, "not a regular file"
    )
    refuses(
        run("recall", "--query", "x", cwd=shop, env={"KORG_RECALL_LEDGER": str(pipe)}, timeout=BOUND),
        2,
        "not a regular file",
    )
    refuses(run("verify", "--path", str(pipe), cwd=shop, timeout=BOUND), 3, "not a regular file")


def test_fifos_in_the_mirror_and_the_store_folder_hang_no_memory_command(
    isolated_env: Path, shop: Path
) -> None:
    succeeds(run("remember", "--content", "Herons nest near the north pond.", "--type", "note", cwd=shop))
    store = isolated_env / ".local" / "share" / "korg-recall"
    mirror = store / "memories"
    folders = [path for path in mirror.rglob("*") if path.is_dir()]
    for folder in [mirror, *folders]:
        fifo(folder / "pipe.md")
    for argv in (
        ["memories"],
        ["memories", "--stats"],
        ["recall", "--query", "herons"],
        ["context"],
        ["stats"],
        ["export"],
    ):
        succeeds(run(*argv, cwd=shop, timeout=BOUND))
    stats = json.loads(run("memories", "--stats", cwd=shop, timeout=BOUND).stdout)
    assert any(path.endswith("pipe.md") for path in stats["mirror"]["unparseable"])  # its usual report


def test_fifos_as_claude_memory_and_instructions_files_are_skipped(
    isolated_env: Path, shop: Path, claude: ClaudeHome
) -> None:
    memory = claude.memory(shop)
    # Claude Code keeps a session beside every memory folder; it names the folder's project. (Without
    # it the folder is found by decoding its name on disk, which gives up in a directory of more than
    # 5,000 entries, as pytest's base temp is late in a full run: the file would be skipped as
    # "project unknown", not as "not a regular file".)
    claude.transcript(shop, "s1", shop)
    (memory / "user_role.md").write_text(
        "---\nname: Role\ndescription: Backend lead\ntype: user\n---\nShort.\n"
    )
    for path in (
        memory / "pipe.md",
        memory / "MEMORY.md",
        claude.root / "CLAUDE.md",
        shop / "CLAUDE.md",
        shop / ".claude" / "CLAUDE.md",
        shop / "CLAUDE.local.md",
        shop / "AGENTS.md",
    ):
        fifo(path)
    for argv in (["memories"], ["recall", "--query", "backend"], ["context"], ["stats"]):
        succeeds(run(*argv, cwd=shop, timeout=BOUND))
    skipped = json.loads(run("memories", "--stats", cwd=shop, timeout=BOUND).stdout)["claude"]["skipped"]
    assert f"{memory / 'pipe.md'}: not a regular file" in skipped


def test_a_fifo_as_claudes_settings_file_is_a_clear_error_of_hooks(
    isolated_env: Path, shop: Path, claude: ClaudeHome
) -> None:
    settings = fifo(claude.root / "settings.json")
    for argv in (["hooks", "install"], ["hooks", "uninstall"]):
        refuses(run(*argv, cwd=shop, timeout=BOUND), 3, "not a regular file")
    succeeds(run("hooks", "status", cwd=shop, timeout=BOUND))
    fifo(shop / ".claude" / "settings.json")
    refuses(run("hooks", "install", "--project", cwd=shop, timeout=BOUND), 3, "not a regular file")
    assert settings.exists()


def test_a_fifo_as_the_hooks_state_file_does_not_block_an_install(isolated_env: Path, shop: Path) -> None:
    state = fifo(isolated_env / ".local" / "share" / "korg-recall" / "hooks-installed.json")
    proc = run("hooks", "install", cwd=shop, timeout=BOUND)
    assert proc.returncode in (0, 3), proc.stderr
    if proc.returncode == 3:
        refuses(proc, 3, "not a regular file")
    assert state.exists()


def test_fifos_given_to_import_are_refused(shop: Path, tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "export.jsonl")
    refuses(run("import", str(pipe), cwd=shop, timeout=BOUND), 2, "not a regular file")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nHerons.\n")
    fifo(folder / "b.md")
    proc = run("import", str(folder), cwd=shop, timeout=BOUND)
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 2:
        refuses(proc, 2, "not a regular file")


def test_a_fifo_as_the_store_or_the_index_is_a_config_error(shop: Path, tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "pipe")
    refuses(
        run("memories", cwd=shop, env={"KORG_RECALL_STORE": str(pipe)}, timeout=BOUND),
        3,
        "not a regular file",
    )
    proc = run("recall", "--query", "x", cwd=shop, env={"KORG_RECALL_INDEX": str(pipe)}, timeout=BOUND)
    refuses(proc, 3, "FIFO")


def test_a_fifo_as_the_tenant_ledgers_file_is_a_config_error(shop: Path, tmp_path: Path) -> None:
    pipe = fifo(tmp_path / "tenant-ledgers")
    env = {
        "KORG_RECALL_TENANT_LEDGERS": str(pipe),
        "KORG_BRIDGE_TENANT": "acme",
        "KORG_BRIDGE_TRANSPORT": "http",
    }
    refuses(run("recall", "--query", "x", cwd=shop, env=env, timeout=BOUND), 3, "not a regular file")


def test_fifos_in_a_model_folder_mean_no_model_not_a_hang(shop: Path, tmp_path: Path) -> None:
    models = tmp_path / "model"
    for name in ("korg-model.json", "config.json", "tokenizer.json", "tokenizer_config.json", "model.onnx"):
        fifo(models / name)
    fifo(models / "1_Pooling" / "config.json")
    env = {"KORG_RECALL_MODEL_DIR": str(models)}
    for argv in (["stats"], ["recall", "--query", "x"], ["memories"]):
        succeeds(run(*argv, cwd=shop, env=env, timeout=BOUND))


def test_a_fifo_as_a_projects_git_file_still_gives_a_context(tmp_path: Path) -> None:
    project = tmp_path / "worktree"
    project.mkdir()
    fifo(project / ".git")
    succeeds(run("context", cwd=project, timeout=BOUND))
    succeeds(run("memories", cwd=project, timeout=BOUND))


def bridge(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "korg_bridge", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=BOUND,
        check=False,
    )


def test_a_fifo_as_the_bridges_token_file_or_audit_log_is_a_config_error(tmp_path: Path) -> None:
    tokens = fifo(tmp_path / "tokens")
    audit = fifo(tmp_path / "audit.jsonl")
    refuses(
        bridge("--http", "127.0.0.1:0", "--token-file", str(tokens), str(THUMP)),
        3,
        "not a regular file",
        "korg-bridge",
    )
    refuses(bridge("--audit", str(audit), "--list-tools", str(THUMP)), 3, "not a regular file", "korg-bridge")
