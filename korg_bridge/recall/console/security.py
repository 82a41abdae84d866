"""The console's guards, outermost first, each a plain ASGI middleware:

1. :class:`Headers` -- every response carries ``Content-Security-Policy: default-src 'self'`` (no
   inline script or style, no frame, no plugin, forms post only here), ``X-Content-Type-Options:
   nosniff``, ``Referrer-Policy: no-referrer``, ``X-Frame-Options: DENY`` and the cross-origin
   isolation headers; pages and API answers are ``Cache-Control: no-store``.
2. :class:`HostOrigin` -- DNS rebinding: the ``Host`` must be a loopback name or the bound address
   (any port) or one the operator allowed, and an ``Origin``, when sent, must be this server's
   (421 / 403). A page of another site therefore cannot read or drive the console, even on
   loopback.
3. :class:`Gate` -- who: a bearer token (``Authorization: Bearer``, for API clients) or the
   session cookie a person gets by giving the token once on ``/login``; without a keyring (an open
   loopback server) everyone is :data:`~korg_bridge.auth.identity.ANONYMOUS`. Then the per-token
   rate limit (429 with ``Retry-After``), and the identity is left in the scope
   (:data:`~korg_bridge.auth.identity.SCOPE_KEY`) for the services.
4. :class:`Csrf` -- a state-changing request (POST, PUT, PATCH, DELETE) made with the browser's
   credentials (the session cookie, or none at all on an open loopback server) must carry the
   double-submit token: the ``korg_csrf`` cookie's value in an ``X-CSRF-Token`` header (scripts) or
   a ``csrf_token`` form field (forms, no JavaScript needed). A request authenticated by its
   ``Authorization`` header is exempt: no other site can make a browser send that header.
5. :class:`BodyLimit` -- a body over the limit is 413, whether it says so in ``Content-Length``
   or not.

Errors are JSON ``{"error": {"code", "message"}}`` for ``/api/`` paths and a short text page
otherwise.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

import anyio
from starlette.datastructures import Headers as RequestHeaders
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from korg_bridge.auth.admission import trust_connection
from korg_bridge.auth.binding import LOOPBACK_HOSTS, bracketed
from korg_bridge.auth.gate import Traffic
from korg_bridge.auth.identity import ANONYMOUS, SCOPE_KEY, Identity
from korg_bridge.auth.ratelimit import Limiter
from korg_bridge.auth.tokens import Keyring

__all__ = [
    "CSP",
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "BodyLimit",
    "Csrf",
    "Gate",
    "Headers",
    "HostOrigin",
    "Sessions",
    "csrf_token",
    "error_response",
]

log = logging.getLogger(__name__)

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SESSION_COOKIE = "korg_session"
CSRF_COOKIE = "korg_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
CSRF_SCOPE_KEY = "korg.csrf"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OPEN_PATHS = ("/login", "/static/", "/healthz")
"""What a caller without credentials may reach on a server that takes tokens (the login form and
the assets it uses, the health probe)."""
SESSION_TTL_S = 12 * 3600.0
"""A console session lasts a working day; then the token is asked for again."""


def error_response(
    scope: Scope, status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    """The error body an API client or a person gets, by path."""
    if str(scope.get("path", "")).startswith("/api/"):
        return JSONResponse(
            {"error": {"code": code, "message": message}}, status_code=status, headers=headers
        )
    return PlainTextResponse(f"{status} {code}: {message}\n", status_code=status, headers=headers)


class Headers:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = str(scope["path"]).startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control" or static
                ]
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                    (b"cross-origin-opener-policy", b"same-origin"),
                    (b"cross-origin-resource-policy", b"same-origin"),
                ]
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


def _authority_matches(value: str, allowed: Sequence[str]) -> bool:
    value = value.strip().lower()
    for entry in allowed:
        if entry.endswith(":*"):
            base = entry[:-2]
            if value == base or re.fullmatch(re.escape(base) + r":\d{1,5}", value):
                return True
        elif value == entry:
            return True
    return False


class HostOrigin:
    """See the module docstring; ``host`` is the bound address, ``extra_hosts`` the operator's."""

    def __init__(self, app: ASGIApp, *, host: str, extra_hosts: Sequence[str] = ()) -> None:
        self.app = app
        names = {
            *(n.lower() for n in LOOPBACK_HOSTS),
            bracketed(host).lower(),
            *(h.lower() for h in extra_hosts),
        }
        self.hosts = [
            f"{name}:*" if not re.search(r":\d+\Z", name) or name.endswith("]") else name for name in names
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/healthz":
            await self.app(scope, receive, send)
            return
        headers = RequestHeaders(scope=scope)
        host = headers.get("host", "")
        if not _authority_matches(host, self.hosts):
            log.info("refused %s %s: Host %r is not this server's", scope["method"], scope["path"], host[:80])
            await error_response(scope, 421, "misdirected", "this server does not answer for that Host")(
                scope, receive, send
            )
            return
        origin = headers.get("origin")
        if origin is not None:
            scheme, _, authority = origin.partition("://")
            if scheme not in ("http", "https") or authority.lower() != host.strip().lower():
                log.info("refused %s %s: Origin %r", scope["method"], scope["path"], origin[:80])
                await error_response(scope, 403, "forbidden_origin", "requests from other sites are refused")(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


@dataclass(slots=True)
class _Session:
    identity: Identity
    expires: float


class Sessions:
    """Console sessions: an opaque random id (the cookie) standing for a token's identity, kept in
    memory only (a restart signs everyone out; the token itself never sits in a cookie)."""

    def __init__(self, ttl: float = SESSION_TTL_S) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._by_id: dict[str, _Session] = {}

    def start(self, identity: Identity) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            for key in [k for k, s in self._by_id.items() if s.expires < now]:
                del self._by_id[key]
            self._by_id[sid] = _Session(identity, now + self.ttl)
        return sid

    def get(self, sid: str) -> Identity | None:
        with self._lock:
            found = self._by_id.get(sid)
            if found is None or found.expires < time.monotonic():
                self._by_id.pop(sid, None)
                return None
            return found.identity

    def end(self, sid: str) -> None:
        with self._lock:
            self._by_id.pop(sid, None)

    def retain(self, keys: frozenset[str]) -> None:
        """Forget the sessions of tokens no longer accepted (after a token file reload)."""
        with self._lock:
            for sid in [k for k, s in self._by_id.items() if s.identity.key not in keys]:
                del self._by_id[sid]


def cookies_of(scope: Scope) -> dict[str, str]:
    raw = RequestHeaders(scope=scope).get("cookie", "")
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed Cookie header counts as none
        return {}
    return {key: morsel.value for key, morsel in jar.items()}


class Gate:
    """See the module docstring. ``traffic`` counts requests for a graceful stop."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        keyring: Keyring | None,
        sessions: Sessions,
        traffic: Traffic,
        limiter: Limiter | None,
    ) -> None:
        self.app = app
        self.keyring = keyring
        self.sessions = sessions
        self.traffic = traffic
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope["path"])
        identity, by_header = ANONYMOUS, False
        if self.keyring is not None:
            found, by_header, problem = self._authenticate(scope)
            if found is None:
                if path.startswith(OPEN_PATHS):
                    await self._pass(scope, receive, send, ANONYMOUS, by_header=False)
                    return
                log.info("refused %s %s from %s: %s", scope["method"], path, scope.get("client"), problem)
                if path.startswith("/api/") or by_header or scope["method"] != "GET":
                    await error_response(
                        scope,
                        401,
                        "unauthorized",
                        f"{problem}: send 'Authorization: Bearer TOKEN' with a token of the server's token file",
                        {"WWW-Authenticate": 'Bearer realm="korg-recall"'},
                    )(scope, receive, send)
                else:
                    await Response(status_code=303, headers={"Location": "/login"})(scope, receive, send)
                return
            identity = found
        trust_connection(scope)
        if self.traffic.closing:
            await error_response(
                scope, 503, "unavailable", "the server is shutting down", {"Retry-After": "1"}
            )(scope, receive, send)
            return
        if self.limiter is not None and not path.startswith("/static/"):
            refusal = self.limiter.admit(identity.key)
            if refusal is not None:
                if refusal.first:
                    log.warning("answering 429 to %s: %s", identity.describe(), refusal.message)
                await error_response(
                    scope,
                    429,
                    "rate_limited",
                    refusal.message.replace("(--rate-limit)", "(korg-recall serve --rate-limit)"),
                    {"Retry-After": str(refusal.retry_after)},
                )(scope, receive, send)
                return
        await self._pass(scope, receive, send, identity, by_header=by_header)

    async def _pass(
        self, scope: Scope, receive: Receive, send: Send, identity: Identity, *, by_header: bool
    ) -> None:
        scope[SCOPE_KEY] = identity
        scope["korg.by_header"] = by_header
        stream = scope["path"] == "/api/v1/events"  # never finishes by itself: only cut
        with anyio.CancelScope() as cut, self.traffic.track(cut, stream=stream):
            await self.app(scope, receive, send)
        if cut.cancelled_caught:
            log.info("cut %s %s at shutdown", scope["method"], scope["path"])

    def _authenticate(self, scope: Scope) -> tuple[Identity | None, bool, str]:
        assert self.keyring is not None
        header = RequestHeaders(scope=scope).get("authorization")
        if header:
            scheme, _, credentials = header.partition(" ")
            identity = self.keyring.match(credentials.strip().encode("latin-1", "replace"))
            if scheme.lower() != "bearer" or identity is None:
                return None, True, "wrong bearer token"
            return identity, True, ""
        sid = cookies_of(scope).get(SESSION_COOKIE)
        if sid:
            identity = self.sessions.get(sid)
            if identity is not None and identity.key in self.keyring.tokens.keys:
                return identity, False, ""
            return None, False, "the console session expired"
        return None, False, "missing bearer token"


class Csrf:
    """See the module docstring."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        expected = cookies_of(scope).get(CSRF_COOKIE, "")
        if not _TOKEN.fullmatch(expected):
            expected = ""
        scope[CSRF_SCOPE_KEY] = expected or secrets.token_urlsafe(32)
        if not expected:  # give the browser its token with this answer, whatever it is
            send = _setting_cookie(send, scope[CSRF_SCOPE_KEY])
        if scope["method"] not in UNSAFE or scope.get("korg.by_header"):
            await self.app(scope, receive, send)
            return
        headers = RequestHeaders(scope=scope)
        presented = headers.get(CSRF_HEADER)
        replay: list[Message] = []
        if presented is None and headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"
        ):
            body, replay, too_big = await _read_body(receive, self.max_body_bytes)
            if too_big:
                await error_response(
                    scope, 413, "too_large", f"the request body is over {self.max_body_bytes} bytes"
                )(scope, receive, send)
                return
            values = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).get(CSRF_FIELD)
            presented = values[0] if values else None
        if (
            not expected
            or presented is None
            or not hmac.compare_digest(expected.encode(), presented.encode())
        ):
            log.info("refused %s %s: CSRF token missing or wrong", scope["method"], scope["path"])
            await error_response(
                scope,
                403,
                "csrf",
                "the form's CSRF token is missing or stale: reload the page and try again "
                f"(scripts: send the {CSRF_COOKIE} cookie's value in {CSRF_HEADER.title()})",
            )(scope, receive, send)
            return
        if replay:
            pending = list(replay)

            async def replayed() -> Message:
                return pending.pop(0) if pending else await receive()

            await self.app(scope, replayed, send)
            return
        await self.app(scope, receive, send)


_TOKEN = re.compile(r"[A-Za-z0-9_-]{32,64}")


def _setting_cookie(send: Send, token: str) -> Send:
    cookie = f"{CSRF_COOKIE}={token}; Path=/; SameSite=Strict".encode()

    async def with_cookie(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie)]}
        await send(message)

    return with_cookie


def csrf_token(scope: Scope) -> str:
    """The double-submit token of this request's browser: what a form's hidden ``csrf_token``
    field carries (pages render it; scripts read the ``korg_csrf`` cookie)."""
    return str(scope.get(CSRF_SCOPE_KEY, ""))


async def _read_body(receive: Receive, cap: int) -> tuple[bytes, list[Message], bool]:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), [message], False
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return b"", [], True
        chunks.append(chunk)
        if not message.get("more_body", False):
            body = b"".join(chunks)
            return body, [{"type": "http.request", "body": body, "more_body": False}], False


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = RequestHeaders(scope=scope).get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await error_response(
                scope, 413, "too_large", f"the request body is over {self.max_body_bytes} bytes"
            )(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await error_response(
                scope, 413, "too_large", f"the request body is over {self.max_body_bytes} bytes"
            )(scope, receive, send)


class _TooLarge(Exception):
    pass


def dumps(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()
