"""``korg-bridge BINARY``: the command line, and the one top-level error handler.

stdout carries results only (the table of ``--list-tools``, or in server mode
the JSON-RPC stream itself); every diagnostic goes to stderr through logging.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import anyio

from ._version import __version__
from .contract import Document
from .discovery import DEFAULT_DISCOVERY_TIMEOUT, discover
from .errors import KorgError, UsageError
from .invocation import DEFAULT_CALL_TIMEOUT
from .policy import ENV_VAR, Policy
from .server import DEFAULT_MAX_CONCURRENCY, BridgeOptions, Catalogue, build_server, serve_stdio
from .toolkit import USER_INTERRUPT, silence_stdout
from .toolnames import NAME_STYLES

log = logging.getLogger("korg_bridge")

PROG = "korg-bridge"


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=(
            "Serve the callables of any korg:introspect@v1 binary as MCP tools over stdio. "
            f"Side-effecting callables are refused unless {ENV_VAR} or --allow permits them."
        ),
        epilog=f"Example: {PROG} thump --list-tools",
    )
    parser.add_argument("binary", nargs="?", help="the binary: a name on PATH, or a path")
    parser.add_argument(
        "--allow",
        metavar="LIST",
        help=f"side effects to allow: comma-separated fs_write,network,ledger_write, or all (overrides {ENV_VAR})",
    )
    parser.add_argument("--list-tools", action="store_true", help="print the tools and the policy, then exit")
    parser.add_argument(
        "--json", action="store_true", help="with --list-tools: print JSON instead of a table"
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_CALL_TIMEOUT,
        metavar="S",
        help=f"seconds one tool call may run (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    parser.add_argument(
        "--discovery-timeout",
        type=_positive_float,
        default=DEFAULT_DISCOVERY_TIMEOUT,
        metavar="S",
        help=f"seconds '<binary> --introspect' may take (default {DEFAULT_DISCOVERY_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-concurrency",
        type=_positive_int,
        default=DEFAULT_MAX_CONCURRENCY,
        metavar="N",
        help=f"tool calls running at once (default {DEFAULT_MAX_CONCURRENCY})",
    )
    parser.add_argument(
        "--tool-names",
        choices=NAME_STYLES,
        default="safe",
        help="safe: names every client accepts (default); command-id: names equal command_ids",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true", help="verbose logs and tracebacks on stderr")
    return parser


def _setup_logging(debug: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


def tools_report(document: Document, catalogue: Catalogue, policy: Policy) -> dict[str, Any]:
    """What ``--list-tools --json`` prints."""
    tools: list[dict[str, Any]] = []
    for entry in catalogue.entries:
        caps = entry.spec.capabilities
        tools.append(
            {
                "name": entry.name,
                "command_id": entry.spec.command_id,
                "side_effects": caps.side_effects,
                "output_mode": caps.output_mode,
                "long_running": caps.long_running,
                "status": "allowed" if entry.allowed else "denied",
                "reason": None if entry.allowed else entry.denial,
            }
        )
    for skipped in document.skipped:
        tools.append(
            {
                "name": None,
                "command_id": skipped.command_id,
                "side_effects": None,
                "output_mode": None,
                "long_running": None,
                "status": "skipped",
                "reason": skipped.reason,
            }
        )
    return {
        "binary": document.binary,
        "version": document.version,
        "path": document.path,
        "policy": {
            "source": policy.source,
            "allow_all": policy.allow_all,
            "allowed": sorted(policy.allowed),
            "description": policy.describe(),
        },
        "tools": tools,
    }


def print_table(report: dict[str, Any], out: TextIO) -> None:
    headers = ["TOOL", "COMMAND_ID", "SIDE_EFFECTS", "OUTPUT_MODE", "LONG_RUNNING", "STATUS"]
    rows = []
    for tool in report["tools"]:
        status = {"allowed": "ok", "denied": "DENIED", "skipped": "SKIPPED"}[tool["status"]]
        if tool["reason"] and tool["status"] == "skipped":
            status += f": {tool['reason']}"
        elif tool["status"] == "denied":
            status += ": " + _denial_hint(tool)
        rows.append(
            [
                tool["name"] or "-",
                tool["command_id"],
                tool["side_effects"] or ("-" if tool["status"] == "skipped" else "unspecified"),
                tool["output_mode"] or ("-" if tool["status"] == "skipped" else "unspecified"),
                "-" if tool["long_running"] is None else str(tool["long_running"]).lower(),
                status,
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    version = f" {report['version']}" if report["version"] else ""
    out.write(f"{report['binary']}{version} ({report['path']})\n")
    out.write(f"policy: {report['policy']['description']}\n\n")
    for row in [headers, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        out.write("  ".join([*cells, row[-1]]).rstrip() + "\n")
    counts = {
        s: sum(1 for t in report["tools"] if t["status"] == s) for s in ("allowed", "denied", "skipped")
    }
    out.write(f"\n{counts['allowed']} allowed, {counts['denied']} denied, {counts['skipped']} skipped\n")


def _denial_hint(tool: dict[str, Any]) -> str:
    if tool["output_mode"] == "session":
        return "interactive session, never served"
    effect = tool["side_effects"]
    if effect in ("fs_write", "network", "ledger_write"):
        return f"needs {effect}"
    return "unknown side effects, needs all"


async def _run(args: argparse.Namespace, policy: Policy) -> int:
    document = await discover(args.binary, timeout=args.discovery_timeout)
    for skipped in document.skipped:
        log.warning("skipping callable %s: %s", skipped.command_id, skipped.reason)
    options = BridgeOptions(
        policy=policy,
        timeout=args.timeout,
        max_concurrency=args.max_concurrency,
        tool_names=args.tool_names,
    )
    if args.list_tools:
        catalogue = Catalogue(document, policy, args.tool_names)
        report = tools_report(document, catalogue, policy)
        if args.json:
            sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        else:
            print_table(report, sys.stdout)
        sys.stdout.flush()
        return 0
    if not document.callables:
        log.warning("%s declares no servable callables; serving an empty tool list", args.binary)
    log.info("serving %d tool(s) of %s; %s", len(document.callables), document.binary, policy.describe())
    await serve_stdio(build_server(document, options))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``korg-bridge``; returns the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else 2
    _setup_logging(args.debug)
    try:
        if not args.binary:
            raise UsageError(f"missing BINARY. Usage: {PROG} BINARY [--list-tools]; see {PROG} --help")
        if args.json and not args.list_tools:
            raise UsageError("--json only applies to --list-tools; add --list-tools.")
        policy = Policy.parse(args.allow) if args.allow is not None else Policy.from_env(os.environ)
        return anyio.run(_run, args, policy)
    except KorgError as exc:
        if args.debug:
            log.exception("failed")
        sys.stderr.write(f"{PROG}: error: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return USER_INTERRUPT
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): nothing left to say to anyone.
        silence_stdout()
        return 0
    except Exception as exc:  # the last line of defence: never a traceback without --debug
        if args.debug:
            raise
        sys.stderr.write(f"{PROG}: error: internal error: {exc!r}. Rerun with --debug for details.\n")
        return 1
