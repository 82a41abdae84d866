"""The MCP server: one tool per callable of one or more discovered binaries.

Built on the SDK's low-level ``Server`` because it serves hand-written input
schemas verbatim: the binary's ``input_schema`` reaches the client exactly as
the binary declared it.

Two failure channels, as the MCP spec intends: what the model can fix (bad
arguments, a refused side effect, a non-zero exit, output that breaks its
declared schema) is a tool result with ``isError: true``; what it cannot (an
unknown tool) is a JSON-RPC error. Nothing else on the call path may become a
JSON-RPC error: an exception nobody foresaw is caught once, in
:meth:`Bridge.call_tool`, and becomes an ``isError`` result naming what
failed, logged and audited like any other call.

The live state is a :class:`Bridge`: the watched binaries and the current
:class:`~korg_bridge.bridge.catalogue.Catalogue`, swapped atomically on drift.
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from korg_bridge._version import __version__
from korg_bridge.auth.identity import Identity, child_environment, request_identity
from korg_bridge.auth.ratelimit import CallCap
from korg_bridge.bridge.catalogue import Catalogue, Entry, ToolFilter
from korg_bridge.bridge.coercion import coerce_arguments
from korg_bridge.bridge.contract import Document
from korg_bridge.bridge.discovery import DEFAULT_DISCOVERY_TIMEOUT
from korg_bridge.bridge.drift import POLL_INTERVAL, Watch, poll_forever
from korg_bridge.bridge.invocation import DEFAULT_CALL_TIMEOUT, PreparedCall, prepare_call, run_prepared
from korg_bridge.bridge.output import CallResult
from korg_bridge.bridge.policy import Policy
from korg_bridge.bridge.process import DEFAULT_OUTPUT_CAP, ChunkCallback
from korg_bridge.bridge.progress import MAX_RATE, LineProgress
from korg_bridge.bridge.results import error_result, finish, start_failure
from korg_bridge.bridge.validation import VALIDATION_TIME_LIMIT
from korg_bridge.errors import KorgError, ToolCallError

if TYPE_CHECKING:
    from korg_bridge.serving.audit import AuditLog

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENCY = 8
RESOURCE_NOT_FOUND = -32002
"""The MCP specification's error code for a resource that does not exist."""


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
    max_calls_per_caller: int | None = None
    """Tool calls one HTTP caller (one bearer token) may have running at once; beyond it
    a call is refused as an ``isError`` result (:class:`~korg_bridge.auth.ratelimit.CallCap`).
    Over stdio there is one caller, and only ``max_concurrency`` applies."""


@dataclass(slots=True)
class _CallRecord:
    """What one call has done so far, so its audit entry is right whatever fails."""

    started: float
    arguments: Mapping[str, Any] | None
    stage: str = "checking the arguments"
    ran: bool = False
    exit_code: int | None = None
    output: str = ""
    audited: bool = False
    identity: Identity | None = None
    """Who called over HTTP (:mod:`korg_bridge.auth.identity`); None over stdio and in process."""


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


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
        self._per_caller = CallCap(self.options.max_calls_per_caller)
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
        record = _CallRecord(time.monotonic(), params.arguments, identity=request_identity(ctx.request))
        caller = None if record.identity is None else record.identity.key
        refused = None if caller is None else self._per_caller.enter(caller)
        try:
            if refused is not None:
                await self._audit(entry, params, record, success=False, reason=refused)
                return error_result(refused)
            return await self._call(ctx, entry, params, record)
        except Exception as exc:  # the last resort: never a code-0 JSON-RPC error
            return await self._unexpected(entry, params, record, exc)
        finally:
            if caller is not None and refused is None:
                self._per_caller.leave(caller)
            self.active_calls -= 1
            if self.active_calls == 0:
                self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    # --- resources (the optional v1 ``resource`` extension) ----------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        if self.options.reload:
            await self.check_drift()
        return types.ListResourcesResult(resources=self.catalogue.resources())

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        """Run the resource's callable with no arguments, as a tool call is run (policy, bounds,
        audit); its stdout is the resource. A failure is a JSON-RPC error: there is no ``isError``
        result for a read.

        Raises:
            MCPError: no such resource, or the callable failed.
        """
        uri = str(params.uri)
        entry = self.catalogue.find_resource(uri)
        if entry is None:
            raise MCPError(
                code=RESOURCE_NOT_FOUND, message=f"Unknown resource: {uri!r}. Call resources/list."
            )
        result = await self.call_tool(ctx, types.CallToolRequestParams(name=entry.name, arguments={}))
        text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
        if result.is_error:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"reading {uri} failed: {text[:2000]}")
        resource = entry.spec.resource
        mime = resource.mime_type if resource is not None else "text/plain"
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    async def _call(
        self,
        ctx: ServerRequestContext[Any],
        entry: Entry,
        params: types.CallToolRequestParams,
        record: _CallRecord,
    ) -> types.CallToolResult:
        spec = entry.spec
        opts = self.options
        if not entry.allowed:
            await self._audit(entry, params, record, success=False, reason=entry.denial)
            return error_result(entry.denial)
        # Everything that can refuse the call happens here, before progress
        # forwarding or the process start: a refusal is always a plain result.
        record.arguments = coerce_arguments(spec.properties, params.arguments)
        audit = None if opts.audit is None else os.path.abspath(opts.audit.path)
        env = child_environment(opts.env, record.identity, audit=audit)
        try:
            prepared = await prepare_call(
                entry.document,
                spec,
                record.arguments,
                opts.policy,
                env=env,
                time_limit=min(VALIDATION_TIME_LIMIT, opts.timeout),
            )
        except ToolCallError as exc:
            await self._audit(entry, params, record, success=False, reason=exc.message)
            return error_result(exc.message)
        async with self._limiter:
            record.stage = "running the binary"
            progress: LineProgress | None = None
            caps = spec.capabilities
            if (caps.output_mode == "stream" or caps.long_running) and wants_progress(ctx):

                async def report(value: float, message: str) -> None:
                    await ctx.session.report_progress(value, None, message)

                progress = LineProgress(report, max_rate=opts.progress_rate)
            try:
                result = await self._run(entry, prepared, progress, env)
            except OSError as exc:
                message = start_failure(entry.document, exc)
                await self._audit(entry, params, record, success=False, reason=message)
                return error_result(message)
        record.ran, record.exit_code, record.output = True, result.exit_code, result.text
        record.stage = "checking the output"
        final = await finish(spec, result, timeout=opts.timeout)
        await self._audit(
            entry,
            params,
            record,
            success=not final.is_error,
            reason=final.content[0].text if final.is_error and not result.is_error else None,  # type: ignore[union-attr]
        )
        return final

    async def _unexpected(
        self,
        entry: Entry,
        params: types.CallToolRequestParams,
        record: _CallRecord,
        exc: Exception,
    ) -> types.CallToolResult:
        """An error nobody foresaw: an ``isError`` result naming it, logged and audited."""
        cause = _leaf(exc)
        what = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        if record.ran:
            after = f"; the binary ran and exited {record.exit_code}"
        else:
            after = "; nothing was run" if record.stage == "checking the arguments" else ""
        message = f"korg-bridge failed while {record.stage} for {entry.spec.command_id}: {what}{after}"
        log.error("%s", message)
        log.debug("traceback of the failure above", exc_info=exc)
        if not record.audited:
            try:
                await self._audit(entry, params, record, success=False, reason=message)
            except Exception as audit_exc:  # the call's own answer still goes out
                log.error("could not audit the failed call: %s", audit_exc)
        return error_result(message + (f"\n{record.output}" if record.ran and record.output else ""))

    async def _run(
        self,
        entry: Entry,
        prepared: PreparedCall,
        progress: LineProgress | None,
        env: Mapping[str, str] | None,
    ) -> CallResult:
        opts = self.options

        async def run(on_stdout: ChunkCallback | None) -> CallResult:
            return await run_prepared(
                entry.document,
                prepared,
                timeout=opts.timeout,
                output_cap=opts.output_cap,
                env=env,
                cwd=opts.cwd,
                on_stdout=on_stdout,
            )

        if progress is None:
            return await run(None)
        failure: Exception | None = None
        result: CallResult | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.run)
            try:
                result = await run(progress.feed)
            except Exception as exc:  # raised below, not wrapped in an ExceptionGroup
                failure = exc
            finally:
                progress.close()
        if failure is not None:
            raise failure
        assert result is not None
        return result

    async def _audit(
        self,
        entry: Entry,
        params: types.CallToolRequestParams,
        record: _CallRecord,
        *,
        success: bool,
        reason: str | None = None,
    ) -> None:
        record.audited = True
        audit = self.options.audit
        if audit is None:
            return
        identity = record.identity
        await audit.record(
            command_id=entry.spec.command_id,
            tool_name=params.name,
            arguments=record.arguments,
            success=success,
            exit_code=record.exit_code,
            output=record.output,
            duration_ms=int((time.monotonic() - record.started) * 1000),
            reason=reason,
            tenant=identity.tenant if identity is not None else None,
            actor=identity.actor if identity is not None else None,
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
        serves_resources = bool(self.catalogue.resources())
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
            # Only for binaries that declare resources: the others' capabilities stay as they were.
            on_list_resources=self.list_resources if serves_resources else None,
            on_read_resource=self.read_resource if serves_resources else None,
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
    error instead of being dropped (see :mod:`korg_bridge.serving.stdio`).
    """
    from korg_bridge.serving.stdio import stdio_transport

    async with stdio_transport() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
