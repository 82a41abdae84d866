"""``build_app(settings)``: the console's one Starlette app -- REST API, pages, static files,
``/metrics``, ``/api/openapi.json``, live updates at ``/api/v1/events`` -- behind the guards of
:mod:`.security`.

Pages come from :mod:`.pages` (``routes(console) -> list[BaseRoute]``) when that module is
present; static files from the package's ``static/`` folder. Every route reaches the store and
the index only through :class:`~.services.Console`.

A person on a server that takes tokens signs in once on ``/login`` with a token of the token
file; the console then keeps an opaque session cookie (``HttpOnly``, ``SameSite=Strict``) for it.
API clients send ``Authorization: Bearer TOKEN`` with each request instead.
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from korg_bridge.auth.gate import Traffic
from korg_bridge.auth.ratelimit import Limiter, Rate
from korg_bridge.auth.tokens import Keyring
from korg_bridge.errors import ConfigError
from korg_bridge.recall.console import api, live, openapi
from korg_bridge.recall.console.metrics import CONTENT_TYPE, Metrics
from korg_bridge.recall.console.security import (
    SESSION_COOKIE,
    BodyLimit,
    Csrf,
    Gate,
    Headers,
    HostOrigin,
    Sessions,
    cookies_of,
    csrf_token,
    error_response,
)
from korg_bridge.recall.console.services import Console

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_PORT", "DEFAULT_RATE", "STATIC_DIR", "Settings", "build_app"]

log = logging.getLogger(__name__)

DEFAULT_PORT = 8377
DEFAULT_MAX_BODY_BYTES = 256 * 1024
"""A memory is at most 8 KB and a batch approval a hundred ids: a quarter megabyte is plenty."""
DEFAULT_RATE = Rate(50, 1.0)
"""Per token: a page and its assets, live updates and a person's clicks stay far below it."""
STATIC_DIR = Path(__file__).with_name("static")


@dataclass
class Settings:
    """How one console serves. ``host`` is the bound address (it joins the allowed Host names)."""

    env: Mapping[str, str]
    host: str = "127.0.0.1"
    keyring: Keyring | None = None
    cwd: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    rate_limit: Rate | None = DEFAULT_RATE
    background: bool = True
    """Run the background tick that keeps the history index fresh (tests of other things turn it off)."""
    extra: dict[str, Any] = field(default_factory=dict)


class _Metered:
    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.inner = metrics.middleware(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.inner(scope, receive, send)


def build_app(settings: Settings) -> Starlette:
    """The console app (see the module docstring); ``app.state.console`` is its :class:`Console`.

    Raises:
        ConfigError: no token for a non-loopback ``host``, or a body limit below one byte.
    """
    from korg_bridge.auth.binding import is_loopback

    if settings.keyring is None and not is_loopback(settings.host):
        raise ConfigError(
            f"refusing to serve the console on {settings.host} without tokens: pass --token-file FILE "
            "(lines of TOKEN [TENANT [ACTOR]])."
        )
    if settings.max_body_bytes < 1:
        raise ConfigError(f"the request body limit must be at least 1 byte, got {settings.max_body_bytes}.")
    console = Console(settings.env, cwd=settings.cwd)
    metrics = Metrics(console)
    sessions = Sessions()
    traffic = Traffic()
    indexer = live.Indexer(console)
    limiter = None if settings.rate_limit is None else Limiter(settings.rate_limit)
    state: dict[str, Any] = {"stopping": None}  # made in the lifespan: an Event binds to its loop

    routes: list[BaseRoute] = [
        *_service_routes(console, metrics, state),
        *_sign_in_routes(settings, sessions, limiter),
        *api.routes(console),
        *_pages(console),
    ]
    if STATIC_DIR.is_dir():
        routes.append(Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state["stopping"] = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                if settings.background:
                    tg.start_soon(indexer.run, state["stopping"])
                try:
                    yield
                finally:
                    state["stopping"].set()
                    tg.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(console.close)

    middleware = [
        Middleware(Headers),
        Middleware(_Metered, metrics=metrics),
        Middleware(HostOrigin, host=settings.host, extra_hosts=settings.allowed_hosts),
        Middleware(BodyLimit, max_body_bytes=settings.max_body_bytes),
        Middleware(Gate, keyring=settings.keyring, sessions=sessions, traffic=traffic, limiter=limiter),
        Middleware(Csrf, max_body_bytes=settings.max_body_bytes),
    ]

    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={404: _not_found, 405: _not_allowed},
    )
    app.state.console = console
    app.state.traffic = traffic
    app.state.sessions = sessions
    app.state.limiter = limiter
    app.state.keyring = settings.keyring
    app.state.live = state
    app.state.metrics = metrics
    return app


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(
        request.scope, 404, "not_found", f"no route {request.url.path}; see /api/openapi.json"
    )


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(
        request.scope, 405, "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"
    )


def _service_routes(console: Console, metrics: Metrics, state: dict[str, Any]) -> list[BaseRoute]:
    """What machines read: health, the OpenAPI document, live updates, the CSRF token, metrics."""

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi.document())

    async def events(request: Request) -> Response:
        who = api.caller_of(request)
        if state["stopping"] is None:  # served without a lifespan (an ASGI test client)
            state["stopping"] = anyio.Event()
        return StreamingResponse(
            live.stream(console, who, state["stopping"]),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    async def metrics_text(request: Request) -> Response:
        body = await anyio.to_thread.run_sync(metrics.render, api.caller_of(request))
        return Response(body, media_type=CONTENT_TYPE)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def csrf(request: Request) -> Response:
        return JSONResponse({"csrf_token": csrf_token(request.scope)})

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/api/openapi.json", openapi_json, methods=["GET"]),
        Route(api.API_PREFIX + "/events", events, methods=["GET"]),
        Route(api.API_PREFIX + "/csrf", csrf, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
    ]


def _sign_in_routes(settings: Settings, sessions: Sessions, limiter: Limiter | None) -> list[BaseRoute]:
    """A person signs in with a token once; the browser then carries a session cookie."""

    async def login_form(request: Request) -> Response:
        if settings.keyring is None:
            return RedirectResponse("/", status_code=303)
        return _login_page(csrf_token(request.scope), "")

    async def login(request: Request) -> Response:
        if settings.keyring is None:
            return RedirectResponse("/", status_code=303)
        if limiter is not None and limiter.admit("login") is not None:
            return _login_page(csrf_token(request.scope), "Too many attempts; wait a moment.", 429)
        form = await request.form()
        token = str(form.get("token") or "").strip()
        identity = settings.keyring.match(token.encode("latin-1", "replace")) if token else None
        if identity is None:
            log.info("console sign-in refused from %s", request.client)
            return _login_page(csrf_token(request.scope), "That is not a token of this server.", 401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE, sessions.start(identity), httponly=True, samesite="strict", path="/"
        )
        return response

    async def logout(request: Request) -> Response:
        sid = cookies_of(request.scope).get(SESSION_COOKIE)
        if sid:
            sessions.end(sid)
        response = RedirectResponse("/login" if settings.keyring is not None else "/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    return [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]


def _pages(console: Console) -> list[BaseRoute]:
    """The HTML pages (console-ui's :mod:`.pages`), or one page saying they are not installed."""
    if importlib.util.find_spec("korg_bridge.recall.console.pages") is not None:
        from korg_bridge.recall.console import pages  # type: ignore[attr-defined, unused-ignore]

        found: list[BaseRoute] = pages.routes(console)
        return found

    async def index(request: Request) -> Response:
        return Response(
            "<!doctype html><html lang=en><head><meta charset=utf-8><title>korg-recall</title></head>"
            "<body><main><h1>korg-recall console</h1><p>The REST API is at "
            '<a href="/api/openapi.json">/api/openapi.json</a>.</p></main></body></html>',
            media_type="text/html; charset=utf-8",
        )

    return [Route("/", index, methods=["GET"])]


def _login_page(token: str, problem: str, status: int = 200) -> Response:
    note = f'<p role="alert">{html.escape(problem)}</p>' if problem else ""
    css = (
        '<link rel="stylesheet" href="/static/console.css">' if (STATIC_DIR / "console.css").is_file() else ""
    )
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # Under the header's Referrer-Policy no-referrer a browser sends "Origin: null" with a
        # form post, which the Origin check refuses; same-origin keeps the referrer at home.
        '<meta name="referrer" content="same-origin"><meta name="color-scheme" content="light dark">'
        f"<title>Sign in · korg-recall</title>{css}</head><body><main><h1>Sign in</h1>{note}"
        '<form method="post" action="/login">'
        f'<input type="hidden" name="csrf_token" value="{html.escape(token, quote=True)}">'
        '<label for="token">Token (a line of the server\'s token file)</label> '
        '<input id="token" name="token" type="password" autocomplete="current-password" required> '
        '<button type="submit">Sign in</button></form></main></body></html>'
    )
    return Response(body, status_code=status, media_type="text/html; charset=utf-8")
