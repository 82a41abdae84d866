"""``korg-recall serve``: the console, the REST API, live updates and metrics on one port.

Loopback by default (``127.0.0.1:8377``); any other address needs ``--token-file`` (the bridge's
format, ``TOKEN [TENANT [ACTOR]]`` a line: :mod:`korg_bridge.auth.tokens`), checked before
anything is opened. One line on stderr says where it listens. The first Ctrl-C or SIGTERM stops
accepting, ends live streams and lets requests in flight finish (up to :data:`GRACE_S`); a second
one stops at once. SIGHUP reloads the token file.

A command-line-only callable (``surfaces: ["cli"]``): a model is never offered a server to start.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import sys
import threading
import webbrowser
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from korg_bridge.toolkit import Toolkit

__all__ = ["SERVE_SCHEMA", "register", "serve_cmd"]

GRACE_S = 10.0
"""How long a stop waits for requests in flight: a search or a write finishes in well under it."""

SERVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "http": {
            "type": "string",
            "maxLength": 300,
            "description": "Where to listen: [HOST:]PORT (default 127.0.0.1:8377). Any non-loopback host needs --token-file.",
        },
        "token_file": {
            "type": "string",
            "maxLength": 4096,
            "description": (
                "Bearer tokens, one a line: TOKEN [TENANT [ACTOR]] (the bridge's format). With a PostgreSQL store each "
                "token's tenant and actor apply; a person signs in once with their token."
            ),
        },
        "open": {
            "type": "boolean",
            "description": "Open the console in the default browser once it listens.",
        },
        "rate_limit": {
            "type": "string",
            "maxLength": 40,
            "description": "Requests per token: N/s, N/m or N/h (default 50/s).",
        },
        "allow_host": {
            "type": "array",
            "items": {"type": "string", "maxLength": 300},
            "maxItems": 20,
            "description": "Extra Host names the console answers for (behind a reverse proxy), e.g. recall.example.com.",
        },
    },
}


def _env() -> Mapping[str, str]:
    return os.environ


def serve_cmd(args: dict[str, Any]) -> int:
    """Raises:
    UsageError: a bad --http, --rate-limit, or a non-loopback address without --token-file.
    ConfigError: an unreadable token file; the address cannot be bound."""
    from korg_bridge.auth.binding import bracketed, is_loopback, parse_listen
    from korg_bridge.auth.ratelimit import Rate
    from korg_bridge.auth.tokens import Keyring, load_tokens
    from korg_bridge.recall.console.app import DEFAULT_PORT, DEFAULT_RATE

    host, port = parse_listen(str(args.get("http") or f"127.0.0.1:{DEFAULT_PORT}"))
    rate = Rate.parse(str(args["rate_limit"])) if args.get("rate_limit") else DEFAULT_RATE
    token_file = args.get("token_file")
    tokens = load_tokens({}, str(token_file)) if token_file else None
    if tokens is None and not is_loopback(host):
        raise UsageError(
            f"refusing to serve the console on {host} without tokens: pass --token-file FILE (lines of "
            "TOKEN [TENANT [ACTOR]]), or listen on 127.0.0.1."
        )
    keyring = None if tokens is None else Keyring(tokens, str(token_file))
    sockets = _bind(host, port)
    url = f"http://{bracketed(host) if host not in ('0.0.0.0', '::') else '127.0.0.1'}:{sockets[0].getsockname()[1]}/"
    from korg_bridge.recall.console.app import Settings, build_app

    app = build_app(
        Settings(
            env=dict(_env()),
            host=host,
            keyring=keyring,
            rate_limit=rate,
            allowed_hosts=tuple(args.get("allow_host") or ()),
        )
    )
    auth = "no token: this machine only" if keyring is None else f"tokens: {keyring.tokens.summary()}"
    sys.stderr.write(f"korg-recall: console at {url} ({auth}); Ctrl-C stops.\n")
    sys.stderr.flush()
    import anyio

    try:
        anyio.run(_serve, app, sockets, bool(args.get("open")), url)
    finally:
        for sock in sockets:
            sock.close()
    return 0


def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to, on one port (a busy port is a
    ConfigError here, not uvicorn's exit).

    Raises:
        ConfigError: the host cannot be resolved or the port bound.
    """
    from korg_bridge.auth.binding import bracketed

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve {host!r}: {exc.strerror}. Pass an IP address to --http.") from exc
    sockets: list[socket.socket] = []
    try:
        for family, address in dict.fromkeys((info[0], info[4]) for info in infos):
            bound = sockets[0].getsockname()[1] if sockets else port
            sock = socket.create_server((address[0], bound, *address[2:]), family=family)
            # Accepted connections inherit it: without it a response written in two parts (head,
            # body) waits for the client's delayed ACK, about 40 ms per request.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sockets.append(sock)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ConfigError(
            f"cannot listen on {bracketed(host)}:{port}: {exc.strerror or exc}. Pick another port with --http."
        ) from exc
    return sockets


async def _serve(app: Any, sockets: list[socket.socket], open_browser: bool, url: str) -> None:
    import anyio
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # ours: see _on_signals
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and open_browser:
                threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="on",
        server_header=False,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=math.ceil(GRACE_S),
    )
    server = Server(config)

    def stop() -> None:
        live = app.state.live
        if live.get("stopping") is not None:
            live["stopping"].set()  # live streams end, so the drain waits only for real requests
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True

    async with anyio.create_task_group() as tg:
        if threading.current_thread() is threading.main_thread():
            tg.start_soon(_on_signals, stop, app)
        await server.serve(sockets)
        tg.cancel_scope.cancel()


async def _on_signals(stop: Any, app: Any) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            if signum == signal.SIGHUP:
                _reload(app)
                continue
            sys.stderr.write(f"korg-recall: {signal.Signals(signum).name}: stopping the console.\n")
            stop()


def _reload(app: Any) -> None:
    keyring = app.state.keyring
    if keyring is None:
        sys.stderr.write("korg-recall: SIGHUP: this console takes no token; nothing to reload.\n")
        return
    try:
        tokens = keyring.reload()
    except ConfigError as exc:
        sys.stderr.write(f"korg-recall: SIGHUP: keeping the tokens in force: {exc.message}\n")
        return
    if app.state.limiter is not None:
        app.state.limiter.retain(tokens.keys)
    app.state.sessions.retain(tokens.keys)
    sys.stderr.write(f"korg-recall: SIGHUP: reloaded {tokens.summary()}.\n")


def register(kit: Toolkit) -> None:
    """Declare ``serve`` on korg-recall's toolkit (command line only)."""
    kit.command(
        "korg-recall.serve",
        description=(
            "Serve the console for people: memories (filter, search, versions with diffs, revise, pin, retire, "
            "purge, review), approvals, history, the session-start brief and health, in a browser; the same as "
            "a REST API (/api/v1, OpenAPI at /api/openapi.json), live updates and Prometheus /metrics. Loopback "
            "by default; a person's command, not offered to models."
        ),
        input_schema=SERVE_SCHEMA,
        side_effects="fs_write",
        output_mode="stream",
        long_running=True,
        surfaces=["cli"],
        on_interrupt="the console stopped after the requests in flight finished; nothing was lost.",
    )(serve_cmd)
