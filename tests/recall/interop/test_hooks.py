"""``korg-recall hooks``: a SessionStart hook added to the agent's settings without disturbing the
rest of the file, idempotent, removed exactly, and refused on a file it cannot parse."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from korg_bridge.recall.interop.guarded_write import Changed, replace, take
from tests.helpers.claude import ClaudeHome, git_repo
from tests.helpers.cli import answer, call_recall, failed, ok, run_recall

SETTINGS = """{
    "permissions": {
        "allow": ["Bash(npm run lint)", "Read(~/.zshrc)"],
        "deny": ["Read(./.env)"]
    },
    "env": {"FOO": "bar \\u00e9"},
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo pre"}]}
        ],
        "SessionStart": [
            {
                "matcher": "startup",
                "hooks": [{"type": "command", "command": "echo other tool"}]
            }
        ]
    },
    "statusLine": {"type": "command", "command": "~/bin/status"}
}
"""


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = git_repo(tmp_path / "src" / "shop")
    monkeypatch.chdir(repo)
    return repo.resolve()


def inserted_only(before: str, after: str) -> str:
    """What ``after`` adds to ``before`` when it only inserts one stretch of text (else fail)."""
    head = 0
    while head < len(before) and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < len(before) - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    assert head + tail == len(before), "text outside the insertion changed"
    return after[head : len(after) - tail]


def ours(settings: dict[str, object]) -> list[dict[str, object]]:
    groups = settings["hooks"]["SessionStart"]  # type: ignore[index]
    return [g for g in groups if "context --hook" in json.dumps(g)]  # type: ignore[union-attr]


def test_install_keeps_the_rest_of_the_file_byte_for_byte(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    path = claude.root / "settings.json"
    path.write_text(SETTINGS)
    result = answer(capsys, "hooks", "install", "--claude")
    assert (result["status"], result["file"], result["reformatted"]) == ("installed", str(path), False)
    after = path.read_text()
    added = inserted_only(SETTINGS, after)
    assert added.startswith(",\n            {") and '"matcher": "startup|clear|compact"' in added
    settings = json.loads(after)
    original = json.loads(SETTINGS)
    assert {k: v for k, v in settings.items() if k != "hooks"} == {
        k: v for k, v in original.items() if k != "hooks"
    }
    assert settings["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    assert settings["hooks"]["SessionStart"][0] == original["hooks"]["SessionStart"][0]
    (group,) = ours(settings)
    assert group["hooks"][0]["timeout"] == 10 and group["hooks"][0]["command"].endswith(
        " context --hook claude"
    )
    assert Path(result["backup"]).read_text() == SETTINGS


def test_install_is_idempotent(capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path) -> None:
    path = claude.root / "settings.json"
    path.write_text(SETTINGS)
    answer(capsys, "hooks", "install")
    once = path.read_bytes()
    again = answer(capsys, "hooks", "install")
    assert again["status"] == "already installed"
    assert path.read_bytes() == once
    backups = list((Path(os.environ["HOME"]) / ".local/share/korg-recall/hook-backups").iterdir())
    assert len(backups) == 1


@pytest.mark.parametrize(
    "original",
    [
        SETTINGS,
        '{\n  "model": "opus"\n}\n',  # no hooks at all
        '{\n\t"hooks": {\n\t\t"Stop": []\n\t}\n}\n',  # hooks, no SessionStart; tabs
        '{"model": "opus", "hooks": {"SessionStart": []}}',  # one line, an empty list
        "{}",
    ],
)
def test_uninstall_restores_the_original_file(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, original: str
) -> None:
    path = claude.root / "settings.json"
    path.write_text(original)
    installed = answer(capsys, "hooks", "install")
    assert installed["reformatted"] is False
    assert len(ours(json.loads(path.read_text()))) == 1
    inserted_only(original, path.read_text())
    removed = answer(capsys, "hooks", "uninstall")
    assert removed["status"] == "restored the file as it was before install"
    assert path.read_text() == original
    assert answer(capsys, "hooks", "uninstall")["status"] == "not installed"


def test_uninstall_after_other_edits_removes_only_its_hook(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    path = claude.root / "settings.json"
    path.write_text('{\n  "model": "opus"\n}\n')
    answer(capsys, "hooks", "install")
    path.write_text(path.read_text().replace('"opus"', '"sonnet"'))  # the user changes a setting
    removed = answer(capsys, "hooks", "uninstall")
    assert removed["status"].startswith("removed korg-recall's hook")
    assert path.read_text() == '{\n  "model": "sonnet"\n}\n'


def test_a_file_install_created_is_deleted_by_uninstall(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    path = claude.root / "settings.json"
    assert answer(capsys, "hooks", "install")["backup"] is None
    assert ours(json.loads(path.read_text()))
    assert answer(capsys, "hooks", "uninstall")["status"] == "removed the file install created"
    assert not path.exists()


def test_an_unparseable_settings_file_is_refused_untouched(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    path = claude.root / "settings.json"
    path.write_text('{"model": "opus",,}\n')
    code, out, err = call_recall(capsys, "hooks", "install")
    assert (code, out) == (3, "")
    assert (
        err.startswith(f"korg-recall: error: cannot parse {path} (line 1 column 18") and err.count("\n") == 1
    )
    assert path.read_text() == '{"model": "opus",,}\n'
    assert not (Path(os.environ["HOME"]) / ".local/share/korg-recall/hook-backups").exists()
    status = answer(capsys, "hooks", "status")["hooks"][0]
    assert status["installed"] is False and "cannot parse" in status["error"]
    path.write_text('{"hooks": []}')
    code, _, err = call_recall(capsys, "hooks", "install")
    assert code == 3 and '"hooks" is a list, not an object' in err


def test_a_symlinked_settings_file_stays_a_symlink(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{\n  "model": "opus"\n}\n')
    link = claude.root / "settings.json"
    link.symlink_to(dotfiles)
    answer(capsys, "hooks", "install")
    assert link.is_symlink() and ours(json.loads(dotfiles.read_text()))


def test_project_and_codex_targets(
    capsys: pytest.CaptureFixture[str],
    claude: ClaudeHome,
    shop: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = answer(capsys, "hooks", "install", "--project")
    assert project["file"] == str(shop / ".claude" / "settings.json")
    assert project["command"] == "korg-recall context --hook claude"  # a shared file: from PATH
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    codex = answer(capsys, "hooks", "install", "--codex")
    assert codex["file"] == str(tmp_path / "codex" / "hooks.json") and "trust" in codex["note"]
    group = json.loads((tmp_path / "codex" / "hooks.json").read_text())["hooks"]["SessionStart"][0]
    assert group["matcher"] == "startup|clear"
    status = {(h["agent"], h["level"]): h["installed"] for h in answer(capsys, "hooks", "status")["hooks"]}
    assert status == {
        ("claude", "user"): False,
        ("claude", "project"): True,
        ("codex", "user"): True,
        ("codex", "project"): False,
    }
    code, _, err = call_recall(capsys, "hooks", "install", "--claude", "--codex")
    assert code == 2 and "not both" in err


def test_the_installed_command_prints_the_brief_as_hook_json(
    capsys: pytest.CaptureFixture[str], claude: ClaudeHome, shop: Path
) -> None:
    answer(capsys, "remember", "--content", "Deploys need two approvals.", "--type", "feedback")
    command = answer(capsys, "hooks", "install")["command"]
    proc = subprocess.run(
        shlex.split(command), cwd=shop, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(shop)}, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)["hookSpecificOutput"]
    assert (
        output["hookEventName"] == "SessionStart"
        and "Deploys need two approvals." in output["additionalContext"]
    )


def test_a_file_changed_since_it_was_read_is_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("- [A](a.md)\n")
    snapshot = take(path, 1 << 20)
    path.write_text("- [A](a.md)\n- [B](b.md) — Claude wrote this meanwhile\n")
    with pytest.raises(Changed, match="nothing was written"):
        replace(snapshot, b"korg-recall's version\n", lock=tmp_path / "lock")
    assert path.read_text() == "- [A](a.md)\n- [B](b.md) — Claude wrote this meanwhile\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md", "lock"]  # no temp file left
    fresh = take(path, 1 << 20)
    replace(fresh, b"new\n", lock=tmp_path / "lock")
    assert path.read_bytes() == b"new\n"


# --- through the real CLI: a team store, settings parsers disagree on, folders install made ------


def hooks_cli(shop: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_recall("hooks", *argv, cwd=shop, env=env)


def test_hooks_work_with_a_postgresql_store(claude: ClaudeHome, shop: Path) -> None:
    team = {
        "KORG_RECALL_STORE": "postgresql://korg@127.0.0.1:1/team"
    }  # never connected to: hooks need no store
    installed = ok(hooks_cli(shop, "install", **team))
    assert installed["status"] == "installed" and ours(
        json.loads((claude.root / "settings.json").read_text())
    )
    data = Path(os.environ["HOME"]) / ".local" / "share" / "korg-recall"
    assert (data / "hooks-installed.json").is_file()
    assert ok(hooks_cli(shop, "status", **team))["hooks"][0]["installed"] is True
    assert ok(hooks_cli(shop, "uninstall", **team))["status"] == "removed the file install created"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"hooks": null}', '"hooks" is null, not an object'),
        ('{"hooks": {"SessionStart": null}}', '"hooks.SessionStart" is not a list'),
        ('{"model": "opus", "cost": NaN}', "it holds NaN, which is not JSON"),
        ('{"hooks": {"Stop": [], "Stop": [{"hooks": []}]}}', 'the key "Stop" appears twice in one object'),
        ('{"hooks": {}, "hooks": {"Stop": []}}', 'the key "hooks" appears twice in one object'),
    ],
)
def test_a_settings_file_korg_recall_cannot_edit_safely_exits_3_naming_the_problem(
    claude: ClaudeHome, shop: Path, text: str, problem: str
) -> None:
    path = claude.root / "settings.json"
    path.write_text(text)
    line = failed(hooks_cli(shop, "install"), 3, problem)
    assert line == f"korg-recall: error: {path}: {problem}; fix it by hand first. Nothing was changed."
    assert path.read_text() == text
    assert not (Path(os.environ["HOME"]) / ".local/share/korg-recall/hook-backups").exists()


def test_uninstall_removes_the_empty_folders_install_created_and_only_those(
    claude: ClaudeHome, shop: Path, tmp_path: Path
) -> None:
    assert not (shop / ".claude").exists()
    ok(hooks_cli(shop, "install", "--project"))
    removed = ok(hooks_cli(shop, "uninstall", "--project"))
    assert removed["removed_folders"] == [str(shop / ".claude")]
    assert not (shop / ".claude").exists()
    codex = tmp_path / "new" / "codex-home"  # two folders made for the user's hooks.json
    ok(hooks_cli(shop, "install", "--codex", CODEX_HOME=str(codex)))
    assert ok(hooks_cli(shop, "uninstall", "--codex", CODEX_HOME=str(codex)))["removed_folders"] == [
        str(codex),
        str(codex.parent),
    ]
    assert not codex.parent.exists() and tmp_path.is_dir()


def test_uninstall_keeps_a_folder_install_created_once_something_else_is_in_it(
    claude: ClaudeHome, shop: Path
) -> None:
    ok(hooks_cli(shop, "install", "--project"))
    (shop / ".claude" / "commands").mkdir()  # the user added something beside settings.json
    removed = ok(hooks_cli(shop, "uninstall", "--project"))
    assert "removed_folders" not in removed
    assert (shop / ".claude" / "commands").is_dir() and not (shop / ".claude" / "settings.json").exists()
    existing = claude.root  # existed before install: never removed
    ok(hooks_cli(shop, "install"))
    assert "removed_folders" not in ok(hooks_cli(shop, "uninstall"))
    assert existing.is_dir()
