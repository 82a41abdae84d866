"""``korg-recall export`` and ``korg-recall import``: a person's commands, never a model's tools.

Both are declared ``surfaces=["cli"]`` (``cli_only`` in the introspect
document), so ``korg-bridge korg-recall`` does not serve them: an agent that
could import could plant thousands of memories at once, and one that could
export could copy a person's whole store somewhere. The rest is in
:mod:`.export` (what is written) and :mod:`.incoming` / :mod:`.importer`
(what is read, and how it is written).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.cli.schemas import JSON_CLI_FLAG

if TYPE_CHECKING:
    from korg_bridge.toolkit import Toolkit

__all__ = ["EXPORT_SCHEMA", "IMPORT_SCHEMA", "register"]

EXPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "scope": {
            "type": "string",
            "description": "Only this scope (user, project, project:/path, agent:NAME, session:ID); default: every scope.",
        },
        "format": {
            "type": "string",
            "enum": ["jsonl", "markdown"],
            "default": "jsonl",
            "description": (
                "jsonl: every version, state and link, lossless (what import restores). markdown: the live "
                "memories as files with front matter, in the mirror's layout (needs --output DIR)."
            ),
        },
        "output": {
            "type": "string",
            "description": (
                "Where to write: a new file for jsonl (default: stdout), an absent or empty folder for markdown. "
                "Nothing existing is ever overwritten."
            ),
        },
    },
}

IMPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": (
                "A korg-recall export, a folder (or file) of Markdown memories (ours, or Claude Code's memory "
                "files), the MCP memory server's memory.jsonl, or a mem0 JSON export; the format is detected."
            ),
        },
        "scope": {
            "type": "string",
            "description": (
                "The scope foreign memories go to (default: the scope a file's front matter names, else this "
                "project inside git, else user). Not for an export, which keeps its scopes."
            ),
        },
    },
    "required": ["path"],
}


def _env() -> Mapping[str, str]:
    return os.environ


def export_cmd(args: dict[str, Any]) -> int:

    from korg_bridge.errors import UsageError
    from korg_bridge.recall.cli.terminal import emit, export_text, wants_text
    from korg_bridge.recall.memory.backend.factory import open_store, store_exists
    from korg_bridge.recall.memory.scopes import Context, parse_scope
    from korg_bridge.recall.memory.transfer.export import check_markdown_target, export_jsonl, export_markdown
    from korg_bridge.recall.paths import store_location

    ctx = Context.from_env(_env())
    scope = parse_scope(args["scope"], ctx.project) if args.get("scope") else None
    output = Path(os.path.abspath(os.path.expanduser(args["output"]))) if args.get("output") else None
    markdown = args.get("format") == "markdown"
    if markdown and output is None:
        raise UsageError("a Markdown export writes files: pass --output DIR (an absent or empty folder).")
    if output is None and wants_text(args):
        raise UsageError(
            "export writes JSONL for import and scripts, not for reading: pass --output FILE (a new file), "
            "redirect it (korg-recall export > memories.jsonl), or --json to print it here anyway. To read "
            "memories, use korg-recall memories."
        )
    if markdown and output is not None:
        check_markdown_target(output)  # before the store is opened
    if not store_exists(ctx.env):
        sys.stderr.write(
            f"korg-recall: note: no memory store at {store_location(ctx.env).label}; the export is empty.\n"
        )
        store = None
    else:
        store = open_store(ctx.env)
    try:
        if store is not None:
            _take_in_hand_edits(store, ctx, scope)
        if markdown and output is not None:
            result = export_markdown(store, scope=scope, folder=output)
        else:
            result = export_jsonl(store, scope=scope, output=output, now=ctx.now)
    finally:
        if store is not None:
            store.close()
    if output is not None:  # stdout is free: say what was written
        emit({"format": args.get("format"), "scope": scope, **result}, args, export_text)
    return 0


def _take_in_hand_edits(store: Any, ctx: Any, scope: str | None) -> None:
    """Hand edits of the mirror not taken in yet belong in the export (as before any read)."""
    from korg_bridge.recall.memory.mirror.readback import sync_mirror

    if scope:
        scopes = [scope]
    else:
        with store.reading() as tx:
            scopes = [row[0] for row in tx.execute("SELECT DISTINCT scope FROM memory")]
    sync_mirror(store, ctx, scopes)


def import_cmd(args: dict[str, Any]) -> int:
    import json

    from korg_bridge.recall.memory.backend.factory import open_store
    from korg_bridge.recall.memory.scopes import Context
    from korg_bridge.recall.memory.transfer.formats import read_source
    from korg_bridge.recall.memory.transfer.importer import apply_import, prepare_import

    ctx = Context.from_env(_env())
    ctx.check_writes("import")
    prepared = prepare_import(read_source(str(args["path"])), ctx, args.get("scope"))  # no store yet
    with open_store(ctx.env) as store:
        result = apply_import(store, ctx, prepared)
    from korg_bridge.recall.memory.backfill import fill_later

    fill_later(ctx.env)  # imported memories are embedded in the background, never while importing
    sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return 0


def register(kit: Toolkit) -> None:
    """Declare ``export`` and ``import`` on korg-recall's toolkit (command line only)."""
    kit.command(
        "korg-recall.export",
        description=(
            "Write the memory store out: lossless JSONL (every version, state, provenance and link; to stdout "
            "or a new file) that import restores, or the live memories as Markdown files in a new folder. "
            "A person's command: not offered to models."
        ),
        input_schema=EXPORT_SCHEMA,
        side_effects="fs_write",
        output_mode="envelope",
        surfaces=["cli"],
        cli_properties=JSON_CLI_FLAG,
    )(export_cmd)
    kit.command(
        "korg-recall.import",
        description=(
            "Import memories from a korg-recall export (verbatim), Markdown files with front matter (ours or "
            "Claude Code's), the MCP memory server's memory.jsonl or a mem0 JSON export (through the write "
            "policy: importing twice adds nothing). All or nothing, logged. A person's command: not offered "
            "to models."
        ),
        input_schema=IMPORT_SCHEMA,
        side_effects="fs_write",
        output_mode="envelope",
        positional="path",
        surfaces=["cli"],
    )(import_cmd)
