"""Serve the bridge over Streamable HTTP: ``korg-bridge BINARY --http [HOST:]PORT``.

Over stdio the only client is the process that started us; over HTTP it is
whoever can reach the port, so three gates stand in front of the SDK's app:

- **Bearer token** (``Authorization: Bearer TOKEN``), compared in constant
  time; required whenever the address is not loopback. The token comes from
  ``KORG_BRIDGE_TOKEN`` or a file, never from argv (``ps`` shows argv to every
  local user) and never reaches a log. Missing or wrong: 401 with
  ``WWW-Authenticate: Bearer``. The SDK's own auth (``TokenVerifier``) is built
  for OAuth: it advertises an authorization server we do not have.
- **Host/Origin checks** against DNS rebinding, by the SDK's
  ``TransportSecuritySettings``: a foreign ``Host`` gets the SDK's 421, a
  foreign ``Origin`` its 403 (and a POST that is not JSON its 400).
- **Body limit**, the SDK's ``max_request_body_size``: 413.

Below the app, each connection has a header timeout, a body idle timeout and
counts against a cap on connections not yet authorised, oldest closed first
(:mod:`korg_bridge.admission`), so a flood of half-open connections cannot
lock out the token holder.

A body that is not a valid JSON-RPC message is answered 400 with a JSON-RPC
error (``-32700``/``-32600``, the request's id when it can be told) by
:class:`~korg_bridge.jsonrpc.BodyCheck`, where the SDK would answer
``INVALID_PARAMS`` without the id.

``GET /healthz`` is open (no token, no Host check) so probes and load
balancers can use it; it reveals only what ``--list-tools`` does.

Stopping: the first SIGTERM or SIGINT stops accepting, lets in-flight
requests finish for up to ``grace`` seconds, then cuts what is left (a
cancelled tool call's process is killed by the bridge's own cleanup); a
second signal cuts at once. A long-lived ``GET /mcp`` stream (older clients
keep one open per session) would never finish by itself, so it is cut as soon
as the last request is done. Cancelling :func:`serve_http` stops at once.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import math
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import anyio
import uvicorn
from anyio.abc import TaskGroup
from mcp.server.lowlevel import Server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .admission import Admission, ConnectionLimits, protocol_class, raise_file_limit, trust_connection
from .errors import ConfigError, KorgError
from .jsonrpc import BodyCheck
from .listen import (
    TOKEN_CHARS,
    TOKEN_ENV,
    bracketed,
    is_loopback,
    load_token,
    parse_listen,
    security_settings,
)

__all__ = [
    "TOKEN_ENV",
    "build_http_app",
    "is_loopback",
    "load_token",
    "parse_listen",
    "security_settings",
    "serve_http",
]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
DEFAULT_MAX_BODY_BYTES: int = DEFAULT_MAX_REQUEST_BODY_SIZE
DEFAULT_GRACE = 10.0

_SHUTDOWN_BACKSTOP = 1
"""Seconds uvicorn waits beyond ``grace`` before cancelling on its own; our drain cuts first."""


class _Traffic:
    """What a graceful stop waits for.

    A request (a POST or DELETE) finishes by itself; a ``GET /mcp`` stream
    does not, so it is only cut. Each runs in its own cancel scope so a stop
    can cut it and still end the HTTP response properly.
    """

    def __init__(self) -> None:
        self.closing = False
        self.requests = 0
        self._scopes: set[anyio.CancelScope] = set()
        self._idle: anyio.Event | None = None

    @contextlib.contextmanager
    def track(self, scope: anyio.CancelScope, *, stream: bool) -> Iterator[None]:
        counted = 0 if stream else 1
        self._scopes.add(scope)
        self.requests += counted
        try:
            yield
        finally:
            self._scopes.discard(scope)
            self.requests -= counted
            if not self.requests and self._idle is not None:
                self._idle.set()

    async def wait_idle(self) -> None:
        """Until no request is in flight (one waiter at a time: the drain)."""
        while self.requests:
            self._idle = anyio.Event()
            await self._idle.wait()

    def cut_all(self) -> None:
        for scope in list(self._scopes):
            scope.cancel()


class _Gate:
    """The outermost ASGI layer: the bearer token for everything but
    ``/healthz``, and the bookkeeping a graceful stop needs."""

    def __init__(self, app: ASGIApp, *, token: str | None, traffic: _Traffic) -> None:
        self.app = app
        self._expected = None if token is None else token.encode("ascii")
        self._traffic = traffic

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        if self._expected is not None:
            problem = self._auth_problem(Headers(scope=scope).get("authorization"))
            if problem is not None:
                client = scope.get("client")
                log.info("refused %s %s from %s: %s", scope["method"], scope["path"], client, problem)
                await _unauthorized(problem)(scope, receive, send)
                return
        trust_connection(scope)  # no longer counts against the cap on unauthorised connections
        if self._traffic.closing:
            await _unavailable()(scope, receive, send)
            return
        await self._run(scope, receive, send, stream=scope["method"] == "GET")

    def _auth_problem(self, header: str | None) -> str | None:
        assert self._expected is not None
        if not header:
            return "missing bearer token"
        scheme, _, credentials = header.partition(" ")
        # compare_digest on bytes of equal meaning; latin-1 round-trips any header value.
        given = credentials.strip().encode("latin-1", "replace")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given, self._expected):
            return "wrong bearer token"
        return None

    async def _run(self, scope: Scope, receive: Receive, send: Send, *, stream: bool) -> None:
        started = completed = False

        async def watched_send(message: Message) -> None:
            nonlocal started, completed
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                completed = True
            await send(message)

        with anyio.CancelScope() as cut, self._traffic.track(cut, stream=stream):
            await self.app(scope, receive, watched_send)
        if cut.cancelled_caught and not completed:
            # Cut by a stop: end the response cleanly rather than drop the connection mid-body.
            with anyio.CancelScope(shield=True):
                if started:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                else:
                    await _unavailable()(scope, receive, send)


def _unauthorized(problem: str) -> Response:
    challenge = 'Bearer realm="korg-bridge"'
    if problem.startswith("wrong"):
        challenge += ', error="invalid_token"'
    return JSONResponse(
        {
            "error": "unauthorized",
            "message": f"{problem}: send 'Authorization: Bearer TOKEN' with the server's token",
        },
        status_code=401,
        headers={"WWW-Authenticate": challenge},
    )


def _unavailable() -> Response:
    return JSONResponse(
        {"error": "unavailable", "message": "the server is shutting down"},
        status_code=503,
        headers={"Connection": "close", "Retry-After": "1"},
    )


def _health_route(health: Mapping[str, Any]) -> Route:
    # Rendered once, now: a value that is not JSON fails at startup, not at the first probe.
    body = json.dumps({"status": "ok", **health}, ensure_ascii=False).encode()

    async def healthz(request: Request) -> Response:
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    return Route(HEALTH_PATH, healthz, methods=["GET"])


def build_http_app(
    server: Server[Any],
    *,
    host: str,
    token: str | None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    health: Mapping[str, Any],
) -> Starlette:
    """The ASGI app: ``server`` at ``/mcp`` behind the gates, and ``/healthz``.

    ``host`` is the address it will be bound to: it decides whether a token is
    required and joins the allowed Host names. The app can be served once
    (the SDK's session manager runs once).

    Raises:
        ConfigError: no token for a non-loopback ``host``, an unusable token,
            or a body limit below one byte.
    """
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without a token: set {TOKEN_ENV} or pass --token-file FILE"
        )
    if token is not None and not TOKEN_CHARS.fullmatch(token):
        raise ConfigError("the bearer token must be one run of printable ASCII without spaces.")
    if max_body_bytes < 1:
        raise ConfigError(f"the request body limit must be at least 1 byte, got {max_body_bytes}.")
    security = security_settings(host, allowed_hosts, allowed_origins)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        max_request_body_size=max_body_bytes,
        host=host,
        custom_starlette_routes=[_health_route(health)],
    )
    app.add_middleware(BodyCheck, path=MCP_PATH, security=security, max_body_bytes=max_body_bytes)
    app.state.korg_traffic = traffic = _Traffic()
    app.add_middleware(_Gate, token=token, traffic=traffic)
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

    def __init__(self, web: _Uvicorn, traffic: _Traffic, grace: float) -> None:
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
        log.warning(
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
    token: str | None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    health: Mapping[str, Any],
    grace: float = DEFAULT_GRACE,
    ready: anyio.Event | None = None,
    limits: ConnectionLimits | None = None,
) -> None:
    """Serve :func:`build_http_app` with uvicorn until SIGTERM/SIGINT (or cancellation).

    Signals are handled only when called from the main thread. ``ready`` is
    set once the port accepts connections; the URL is logged at INFO.
    ``limits`` are the connection timeouts and the cap on unauthorised
    connections (:mod:`korg_bridge.admission`); the soft open-file limit of
    this process is raised first.

    Raises:
        ConfigError: as :func:`build_http_app`; a negative ``grace``; the
            address cannot be resolved or bound.
        KorgError: uvicorn failed to start the app.
    """
    if not (grace >= 0 and math.isfinite(grace)):
        raise ConfigError(f"the shutdown grace period must be a finite number of seconds >= 0, got {grace}.")
    app = build_http_app(
        server,
        host=host,
        token=token,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        max_body_bytes=max_body_bytes,
        health=health,
    )
    traffic: _Traffic = app.state.korg_traffic
    limits = limits or ConnectionLimits()
    admission = Admission(limits.pending_cap(raise_file_limit()))
    log.debug("holding at most %d connections not yet authorised", admission.cap)
    sockets = _bind(host, port)
    url = f"http://{bracketed(host)}:{sockets[0].getsockname()[1]}{MCP_PATH}"

    def started() -> None:
        auth = "bearer token required" if token is not None else "no token (loopback only)"
        log.info("serving MCP on %s (%s; health at %s)", url, auth, HEALTH_PATH)
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
    try:
        async with anyio.create_task_group() as tg:
            if threading.current_thread() is threading.main_thread():
                tg.start_soon(stopper.on_signals, tg)
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
