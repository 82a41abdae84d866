"""Serve the bridge over Streamable HTTP: ``korg-bridge BINARY --http [HOST:]PORT``.

Over stdio the only client is the process that started us; over HTTP it is
whoever can reach the port, so gates stand in front of the SDK's app:

- **Bearer tokens** (``Authorization: Bearer TOKEN``), required whenever the
  address is not loopback, each standing for a tenant and an actor
  (:mod:`korg_bridge.auth.tokens`), with a per-token rate limit
  (:mod:`korg_bridge.auth.ratelimit`): all checked by
  :class:`~korg_bridge.auth.gate.Gate`, which also hands each request's identity
  to the tool call (:mod:`korg_bridge.auth.identity`). Tokens come from
  ``KORG_BRIDGE_TOKEN`` or a file, never from argv (``ps`` shows argv to every
  local user), and never reach a log. SIGHUP reloads the token file. The
  SDK's own auth (``TokenVerifier``) is built for OAuth: it advertises an
  authorization server we do not have.
- **Host/Origin checks** against DNS rebinding, by the SDK's
  ``TransportSecuritySettings``: a foreign ``Host`` gets the SDK's 421, a
  foreign ``Origin`` its 403 (and a POST that is not JSON its 400).
- **Body limit**, the SDK's ``max_request_body_size``: 413.

Below the app, each connection has a header timeout, a body idle timeout and
counts against a cap on connections not yet authorised, oldest closed first
(:mod:`korg_bridge.auth.admission`), so a flood of half-open connections cannot
lock out the token holder.

A body that is not a valid JSON-RPC message is answered 400 with a JSON-RPC
error (``-32700``/``-32600``, the request's id when it can be told) by
:class:`~korg_bridge.serving.jsonrpc.BodyCheck`, where the SDK would answer
``INVALID_PARAMS`` without the id.

``GET /healthz`` is open (no token, no Host check, no limit) so probes and
load balancers can use it; it reveals only what ``--list-tools`` does.

Stopping: the first SIGTERM or SIGINT stops accepting, lets in-flight
requests finish for up to ``grace`` seconds, then cuts what is left (a
cancelled tool call's process is killed by the bridge's own cleanup); a
second signal cuts at once. A long-lived ``GET /mcp`` stream (older clients
keep one open per session) would never finish by itself, so it is cut as soon
as the last request is done. Cancelling :func:`serve_http` stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypedDict, Unpack

import anyio
import anyio.to_thread
import uvicorn
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.lowlevel import Server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from korg_bridge.auth.admission import (
    AcceptErrors,
    Admission,
    ConnectionLimits,
    protocol_class,
    raise_file_limit,
)
from korg_bridge.auth.binding import bracketed, is_loopback, parse_listen, security_settings
from korg_bridge.auth.gate import HEALTH_PATH, Gate, Traffic
from korg_bridge.auth.ratelimit import Limiter, Rate
from korg_bridge.auth.tokens import Keyring, TokenSet, load_token
from korg_bridge.config import ENV_BRIDGE_TOKEN
from korg_bridge.errors import ConfigError, KorgError
from korg_bridge.serving.jsonrpc import BodyCheck

__all__ = [
    "GateOptions",
    "build_http_app",
    "is_loopback",
    "load_token",
    "parse_listen",
    "security_settings",
    "serve_http",
]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
DEFAULT_MAX_BODY_BYTES: int = DEFAULT_MAX_REQUEST_BODY_SIZE
DEFAULT_GRACE = 10.0

_SHUTDOWN_BACKSTOP = 1
"""Seconds uvicorn waits beyond ``grace`` before cancelling on its own; our drain cuts first."""


def _health_route(health: Mapping[str, Any]) -> Route:
    # Rendered once, now: a value that is not JSON fails at startup, not at the first probe.
    body = json.dumps({"status": "ok", **health}, ensure_ascii=False).encode()

    async def healthz(request: Request) -> Response:
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    return Route(HEALTH_PATH, healthz, methods=["GET"])


def _keyring(token: str | None, tokens: Keyring | TokenSet | None) -> Keyring | None:
    """One form of the accepted tokens, whichever the caller gave.

    Raises:
        ConfigError: both were given, or ``token`` is unusable.
    """
    if token is not None and tokens is not None:
        raise ConfigError("pass either token or tokens, not both.")
    if token is not None:
        return Keyring(TokenSet.single(token, "the bearer token"))
    if isinstance(tokens, TokenSet):
        return Keyring(tokens)
    return tokens


class GateOptions(TypedDict, total=False):
    """What the gates in front of ``/mcp`` let through: :func:`build_http_app` and :func:`serve_http`."""

    token: str | None
    """One bearer token (no tenant)."""
    tokens: Keyring | TokenSet | None
    """The token file's tokens (:func:`korg_bridge.serving.auth.tokens.load_tokens`)."""
    allowed_hosts: Sequence[str]
    """Host names accepted besides the bound address."""
    allowed_origins: Sequence[str]
    max_body_bytes: int
    """The request body limit (default :data:`DEFAULT_MAX_BODY_BYTES`)."""
    rate_limit: Rate | None
    """Per token."""


def build_http_app(
    server: Server[Any], *, host: str, health: Mapping[str, Any], **gates: Unpack[GateOptions]
) -> Starlette:
    """The ASGI app: ``server`` at ``/mcp`` behind the gates, and ``/healthz``.

    ``host`` is the address it will be bound to: it decides whether a token is
    required and joins the allowed Host names. The accepted tokens are one
    ``token`` (no tenant) or ``tokens`` (:func:`korg_bridge.auth.tokens.load_tokens`;
    a :class:`~korg_bridge.auth.tokens.Keyring` can be reloaded); neither means an
    open server, loopback only. ``rate_limit`` applies per token. The app can
    be served once (the SDK's session manager runs once).

    Raises:
        ConfigError: no token for a non-loopback ``host``, an unusable token,
            both ``token`` and ``tokens``, or a body limit below one byte.
    """
    keyring = _keyring(gates.get("token"), gates.get("tokens"))
    max_body_bytes = gates.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
    rate_limit = gates.get("rate_limit")
    if keyring is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without a token: set {ENV_BRIDGE_TOKEN} or pass --token-file FILE"
        )
    if max_body_bytes < 1:
        raise ConfigError(f"the request body limit must be at least 1 byte, got {max_body_bytes}.")
    security = security_settings(host, gates.get("allowed_hosts", ()), gates.get("allowed_origins", ()))
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        max_request_body_size=max_body_bytes,
        host=host,
        custom_starlette_routes=[_health_route(health)],
    )
    app.add_middleware(BodyCheck, path=MCP_PATH, security=security, max_body_bytes=max_body_bytes)
    app.state.korg_traffic = traffic = Traffic()
    app.state.korg_keyring = keyring
    app.state.korg_limiter = limiter = None if rate_limit is None else Limiter(rate_limit)
    app.add_middleware(Gate, keyring=keyring, traffic=traffic, limiter=limiter)
    return app


def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to, on one port.

    Bound here rather than by uvicorn so a busy port is a ConfigError, not
    uvicorn's ``sys.exit``, and so port 0 has a known number to log.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(
            f"cannot resolve {host!r}: {exc.strerror}. Pass an IP address or a resolvable name to --http."
        ) from exc
    sockets: list[socket.socket] = []
    try:
        for family, address in dict.fromkeys((info[0], info[4]) for info in infos):
            bound = sockets[0].getsockname()[1] if sockets else port
            sock = socket.create_server((address[0], bound, *address[2:]), family=family)
            sockets.append(sock)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ConfigError(
            f"cannot listen on {bracketed(host)}:{port}: {exc.strerror or exc}. "
            "Pick another port or address, or stop what is using it."
        ) from exc
    return sockets


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, with the signals left to :func:`serve_http`: uvicorn
    re-raises a caught signal once it has shut down, which would turn a clean
    SIGTERM drain into death by SIGTERM."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._on_started()


class _Stopper:
    """Turns signals and cancellation into the stop described in the module docstring."""

    def __init__(self, web: _Uvicorn, traffic: Traffic, grace: float) -> None:
        self._web = web
        self._traffic = traffic
        self._grace = grace
        self.done = False
        self._draining = False

    def stop(self, why: str, tg: TaskGroup) -> None:
        if self.done:
            return
        if self._draining:
            log.warning(
                "%s during shutdown: stopping now, cutting %d request(s)", why, self._traffic.requests
            )
            self._traffic.cut_all()
            return
        self._draining = True
        # Asked to stop (Ctrl-C, a supervisor's SIGTERM): news, not a warning. Cutting requests is one.
        log.info(
            "%s: stopping; waiting up to %gs for %d request(s)", why, self._grace, self._traffic.requests
        )
        self._web.should_exit = True
        tg.start_soon(self._drain)

    def stop_now(self) -> None:
        if self.done:
            return
        self._traffic.closing = True
        self._web.should_exit = True
        self._traffic.cut_all()

    async def _drain(self) -> None:
        with anyio.move_on_after(self._grace):
            await self._traffic.wait_idle()
        self._traffic.closing = True
        if self._traffic.requests:
            log.warning("grace period over: cutting %d request(s)", self._traffic.requests)
        self._traffic.cut_all()

    async def on_signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                self.stop(signal.Signals(signum).name, tg)

    async def on_cancel(self) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            self.stop_now()


async def serve_http(
    server: Server[Any],
    *,
    host: str,
    port: int,
    health: Mapping[str, Any],
    grace: float = DEFAULT_GRACE,
    ready: anyio.Event | None = None,
    limits: ConnectionLimits | None = None,
    **gates: Unpack[GateOptions],
) -> None:
    """Serve :func:`build_http_app` with uvicorn until SIGTERM/SIGINT (or cancellation).

    Signals are handled only when called from the main thread: SIGTERM and
    SIGINT stop, SIGHUP reloads the token file of a ``tokens`` keyring
    (:func:`reload_tokens`). ``ready`` is set once the port accepts
    connections; the URL is logged at INFO. ``limits`` are the connection
    timeouts and the cap on unauthorised connections
    (:mod:`korg_bridge.auth.admission`); the soft open-file limit of this process
    is raised first.

    Raises:
        ConfigError: as :func:`build_http_app`; a negative ``grace``; the
            address cannot be resolved or bound.
        KorgError: uvicorn failed to start the app.
    """
    if not (grace >= 0 and math.isfinite(grace)):
        raise ConfigError(f"the shutdown grace period must be a finite number of seconds >= 0, got {grace}.")
    app = build_http_app(server, host=host, health=health, **gates)
    rate_limit = gates.get("rate_limit")
    traffic: Traffic = app.state.korg_traffic
    keyring: Keyring | None = app.state.korg_keyring
    limiter: Limiter | None = app.state.korg_limiter
    limits = limits or ConnectionLimits()
    file_limit = raise_file_limit()
    admission = Admission(limits.pending_cap(file_limit))
    log.debug("holding at most %d connections not yet authorised", admission.cap)
    sockets = _bind(host, port)
    url = f"http://{bracketed(host)}:{sockets[0].getsockname()[1]}{MCP_PATH}"

    def started() -> None:
        auth = (
            "no token (loopback only)"
            if keyring is None
            else f"bearer token required: {keyring.tokens.summary()}"
        )
        limit = "" if rate_limit is None else f"; rate limit {rate_limit} per token"
        log.info("serving MCP on %s (%s%s; health at %s)", url, auth, limit, HEALTH_PATH)
        if ready is not None:
            ready.set()

    config = uvicorn.Config(
        app,
        log_config=None,  # ours is already set up; uvicorn's default would log access lines to stdout
        lifespan="on",
        http=protocol_class(limits, admission),
        timeout_keep_alive=limits.keep_alive_timeout,
        server_header=False,
        timeout_graceful_shutdown=math.ceil(grace) + _SHUTDOWN_BACKSTOP,
    )
    web = _Uvicorn(config, started)
    stopper = _Stopper(web, traffic, grace)
    loop = asyncio.get_running_loop()
    # Left in place after the server stops: accept retries scheduled during a flood fire later
    # (AcceptErrors); everything else goes to the handler it replaced.
    loop.set_exception_handler(AcceptErrors(file_limit, loop.get_exception_handler()))
    try:
        async with anyio.create_task_group() as tg:
            if threading.current_thread() is threading.main_thread():
                tg.start_soon(stopper.on_signals, tg)
                await tg.start(_reload_on_sighup, keyring, limiter)
            tg.start_soon(stopper.on_cancel)
            # Shielded so that cancelling us still runs uvicorn's shutdown
            # (on_cancel has cut every request by then, so it is quick).
            with anyio.CancelScope(shield=True):
                try:
                    await web.serve(sockets)
                finally:
                    stopper.done = True
            tg.cancel_scope.cancel()
    except SystemExit as exc:  # uvicorn's answer to an app that fails to start
        raise KorgError("the HTTP server failed to start; rerun with --debug for details.") from exc
    finally:
        for sock in sockets:
            sock.close()


async def reload_tokens(keyring: Keyring | None, limiter: Limiter | None = None) -> bool:
    """Put the token file's current tokens in force (what SIGHUP does); False when
    there is nothing to reload or the file fails to load, which keeps the tokens
    in force and logs why in one line, never naming a token.

    Tokens that stay keep their rate budget and sessions; a removed token's
    next request is refused with 401.
    """
    if keyring is None:
        log.warning("SIGHUP: this server takes no token; nothing to reload")
        return False
    try:
        tokens = await anyio.to_thread.run_sync(keyring.reload)
    except ConfigError as exc:
        log.error("SIGHUP: keeping the %s in force: %s", keyring.tokens.summary(), exc.message)
        return False
    if limiter is not None:
        limiter.retain(tokens.keys)
    log.info("SIGHUP: reloaded %s: %s", tokens.source, tokens.summary())
    return True


async def _reload_on_sighup(
    keyring: Keyring | None,
    limiter: Limiter | None,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Handle SIGHUP from before the port opens: its default action would end the server."""
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        task_status.started()
        async for _ in signals:
            await reload_tokens(keyring, limiter)
