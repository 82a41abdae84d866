"""``korg-recall sync``, ``sync init``, ``sync status`` and ``sync config``: command line only.

They are a person's acts (or the session-start hook's, or a timer's): no tool schema offers them,
so no model can point a store at a remote, read the join key, or push memories off the machine.
The handlers import the sync package lazily: declaring them costs korg-recall's cold start nothing.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from korg_bridge.toolkit import Toolkit

__all__ = ["register"]

INIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "remote": {
            "type": "string",
            "description": (
                "Where the machines meet: a git URL (any the git command reaches: a bare repository, a hosted one) "
                "or a folder (Syncthing, Dropbox, a network share). The same on every machine."
            ),
        },
        "join": {
            "type": "string",
            "description": (
                "The join key another machine printed (`sync init` on the first machine, `sync status --key`); "
                "- reads it from stdin. Leave it out on the first machine only."
            ),
        },
    },
    "required": ["remote"],
}

STATUS_FLAGS: dict[str, Any] = {
    "key": {
        "type": "boolean",
        "description": "Also print the join key (secret: it opens every synced memory).",
    },
}


CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "on_session_start": {
            "type": "string",
            "enum": ["on", "off"],
            "description": (
                "Whether the session-start hook (`korg-recall context --hook`) starts a sync in the background "
                "(default on once sync is set up). Leave it out to show the settings."
            ),
        },
    },
}


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def init_cmd(args: dict[str, Any]) -> int:
    from korg_bridge.recall.sync.steps import init

    join = args.get("join")
    if join == "-":
        join = sys.stdin.readline(4096).strip()
    _print(init(os.environ, str(args["remote"]), str(join) if join else None))
    return 0


def sync_cmd(args: dict[str, Any]) -> int:
    from korg_bridge.recall.memory.scopes import Context
    from korg_bridge.recall.sync.steps import sync

    _print(sync(os.environ, Context.from_env(os.environ)))
    return 0


def status_cmd(args: dict[str, Any]) -> int:
    from korg_bridge.recall.sync.steps import status

    _print(status(os.environ, show_key=bool(args.get("key"))))
    return 0


def config_cmd(args: dict[str, Any]) -> int:
    from korg_bridge.recall.sync.steps import configure

    choice = args.get("on_session_start")
    _print(configure(os.environ, on_session_start=None if choice is None else choice == "on"))
    return 0


def register(kit: Toolkit) -> None:
    """Declare the sync commands on korg-recall's toolkit."""
    kit.command(
        "korg-recall.sync",
        description=(
            "Sync memories with this person's other machines: pull and apply their operations, then push this "
            "machine's (user and project scopes; end-to-end encrypted). Set up first with `sync init`."
        ),
        input_schema={"type": "object", "properties": {}},
        side_effects="network",
        output_mode="envelope",
        surfaces=["cli"],
        on_interrupt="nothing is half applied; run `korg-recall sync` again",
    )(sync_cmd)
    kit.command(
        "korg-recall.sync.init",
        description=(
            "Set this machine up to sync memories through a git remote or a folder: a machine id is made; the "
            "first machine prints the join key, every other machine passes it with --join."
        ),
        input_schema=INIT_SCHEMA,
        side_effects="network",
        output_mode="envelope",
        surfaces=["cli"],
    )(init_cmd)
    kit.command(
        "korg-recall.sync.status",
        description="Show this machine's sync set-up: machine id, remote, key epoch, how far each machine was applied.",
        input_schema={"type": "object", "properties": {}},
        side_effects="fs_read",
        output_mode="envelope",
        surfaces=["cli"],
        cli_properties=STATUS_FLAGS,
    )(status_cmd)
    kit.command(
        "korg-recall.sync.config",
        description=(
            "Show or change this machine's sync settings: whether the session-start hook syncs in the background "
            "(--on-session-start on|off)."
        ),
        input_schema=CONFIG_SCHEMA,
        side_effects="fs_write",
        output_mode="envelope",
        surfaces=["cli"],
    )(config_cmd)
