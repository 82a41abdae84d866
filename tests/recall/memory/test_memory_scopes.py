"""Scopes: a project's memories stay in that project; ``user`` memories go everywhere; the
worktrees of one repository are one project. The working directory decides, as it does for an
agent that starts korg-recall in its checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from korg_bridge.recall.project import project_root
from tests.helpers.cli import failed, ok, run_recall
from tests.helpers.memory import git_repo


def lines(cwd: Path, *flags: str) -> list[str]:
    return list(ok(run_recall("memories", "--budget-tokens", "20000", *flags, cwd=cwd))["lines"])


def test_a_project_memory_is_invisible_from_another_project(tmp_path: Path) -> None:
    shop, blog = git_repo(tmp_path / "shop"), git_repo(tmp_path / "blog")
    made = ok(
        run_recall(
            "remember", "--content", "Shop tests need make db first.", "--type", "project", cwd=shop / ""
        )
    )
    assert made["scope"] == f"project:{shop.resolve()}"
    assert any(made["id"] in line for line in lines(shop))
    assert not any(made["id"] in line for line in lines(blog))
    failed(run_recall("memories", "--ids", made["id"], cwd=blog), 2, f"no memory {made['id']}")
    named = ok(run_recall("memories", "--ids", made["id"], "--scope", f"project:{shop}", cwd=blog))
    assert named["memories"][0]["body"] == "Shop tests need make db first."


def test_a_user_memory_is_visible_in_every_project_and_outside_git(tmp_path: Path) -> None:
    shop, blog = git_repo(tmp_path / "shop"), git_repo(tmp_path / "blog")
    plain = tmp_path / "plain"
    plain.mkdir()
    made = ok(
        run_recall(
            "remember", "--content", "The user prefers pnpm.", "--type", "user", "--scope", "user", cwd=shop
        )
    )
    assert made["scope"] == "user"
    for where in (shop, blog, plain):
        assert any(made["id"] in line and "(user)" in line for line in lines(where)), where


def test_outside_git_a_write_defaults_to_the_user_scope(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    made = ok(
        run_recall("remember", "--content", "Prefer short commit subjects.", "--type", "feedback", cwd=plain)
    )
    assert made["scope"] == "user"


def test_worktrees_and_subfolders_of_one_repository_share_its_scope(tmp_path: Path) -> None:
    shop = git_repo(tmp_path / "shop")
    subprocess.run(
        ["git", "worktree", "add", "-q", str(tmp_path / "shop-feature")],
        cwd=shop,
        check=True,
        timeout=30,
        capture_output=True,
    )
    (shop / "src").mkdir()
    made = ok(
        run_recall(
            "remember",
            "--content",
            "Checkout uses Stripe test keys.",
            "--type",
            "project",
            cwd=tmp_path / "shop-feature",
        )
    )
    assert made["scope"] == f"project:{shop.resolve()}"
    assert any(made["id"] in line for line in lines(shop / "src"))
    assert project_root(str(tmp_path / "shop-feature")) == str(shop.resolve())


def test_korg_recall_project_overrides_the_working_directory(tmp_path: Path) -> None:
    shop, blog = git_repo(tmp_path / "shop"), git_repo(tmp_path / "blog")
    made = ok(
        run_recall(
            "remember",
            "--content",
            "Blog builds with Hugo.",
            "--type",
            "project",
            cwd=shop,
            env={"KORG_RECALL_PROJECT": str(blog)},
        )
    )
    assert made["scope"] == f"project:{blog.resolve()}"
    assert any(made["id"] in line for line in lines(blog))


@pytest.mark.parametrize("scope", ["everywhere", "project:relative/path", "agent:", "session:a b", "team:x"])
def test_a_bad_scope_is_a_usage_error_naming_the_forms(tmp_path: Path, scope: str) -> None:
    failed(
        run_recall("remember", "--content", "x", "--type", "note", "--scope", scope, cwd=tmp_path),
        2,
        "bad scope",
    )


def test_agent_and_session_scopes_are_their_own(tmp_path: Path) -> None:
    shop = git_repo(tmp_path / "shop")
    made = ok(
        run_recall(
            "remember",
            "--content",
            "Reviewer bot: be terse.",
            "--type",
            "feedback",
            "--scope",
            "agent:reviewer",
            cwd=shop,
        )
    )
    assert made["scope"] == "agent:reviewer"
    assert not any(made["id"] in line for line in lines(shop))
    assert any(made["id"] in line for line in lines(shop, "--scope", "agent:reviewer"))
