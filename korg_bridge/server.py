"""The MCP server: one tool per callable of a discovered binary.

Built on the SDK's low-level ``Server`` because it serves hand-written input
schemas verbatim: the binary's ``input_schema`` reaches the client exactly as
the binary declared it.

Two failure channels, as the MCP spec intends: what the model can fix (bad
arguments, a refused side effect, a non-zero exit) is a tool result with
``isError: true``; what it cannot (an unknown tool, a broken server) is a
JSON-RPC error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ._version import __version__
from .contract import CallableSpec, Document
from .errors import ToolCallError
from .invocation import DEFAULT_CALL_TIMEOUT, invoke
from .output import CallResult
from .policy import Policy
from .process import DEFAULT_OUTPUT_CAP
from .toolnames import assign_names

log = logging.getLogger(__name__)

META_PREFIX = "dev.korg/"
DEFAULT_MAX_CONCURRENCY = 8


def capability_tags(spec: CallableSpec) -> str:
    caps = spec.capabilities
    long_running = "true" if caps.long_running else "false"
    return (
        f"[side_effects: {caps.side_effects or 'unspecified'}, "
        f"output_mode: {caps.output_mode or 'unspecified'}, long_running: {long_running}]"
    )


def tool_description(spec: CallableSpec) -> str:
    """The callable's description (or name), then its capability tags."""
    return f"{spec.description or spec.name} {capability_tags(spec)}"


@dataclass(frozen=True, slots=True)
class Entry:
    """One served tool: its MCP name, its callable, and the policy verdict."""

    name: str
    spec: CallableSpec
    allowed: bool
    denial: str


@dataclass(slots=True)
class BridgeOptions:
    """How calls are run; the CLI fills it from flags, a library caller directly."""

    policy: Policy = field(default_factory=Policy.from_env)
    timeout: float = DEFAULT_CALL_TIMEOUT
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    tool_names: str = "safe"
    output_cap: int = DEFAULT_OUTPUT_CAP
    env: Mapping[str, str] | None = None
    cwd: str | None = None


class Catalogue:
    """The tools of one document under one policy; lookup by safe name or command_id."""

    def __init__(self, document: Document, policy: Policy, tool_names: str = "safe") -> None:
        self.document = document
        names = assign_names((c.command_id for c in document.callables), tool_names)
        self.entries: list[Entry] = []
        self._lookup: dict[str, Entry] = {}
        for spec in document.callables:
            decision = policy.check(spec)
            entry = Entry(names[spec.command_id], spec, decision.allowed, decision.reason)
            self.entries.append(entry)
            self._lookup[entry.name] = entry
        for entry in self.entries:
            # Either form is accepted; a safe name wins if it equals another's command_id.
            self._lookup.setdefault(entry.spec.command_id, entry)

    def find(self, name: str) -> Entry | None:
        return self._lookup.get(name)

    def tools(self) -> list[types.Tool]:
        return [self._tool(entry) for entry in self.entries]

    def _tool(self, entry: Entry) -> types.Tool:
        spec = entry.spec
        meta: dict[str, Any] = {
            f"{META_PREFIX}command_id": spec.command_id,
            f"{META_PREFIX}side_effects": spec.capabilities.side_effects,
            f"{META_PREFIX}output_mode": spec.capabilities.output_mode,
            f"{META_PREFIX}allowed": entry.allowed,
        }
        if not entry.allowed:
            meta[f"{META_PREFIX}denied"] = entry.denial
        return types.Tool(
            name=entry.name,
            title=spec.command_id,
            description=tool_description(spec),
            input_schema=spec.input_schema,
            _meta=meta,
        )


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def to_call_tool_result(result: CallResult) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.text)],
        is_error=result.is_error,
    )


def build_server(document: Document, options: BridgeOptions | None = None) -> Server[Any]:
    """An MCP server exposing ``document``'s callables; run it with :func:`serve_stdio`
    or hand it to the SDK's ``Client`` in-process."""
    opts = options or BridgeOptions()
    catalogue = Catalogue(document, opts.policy, opts.tool_names)
    limiter = anyio.CapacityLimiter(max(1, opts.max_concurrency))

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=catalogue.tools())

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        entry = catalogue.find(params.name)
        if entry is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {params.name!r}. Call tools/list for the available tools.",
            )
        if not entry.allowed:
            return error_result(entry.denial)
        async with limiter:
            try:
                result = await invoke(
                    document,
                    entry.spec,
                    params.arguments,
                    policy=opts.policy,
                    timeout=opts.timeout,
                    output_cap=opts.output_cap,
                    env=opts.env,
                    cwd=opts.cwd,
                )
            except ToolCallError as exc:
                return error_result(exc.message)
            except OSError as exc:
                return error_result(
                    f"could not start {document.path or document.binary}: {exc.strerror or exc}. "
                    "Check that the binary still exists and is executable."
                )
        return to_call_tool_result(result)

    return Server(
        f"korg-bridge:{document.binary}",
        version=__version__,
        instructions=(
            f"Tools of the `{document.binary}` command-line program, bridged by korg-bridge. "
            "Each tool runs the program once with the given arguments."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin/stdout until the client disconnects."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
