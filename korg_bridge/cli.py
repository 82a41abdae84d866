"""``korg-bridge BINARY…``: the command line, and the one top-level error handler.

stdout carries results only (the table of ``--list-tools``, or in stdio
server mode the JSON-RPC stream itself); every diagnostic goes to stderr
through logging. The MCP SDK is imported only when a server is built, so
``--version`` and usage errors answer at once.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import anyio

from korg_bridge._version import __version__
from korg_bridge.bridge.discovery import DEFAULT_DISCOVERY_TIMEOUT, discover
from korg_bridge.bridge.invocation import DEFAULT_CALL_TIMEOUT
from korg_bridge.bridge.policy import Policy
from korg_bridge.bridge.toolnames import NAME_STYLES
from korg_bridge.config import ENV_ALLOW
from korg_bridge.errors import UsageError
from korg_bridge.toolkit import USER_INTERRUPT, run_guarded, unknown_words, usage_error

if TYPE_CHECKING:
    from korg_bridge.auth.ratelimit import Rate
    from korg_bridge.auth.tokens import TokenSet
    from korg_bridge.bridge.contract import Document
    from korg_bridge.serving.server import Bridge

log = logging.getLogger("korg_bridge")

PROG = "korg-bridge"
DEFAULT_MAX_CONCURRENCY = 8
SHUTDOWN_GRACE = 5.0
"""Seconds a signalled stdio bridge waits for its calls to wind down after
their process groups were told to stop."""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'must be a number of seconds, got "{text}"') from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f'must be a positive number of seconds, got "{text}"')
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'must be a whole number, got "{text}"') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got "{text}"')
    return value


def _rate(text: str) -> Rate:
    from korg_bridge.auth.ratelimit import RATE_FORM, Rate

    try:
        return Rate.parse(text)
    except UsageError:
        raise argparse.ArgumentTypeError(f'{RATE_FORM}, got "{text}"') from None


class _Parser(argparse.ArgumentParser):
    """argparse that raises a one-line :class:`UsageError` instead of printing its usage block:
    the README promises one error line, and an MCP client shows users only that. An unknown
    flag is named with the one it most looks like (``--alow``: did you mean --allow?), as
    korg-recall's are (:mod:`korg_bridge.toolkit`)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith(_UNRECOGNIZED):
            known = [flag for action in self._actions for flag in action.option_strings]
            problems = unknown_words(message.removeprefix(_UNRECOGNIZED).split(), known)
            raise UsageError(f"{'; '.join(problems)}. See '{self.prog} --help'.")
        raise usage_error(self.prog, message)


_UNRECOGNIZED = "unrecognized arguments: "
"""How argparse begins the error for words it could not place."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description=(
            "Serve the callables of korg:introspect@v1 binaries as MCP tools (stdio, or HTTP with --http). "
            f"Side-effecting callables are refused unless {ENV_ALLOW} or --allow permits them."
        ),
        epilog=(
            f"Examples: {PROG} korg-recall --list-tools lists the tools of korg-recall, installed beside "
            f"{PROG} (give its full path if it is not on PATH); {PROG} ./mytool --list-tools does the same "
            "for any introspect-aware binary. Without --list-tools this is an MCP server on stdio, "
            "silent until an MCP client connects: register it with your agent (see the README)."
        ),
    )
    parser.add_argument(
        "binaries", nargs="*", metavar="BINARY", help="a name on PATH, or a path; several allowed"
    )
    parser.add_argument(
        "--allow",
        metavar="LIST",
        help=f"side effects to allow: comma-separated fs_write,network,ledger_write, or all (overrides {ENV_ALLOW})",
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
    parser.add_argument(
        "--include-tool",
        action="append",
        default=[],
        metavar="GLOB",
        help="serve only callables whose command_id matches (repeatable)",
    )
    parser.add_argument(
        "--exclude-tool",
        action="append",
        default=[],
        metavar="GLOB",
        help="do not serve callables whose command_id matches (repeatable)",
    )
    parser.add_argument(
        "--audit",
        metavar="PATH",
        help="append every tool call to this korg-ledger@v1 journal (also KORG_BRIDGE_AUDIT)",
    )
    parser.add_argument("--no-reload", action="store_true", help="do not watch the binaries for changes")
    parser.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve Streamable HTTP at /mcp instead of stdio (default host 127.0.0.1)",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help=(
            "with --http: file of bearer tokens, one per line: TOKEN [TENANT [ACTOR]] "
            "(else KORG_BRIDGE_TOKEN); required off loopback; SIGHUP reloads it"
        ),
    )
    parser.add_argument(
        "--rate-limit",
        type=_rate,
        metavar="N/s",
        help="with --http: requests each token may make, N per second (N/s), minute (N/m) or hour (N/h); "
        "bursts of up to N (at least 4, a session's start); beyond it HTTP 429 with Retry-After",
    )
    parser.add_argument(
        "--max-calls-per-token",
        type=_positive_int,
        metavar="N",
        help="with --http: tool calls each token may have running at once; beyond it a call is refused "
        "(an isError result)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="with --http: another Host header to accept (repeatable)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --http: another Origin to accept (repeatable)",
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


def _check_flags(args: argparse.Namespace) -> None:
    """Raises: UsageError: flags that make no sense together."""
    if not args.binaries:
        raise UsageError(f"missing BINARY. Usage: {PROG} BINARY [--list-tools]; see {PROG} --help")
    if args.json and not args.list_tools:
        raise UsageError("--json only applies to --list-tools; add --list-tools.")
    http_only = [
        flag
        for flag, value in (
            ("--token-file", args.token_file),
            ("--rate-limit", args.rate_limit),
            ("--max-calls-per-token", args.max_calls_per_token),
        )
        if value
    ]
    if args.allow_host:
        http_only.append("--allow-host")
    if args.allow_origin:
        http_only.append("--allow-origin")
    if http_only and not args.http:
        raise UsageError(f"{', '.join(http_only)} only apply to --http; add --http [HOST:]PORT.")


async def _discover_all(args: argparse.Namespace) -> list[Document]:
    return [await discover(binary, timeout=args.discovery_timeout) for binary in args.binaries]


def _warn_faults(documents: Sequence[Document]) -> None:
    """One warning per callable a binary declares but the bridge cannot serve: a fault its
    author should hear of. A ``cli_only`` callable is left out on purpose: no warning (the
    start line counts them; ``--list-tools`` shows every one with its reason)."""
    from korg_bridge.bridge.listing import printable

    for document in documents:
        for skipped in document.skipped:
            if not skipped.cli_only:
                log.warning(
                    "skipping callable %s: %s", printable(skipped.command_id), printable(skipped.reason)
                )


def _check_audit(args: argparse.Namespace) -> Path | None:
    """The audit path, checked read-only before the binaries are run (also by ``--list-tools``).

    Raises:
        ConfigError: the path is one the server would refuse.
    """
    from korg_bridge.serving.audit import audit_path, check_audit_path

    path = audit_path(args.audit, os.environ)
    if path is not None:
        check_audit_path(path)
    return path


async def _run(args: argparse.Namespace, policy: Policy) -> int:
    # --list-tools is a dry run of the server: it refuses what the server would refuse.
    listen = _check_http(args) if args.http else None
    _check_audit(args)
    documents = await _discover_all(args)
    from korg_bridge.bridge.catalogue import Catalogue, ToolFilter

    tool_filter = ToolFilter(tuple(args.include_tool), tuple(args.exclude_tool))
    if args.list_tools:
        from korg_bridge.bridge.listing import print_table, tools_report

        catalogue = Catalogue(documents, policy, args.tool_names, tool_filter)
        report = tools_report(documents, catalogue, policy)
        if args.json:
            sys.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        else:
            print_table(report, sys.stdout)
        sys.stdout.flush()
        return 0

    _warn_faults(documents)
    from korg_bridge.serving.audit import AuditLog
    from korg_bridge.serving.server import Bridge, BridgeOptions

    audit = AuditLog.from_env(args.audit, os.environ, binary=",".join(d.binary for d in documents))
    options = BridgeOptions(
        policy=policy,
        timeout=args.timeout,
        max_concurrency=args.max_concurrency,
        tool_names=args.tool_names,
        tool_filter=tool_filter,
        audit=audit,
        reload=not args.no_reload,
        discovery_timeout=args.discovery_timeout,
        max_calls_per_caller=args.max_calls_per_token,
    )
    bridge = Bridge(documents, options)
    served = len(bridge.catalogue.entries)
    if not served:
        log.warning("no servable callables in %s; serving an empty tool list", ", ".join(args.binaries))
    if listen is not None:
        log.info("%s; %s", _serving(documents, served), policy.describe())
        return await _serve_http(listen, bridge, served, args)
    _say_started(documents, served, policy, args.binaries)
    return await _serve_stdio(bridge)


def _check_http(args: argparse.Namespace) -> tuple[str, int, TokenSet | None]:
    """Everything about --http that can fail, checked before the binaries are run.

    ``KORG_BRIDGE_TOKEN`` leaves this process's environment once read, so no
    binary run from here on (discovery, drift checks, tool calls) inherits it.

    Raises:
        UsageError: a malformed ``[HOST:]PORT``.
        ConfigError: no usable token, or none while listening off loopback;
            a malformed token file.
    """
    from korg_bridge.auth.binding import is_loopback, parse_listen
    from korg_bridge.auth.tokens import load_tokens
    from korg_bridge.config import ENV_BRIDGE_TOKEN
    from korg_bridge.errors import ConfigError

    host, port = parse_listen(args.http)
    tokens = load_tokens(os.environ, args.token_file)
    os.environ.pop(ENV_BRIDGE_TOKEN, None)
    if tokens is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without a token: set {ENV_BRIDGE_TOKEN} or pass --token-file FILE"
        )
    return host, port, tokens


async def _serve_http(
    listen: tuple[str, int, TokenSet | None],
    bridge: Bridge,
    tool_count: int,
    args: argparse.Namespace,
) -> int:
    from korg_bridge.auth.tokens import Keyring
    from korg_bridge.serving.http import serve_http

    host, port, tokens = listen
    logging.getLogger("korg_bridge.serving.http").setLevel(logging.INFO)
    health = {
        "name": PROG,
        "version": __version__,
        "binary": ",".join(w.document.binary for w in bridge.watches),
        "tools": tool_count,
    }
    await serve_http(
        bridge.server(),
        host=host,
        port=port,
        tokens=None if tokens is None else Keyring(tokens, args.token_file),
        allowed_hosts=args.allow_host,
        allowed_origins=args.allow_origin,
        rate_limit=args.rate_limit,
        health=health,
    )
    return 0


def _serving(documents: Sequence[Document], served: int) -> str:
    """``serving 13 tools of korg-recall (6 callables are command-line only)``."""
    names = ", ".join(document.binary for document in documents)
    cli_only = sum(skipped.cli_only for document in documents for skipped in document.skipped)
    aside = (
        f" ({cli_only} callable{'s are' if cli_only != 1 else ' is'} command-line only)" if cli_only else ""
    )
    return f"serving {served} tool{'s' if served != 1 else ''} of {names}{aside}"


def _say_started(documents: Sequence[Document], served: int, policy: Policy, binaries: Sequence[str]) -> None:
    """The stdio server's one line at start: what it serves, and -- when a person, not an MCP
    client, started it -- that it is silent because it waits for a client."""
    if sys.stdin is not None and sys.stdin.isatty():
        typed = " ".join(shlex.quote(binary) for binary in binaries)
        line = (
            f"{_serving(documents, served)}: this is an MCP server waiting for a client on stdin; it prints "
            f"nothing until one connects (Ctrl-C quits). To see its tools, run: {PROG} {typed} --list-tools"
        )
    else:
        line = f"{_serving(documents, served)}; {policy.describe()}"
    sys.stderr.write(f"{PROG}: {line}\n")
    sys.stderr.flush()


async def _serve_stdio(bridge: Bridge) -> int:
    """Serve until the client disconnects, or a signal ends the bridge.

    On SIGTERM or SIGINT the running calls' process groups are ended first
    (they live in their own sessions, so nothing else would reach them), the
    calls get a moment to report, then the process exits at once (``os._exit``):
    nothing else is left to finish, and an exit code is all a supervisor reads.
    """
    from korg_bridge.bridge.process import terminate_all
    from korg_bridge.serving.server import serve_stdio

    async def on_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                # Asked to stop: what a person or a supervisor wants, not a warning.
                log.info(
                    "received %s: ending %d running call(s)", signal.Signals(signum).name, bridge.active_calls
                )
                with anyio.CancelScope(shield=True):
                    await terminate_all()
                    with anyio.move_on_after(SHUTDOWN_GRACE):
                        await bridge.wait_idle()
                for handler in logging.getLogger().handlers:
                    handler.flush()
                os._exit(USER_INTERRUPT if signum == signal.SIGINT else 0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(on_signals)
        await serve_stdio(bridge.server())
        tg.cancel_scope.cancel()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``korg-bridge``; returns the process exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    except UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {exc.message}\n")
        return exc.exit_code
    _setup_logging(args.debug)

    def work() -> int:
        _check_flags(args)
        policy = Policy.parse(args.allow) if args.allow is not None else Policy.from_env(os.environ)
        return anyio.run(_run, args, policy)

    return run_guarded(PROG, work, debug=args.debug)
