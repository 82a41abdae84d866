"""The MCP server: one tool per callable of one or more discovered binaries.

Built on the SDK's low-level ``Server`` because it serves hand-written input
schemas verbatim: the binary's ``input_schema`` reaches the client exactly as
the binary declared it.

Two failure channels, as the MCP spec intends: what the model can fix (bad
arguments, a refused side effect, a non-zero exit, output that breaks its
declared schema) is a tool result with ``isError: true``; what it cannot (an
unknown tool, a broken server) is a JSON-RPC error.

The live state is a :class:`Bridge`: the watched binaries and the current
:class:`~korg_bridge.catalogue.Catalogue`, swapped atomically on drift.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from jsonschema.exceptions import best_match
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._version import __version__
from .catalogue import Catalogue, Entry, ToolFilter
from .contract import CallableSpec, Document
from .discovery import DEFAULT_DISCOVERY_TIMEOUT
from .drift import POLL_INTERVAL, Watch, poll_forever
from .errors import KorgError, ToolCallError
from .invocation import DEFAULT_CALL_TIMEOUT, invoke
from .output import CallResult
from .policy import Policy
from .process import DEFAULT_OUTPUT_CAP, ChunkCallback
from .progress import MAX_RATE, LineProgress

if TYPE_CHECKING:
    from .audit import AuditLog

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 8


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
    tool_filter: ToolFilter = field(default_factory=ToolFilter)
    audit: AuditLog | None = None
    reload: bool = True
    """Watch the binaries and serve their new tools when they are rebuilt."""
    poll_interval: float = POLL_INTERVAL
    discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT
    progress_rate: float = MAX_RATE


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def wants_progress(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the caller asked for progress: a token in ``_meta`` on the wire, or (in
    process, where the SDK passes a callback instead of a token) a progress callback."""
    meta: Mapping[str, Any] | None = ctx.meta
    if meta and meta.get("progress_token", meta.get("progressToken")) is not None:
        return True
    # The SDK exposes no public "was progress requested" for the in-process
    # path; look through its dispatch-context wrappers, and if its shape ever
    # changes, fall back to forwarding (the SDK drops progress nobody asked for).
    outbound = getattr(ctx.session, "_request_outbound", None)
    for _ in range(4):
        if outbound is None:
            return True
        if getattr(outbound, "_progress_token", None) is not None or getattr(outbound, "_on_progress", None):
            return True
        if not hasattr(outbound, "_inner"):
            return (
                hasattr(outbound, "_progress_token") is False and hasattr(outbound, "_on_progress") is False
            )
        outbound = outbound._inner
    return True


class Bridge:
    """Watched binaries, the current catalogue, and the calls in flight."""

    def __init__(
        self, documents: Document | Sequence[Document], options: BridgeOptions | None = None
    ) -> None:
        self.options = options or BridgeOptions()
        docs = (documents,) if isinstance(documents, Document) else tuple(documents)
        self.watches = [
            Watch(
                d.path or d.binary,
                d,
                discovery_timeout=self.options.discovery_timeout,
                env=self.options.env,
                poll_interval=self.options.poll_interval,
            )
            for d in docs
        ]
        self.catalogue = self._build_catalogue(docs)
        self.bus = InMemorySubscriptionBus()
        self._legacy_sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._limiter = anyio.CapacityLimiter(max(1, self.options.max_concurrency))
        self._output_validators: dict[int, Any] = {}
        self.active_calls = 0
        self._idle = anyio.Event()
        self._idle.set()

    def _build_catalogue(self, documents: Sequence[Document]) -> Catalogue:
        opts = self.options
        return Catalogue(documents, opts.policy, opts.tool_names, opts.tool_filter)

    # --- drift -------------------------------------------------------------------------------

    async def check_drift(self) -> bool:
        """Re-introspect changed binaries; swap the catalogue and notify when tools changed."""
        changed = False
        for watch in self.watches:
            changed |= await watch.check()
        if not changed:
            return False
        try:
            catalogue = self._build_catalogue([w.document for w in self.watches])
        except KorgError as exc:
            log.error("reloaded tools conflict; keeping the old catalogue: %s", exc)
            return False
        self.catalogue = catalogue  # one reference swap: calls in flight keep their entry
        await self.notify_tools_changed()
        return True

    async def notify_tools_changed(self) -> None:
        """``subscriptions/listen`` for 2026 sessions, ``notifications/tools/list_changed`` for 2025 ones."""
        await self.bus.publish(ToolsListChanged())
        for session in list(self._legacy_sessions):
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a closed session must not stop the others
                log.debug("could not notify a session of the tool change: %s", exc)

    def _remember_session(self, ctx: ServerRequestContext[Any]) -> None:
        # ctx.session is a per-request proxy; the connection behind it lives as
        # long as the client, and its standalone channel carries list_changed.
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._legacy_sessions.add(getattr(ctx.session, "_connection", ctx.session))

    # --- MCP handlers ------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember_session(ctx)
        if self.options.reload:
            await self.check_drift()
        return types.ListToolsResult(tools=self.catalogue.tools())

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self._remember_session(ctx)
        entry = self.catalogue.find(params.name)
        if entry is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {params.name!r}. Call tools/list for the available tools.",
            )
        self.active_calls += 1
        self._idle = anyio.Event() if self.active_calls == 1 else self._idle
        try:
            return await self._call(ctx, entry, params)
        finally:
            self.active_calls -= 1
            if self.active_calls == 0:
                self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def _call(
        self, ctx: ServerRequestContext[Any], entry: Entry, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        started = time.monotonic()
        spec = entry.spec
        if not entry.allowed:
            await self._audit(entry, params, started, success=False, reason=entry.denial)
            return error_result(entry.denial)
        async with self._limiter:
            progress: LineProgress | None = None
            caps = spec.capabilities
            if (caps.output_mode == "stream" or caps.long_running) and wants_progress(ctx):

                async def report(value: float, message: str) -> None:
                    await ctx.session.report_progress(value, None, message)

                progress = LineProgress(report, max_rate=self.options.progress_rate)
            try:
                result = await self._run(entry, params, progress)
            except ToolCallError as exc:  # refused before anything ran: policy or arguments
                await self._audit(entry, params, started, success=False, reason=exc.message)
                return error_result(exc.message)
            except OSError as exc:
                message = (
                    f"could not start {entry.document.path or entry.document.binary}: {exc.strerror or exc}. "
                    "Check that the binary still exists and is executable."
                )
                await self._audit(entry, params, started, success=False, reason=message)
                return error_result(message)
        final = self._finish(spec, result)
        await self._audit(
            entry,
            params,
            started,
            success=not final.is_error,
            exit_code=result.exit_code,
            output=result.text,
            reason=final.content[0].text if final.is_error and not result.is_error else None,  # type: ignore[union-attr]
        )
        return final

    async def _run(
        self, entry: Entry, params: types.CallToolRequestParams, progress: LineProgress | None
    ) -> CallResult:
        opts = self.options

        async def run(on_stdout: ChunkCallback | None) -> CallResult:
            return await invoke(
                entry.document,
                entry.spec,
                params.arguments,
                policy=opts.policy,
                timeout=opts.timeout,
                output_cap=opts.output_cap,
                env=opts.env,
                cwd=opts.cwd,
                on_stdout=on_stdout,
            )

        if progress is None:
            return await run(None)
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.run)
            try:
                result = await run(progress.feed)
            finally:
                progress.close()
        return result

    def _finish(self, spec: CallableSpec, result: CallResult) -> types.CallToolResult:
        """Text for every client; ``structuredContent`` for envelope objects; the output schema enforced."""
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text)]
        if result.is_error:
            return types.CallToolResult(content=content, is_error=True)
        if spec.output_schema is not None:
            if result.structured is None:
                return error_result(
                    f"{spec.command_id} declares an output_schema but did not print a JSON object:\n{result.text}"
                )
            problems = self._output_problems(spec, result.structured)
            if problems:
                return error_result(
                    f"{spec.command_id} printed output that does not match its output_schema: {problems}\n"
                    f"{result.text}"
                )
        if result.structured is not None and spec.capabilities.output_mode == "envelope":
            return types.CallToolResult(content=content, structured_content=result.structured)
        return types.CallToolResult(content=content)

    def _output_problems(self, spec: CallableSpec, value: dict[str, Any]) -> str:
        import jsonschema

        key = id(spec)
        validator = self._output_validators.get(key)
        if validator is None:
            schema = spec.output_schema or {}
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            validator = self._output_validators[key] = cls(schema)
        errors = list(validator.iter_errors(value))
        if not errors:
            return ""
        first = best_match(errors)
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"{where}: {first.message}{more}"

    async def _audit(
        self,
        entry: Entry,
        params: types.CallToolRequestParams,
        started: float,
        *,
        success: bool,
        exit_code: int | None = None,
        output: str = "",
        reason: str | None = None,
    ) -> None:
        audit = self.options.audit
        if audit is None:
            return
        await audit.record(
            command_id=entry.spec.command_id,
            tool_name=params.name,
            arguments=params.arguments,
            success=success,
            exit_code=exit_code,
            output=output,
            duration_ms=int((time.monotonic() - started) * 1000),
            reason=reason,
        )

    # --- the SDK server ----------------------------------------------------------------------

    def server(self) -> Server[Any]:
        """The SDK's low-level server for this bridge."""
        bridge = self

        @asynccontextmanager
        async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            async with anyio.create_task_group() as tg:
                if bridge.options.reload:
                    tg.start_soon(poll_forever, bridge.check_drift, bridge.options.poll_interval)
                yield {"bridge": bridge}
                tg.cancel_scope.cancel()

        names = ", ".join(w.document.binary for w in self.watches)
        return _BridgeServer(
            f"korg-bridge:{names}" if len(self.watches) == 1 else "korg-bridge",
            version=__version__,
            instructions=(
                f"Tools of the command-line program(s) {names}, bridged by korg-bridge. "
                "Each tool runs the program once with the given arguments."
            ),
            lifespan=lifespan,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
        )


class _BridgeServer(Server[Any]):
    """Advertises ``tools.listChanged`` to 2025-era clients: drift reload sends it."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def build_server(
    documents: Document | Sequence[Document], options: BridgeOptions | None = None
) -> Server[Any]:
    """An MCP server exposing the documents' callables; run it with :func:`serve_stdio`
    or hand it to the SDK's ``Client`` in-process.

    Raises:
        ConfigError: two binaries declare the same command_id or tool name.
    """
    return Bridge(documents, options).server()


async def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin/stdout until the client disconnects.

    A line that is not a valid JSON-RPC message is answered with a JSON-RPC
    error instead of being dropped (see :mod:`korg_bridge.stdio`).
    """
    from .stdio import stdio_transport

    async with stdio_transport() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
