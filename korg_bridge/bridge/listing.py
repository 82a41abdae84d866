"""``--list-tools``: the dry run, as a table or as JSON.

It shows everything a user needs to predict what an agent will see: each
tool's name and capabilities, whether the policy allows it (and what would),
and every callable that is skipped or filtered out, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from korg_bridge.bridge.catalogue import Catalogue
from korg_bridge.bridge.contract import Document
from korg_bridge.bridge.policy import Policy

STATUS_LABELS = {"allowed": "ok", "denied": "DENIED", "skipped": "SKIPPED", "excluded": "EXCLUDED"}


def _row(
    binary: str, name: str | None, command_id: str, status: str, reason: str | None, **caps: Any
) -> dict[str, Any]:
    return {
        "binary": binary,
        "name": name,
        "command_id": command_id,
        "side_effects": caps.get("side_effects"),
        "output_mode": caps.get("output_mode"),
        "long_running": caps.get("long_running"),
        "status": status,
        "reason": reason,
    }


def tools_report(documents: Sequence[Document], catalogue: Catalogue, policy: Policy) -> dict[str, Any]:
    """What ``--list-tools --json`` prints."""
    tools: list[dict[str, Any]] = []
    for entry in catalogue.entries:
        caps = entry.spec.capabilities
        tools.append(
            _row(
                entry.document.binary,
                entry.name,
                entry.spec.command_id,
                "allowed" if entry.allowed else "denied",
                None if entry.allowed else entry.denial,
                side_effects=caps.side_effects,
                output_mode=caps.output_mode,
                long_running=caps.long_running,
            )
        )
    for document, spec in catalogue.excluded:
        caps = spec.capabilities
        tools.append(
            _row(
                document.binary,
                None,
                spec.command_id,
                "excluded",
                "filtered out by --include-tool/--exclude-tool",
                side_effects=caps.side_effects,
                output_mode=caps.output_mode,
                long_running=caps.long_running,
            )
        )
    for document in documents:
        for skipped in document.skipped:
            tools.append(_row(document.binary, None, skipped.command_id, "skipped", skipped.reason))
    first = documents[0]
    return {
        "binary": first.binary,
        "version": first.version,
        "path": first.path,
        "binaries": [{"binary": d.binary, "version": d.version, "path": d.path} for d in documents],
        "policy": {
            "source": policy.source,
            "allow_all": policy.allow_all,
            "allowed": sorted(policy.allowed),
            "description": policy.describe(),
        },
        "tools": tools,
    }


def _denial_hint(tool: dict[str, Any]) -> str:
    if tool["output_mode"] == "session":
        return "interactive session, never served"
    effect = tool["side_effects"]
    if effect in ("fs_write", "network", "ledger_write"):
        return f"needs {effect}"
    return "unknown side effects, needs all"


def _status(tool: dict[str, Any]) -> str:
    label = STATUS_LABELS[tool["status"]]
    if tool["status"] == "denied":
        return f"{label}: {_denial_hint(tool)}"
    if tool["status"] == "skipped":
        return f"{label}: {printable(tool['reason'])}"
    return label


def printable(text: str) -> str:
    """``text`` as is when it prints on one line, else its repr: a name ending in a newline
    (a callable the bridge skips for it) must not break a table row or a log line."""
    return text if text.isprintable() else repr(text)


def print_table(report: dict[str, Any], out: TextIO) -> None:
    headers = ["TOOL", "COMMAND_ID", "SIDE_EFFECTS", "OUTPUT_MODE", "LONG_RUNNING", "STATUS"]
    rows = []
    for tool in report["tools"]:
        known = tool["status"] != "skipped"
        rows.append(
            [
                tool["name"] or "-",
                printable(tool["command_id"]),
                tool["side_effects"] or ("unspecified" if known else "-"),
                tool["output_mode"] or ("unspecified" if known else "-"),
                "-" if tool["long_running"] is None else str(tool["long_running"]).lower(),
                _status(tool),
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    for binary in report["binaries"]:
        version = f" {binary['version']}" if binary["version"] else ""
        out.write(f"{binary['binary']}{version} ({binary['path']})\n")
    out.write(f"policy: {report['policy']['description']}\n\n")
    for row in [headers, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        out.write("  ".join([*cells, row[-1]]).rstrip() + "\n")
    counts = {s: sum(1 for t in report["tools"] if t["status"] == s) for s in STATUS_LABELS}
    summary = f"{counts['allowed']} allowed, {counts['denied']} denied, {counts['skipped']} skipped"
    if counts["excluded"]:
        summary += f", {counts['excluded']} excluded"
    out.write(f"\n{summary}\n")
