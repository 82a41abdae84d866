"""The ``hooks install|uninstall|status`` commands of korg-recall (the work is :mod:`.hooks`).

``install`` and ``uninstall`` change a file of the user's agent settings, so they
are a person's acts at a terminal: declared ``surfaces=["cli"]`` (the bridge
does not serve them). ``status`` only reads, and is a tool as well.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.interop.hooks import hook_command, install, status, target_of, uninstall

if TYPE_CHECKING:
    from korg_bridge.toolkit import Toolkit

__all__ = ["register"]


def _chosen(args: Mapping[str, Any]) -> tuple[str, str]:
    """Raises:
    UsageError: both agents, or both levels."""
    if args.get("claude") and args.get("codex"):
        raise UsageError("pass --claude or --codex, not both: each has its own settings file.")
    if args.get("user") and args.get("project"):
        raise UsageError("pass --user or --project, not both.")
    return ("codex" if args.get("codex") else "claude"), ("project" if args.get("project") else "user")


def _print(value: Any, args: Mapping[str, Any]) -> None:
    from korg_bridge.recall.cli.terminal import emit, hooks_text

    emit(value, args, hooks_text)


def _root(env: Mapping[str, str]) -> str:
    from korg_bridge.recall.memory.scopes import Context

    return Context.from_env(env).project.removeprefix("project:")


def install_cmd(args: dict[str, Any]) -> int:
    env = os.environ
    agent, level = _chosen(args)
    _print(install(env, target_of(env, agent, level, _root(env)), hook_command(agent, level)), args)
    return 0


def uninstall_cmd(args: dict[str, Any]) -> int:
    env = os.environ
    agent, level = _chosen(args)
    _print(uninstall(env, target_of(env, agent, level, _root(env))), args)
    return 0


def status_cmd(args: dict[str, Any]) -> int:
    env = os.environ
    _print(status(env, _root(env)), args)
    return 0


def register(kit: Toolkit) -> None:
    """Declare ``hooks install|uninstall|status`` on korg-recall's toolkit."""
    from korg_bridge.recall.cli.schemas import HOOKS_SCHEMA, JSON_CLI_FLAG

    kit.command(
        "korg-recall.hooks.install",
        description=(
            "Add a SessionStart hook running `korg-recall context` to Claude Code's settings.json (or Codex's "
            "hooks.json with --codex), for the user (default) or this project (--project). Everything else in "
            "the file is kept byte for byte, a copy is kept first, and installing twice changes nothing."
        ),
        input_schema=HOOKS_SCHEMA,
        side_effects="fs_write",
        output_mode="envelope",
        surfaces=["cli"],
        cli_properties=JSON_CLI_FLAG,
    )(install_cmd)
    kit.command(
        "korg-recall.hooks.uninstall",
        description="Remove exactly the hook `hooks install` added (the original file comes back when unchanged since).",
        input_schema=HOOKS_SCHEMA,
        side_effects="fs_write",
        output_mode="envelope",
        surfaces=["cli"],
        cli_properties=JSON_CLI_FLAG,
    )(uninstall_cmd)
    kit.command(
        "korg-recall.hooks.status",
        description="Show which agent settings files (user and project, Claude Code and Codex) run korg-recall's brief.",
        input_schema={"type": "object", "properties": {}},
        side_effects="fs_read",
        output_mode="envelope",
        cli_properties=JSON_CLI_FLAG,
    )(status_cmd)
