"""The outermost ASGI layer of the HTTP bridge: who may pass, how often, and
what a graceful stop must wait for.

For every request but ``GET /healthz``, in this order:

1. **The bearer token** (:class:`~korg_bridge.auth.tokens.Keyring`): missing or
   wrong is 401 with ``WWW-Authenticate: Bearer``. Without a keyring (an open
   loopback server) everyone passes as :data:`~korg_bridge.auth.identity.ANONYMOUS`.
2. **Shutting down**: 503.
3. **The token's rate limit** (:class:`~korg_bridge.auth.ratelimit.Limiter`): 429
   with ``Retry-After`` and a JSON-RPC error body, which the SDK's client
   hands to the waiting call as that request's error, leaving the session
   usable. ``DELETE`` (ending a session) is never refused for it.
4. **The identity is attached**: under :data:`~korg_bridge.auth.identity.SCOPE_KEY`
   for the tool call (see :mod:`korg_bridge.auth.identity`), and as the ASGI
   ``user`` the SDK's session manager binds a session to: a session opened
   with one token answers 404 to requests bearing another, as if it did not
   exist, so one tenant cannot use (or close) another's session.

The token is never logged: refusals name the client address, granted
requests over a limit name the tenant and actor.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator

import anyio
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from korg_bridge.auth.admission import trust_connection
from korg_bridge.auth.identity import ANONYMOUS, SCOPE_KEY, Identity
from korg_bridge.auth.ratelimit import Limiter, Refusal
from korg_bridge.auth.tokens import Keyring

log = logging.getLogger("korg_bridge.serving.http")

HEALTH_PATH = "/healthz"

RATE_LIMITED = -32029
"""JSON-RPC code of a 429 body: an implementation-defined server error (JSON-RPC
reserves -32000..-32099 for those), 29 after the HTTP status."""


class Traffic:
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


class Gate:
    """The gate described in the module docstring, around the rest of the app."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        keyring: Keyring | None,
        traffic: Traffic,
        limiter: Limiter | None = None,
    ) -> None:
        self.app = app
        self.keyring = keyring
        self.limiter = limiter
        self._traffic = traffic

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        identity = ANONYMOUS
        if self.keyring is not None:
            found, problem = self._authenticate(Headers(scope=scope).get("authorization"))
            if found is None:
                log.info(
                    "refused %s %s from %s: %s", scope["method"], scope["path"], scope.get("client"), problem
                )
                await _unauthorized(problem)(scope, receive, send)
                return
            identity = found
        trust_connection(scope)  # no longer counts against the cap on unauthorised connections
        if self._traffic.closing:
            await _unavailable()(scope, receive, send)
            return
        if self.limiter is not None and scope["method"] != "DELETE":  # ending a session frees work
            refusal = self.limiter.admit(identity.key)
            if refusal is not None:
                if refusal.first:
                    log.warning("answering 429 to %s: %s", identity.describe(), refusal.message)
                await _too_many(refusal)(scope, receive, send)
                return
        scope[SCOPE_KEY] = identity
        if identity.key:
            scope["user"] = _session_owner(identity)
        await self._run(scope, receive, send, stream=scope["method"] == "GET")

    def _authenticate(self, header: str | None) -> tuple[Identity | None, str]:
        assert self.keyring is not None
        if not header:
            return None, "missing bearer token"
        scheme, _, credentials = header.partition(" ")
        # latin-1 round-trips any header value; a token is ASCII, so only an exact copy matches.
        identity = self.keyring.match(credentials.strip().encode("latin-1", "replace"))
        if scheme.lower() != "bearer" or identity is None:
            return None, "wrong bearer token"
        return identity, ""

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


def _session_owner(identity: Identity) -> object:
    """The SDK's authenticated user for ``identity``: its session manager refuses a
    session's requests made with any other (see the module docstring)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token="", client_id=identity.key, scopes=[]))


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


def _too_many(refusal: Refusal) -> Response:
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": RATE_LIMITED,
            "message": refusal.message,
            "data": {"retry_after": refusal.retry_after},
        },
    }
    return Response(
        json.dumps(body),
        status_code=429,
        media_type="application/json",
        headers={"Retry-After": str(refusal.retry_after), "Cache-Control": "no-store"},
    )


def _unavailable() -> Response:
    return JSONResponse(
        {"error": "unavailable", "message": "the server is shutting down"},
        status_code=503,
        headers={"Connection": "close", "Retry-After": "1"},
    )
