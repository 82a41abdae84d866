"""``/metrics`` in the Prometheus text format, on a registry of our own (never the process-wide
default, so two apps in one process -- tests -- do not collide).

* ``korg_console_requests_total{route, method, status}`` and
  ``korg_console_request_seconds{route, method}`` (a histogram), per route template, never per
  concrete path: ids in a label would grow the series without bound;
* ``korg_memories{state}``, ``korg_memories_pending``, ``korg_events_indexed``,
  ``korg_vectors_coverage`` (0-1): read when scraped, for the scraping caller's tenant.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from korg_bridge.errors import KorgError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from korg_bridge.recall.console.core import Caller
    from korg_bridge.recall.console.core import Core as Console
    from korg_bridge.recall.memory.backend.protocols import Store

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _Figures(Collector):
    """The store's and index's figures, computed at scrape time for the scraping caller."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.caller: Caller | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        caller = self.caller
        if caller is None:
            return
        states = GaugeMetricFamily("korg_memories", "Current memories by state.", labels=["state"])
        pending = GaugeMetricFamily("korg_memories_pending", "Writes awaiting a person's approval.")
        events = GaugeMetricFamily("korg_events_indexed", "History events in the recall index.")
        coverage = GaugeMetricFamily(
            "korg_vectors_coverage", "Share of indexed events with an embedding (0-1)."
        )
        try:
            counts = self._states(caller)
        except KorgError:
            counts = {}
        for state in ("live", "pending", "retired", "untrusted"):
            states.add_metric([state], counts.get(state, 0))
        pending.add_metric([], counts.get("pending", 0))
        total, covered = self._events(caller)
        events.add_metric([], total)
        coverage.add_metric([], covered)
        yield from (states, pending, events, coverage)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())

    def _states(self, caller: Caller) -> dict[str, int]:
        if not self.console.store_exists(caller):
            return {}

        def read(store: Store) -> dict[str, int]:
            from korg_bridge.recall.console.heads import heads_of

            with store.reading() as conn:
                heads = heads_of(store, conn)
                if heads is not None:
                    out: dict[str, int] = {}
                    for h in heads:
                        if not h.superseded:
                            out[h.state] = out.get(h.state, 0) + 1
                            if h.trust == "untrusted" and h.state in ("live", "pending"):
                                out["untrusted"] = out.get("untrusted", 0) + 1
                    return out
                rows = conn.execute(
                    "SELECT state, count(*), sum(CASE WHEN trust = 'untrusted' THEN 1 ELSE 0 END) FROM memory "
                    "WHERE superseded_by IS NULL GROUP BY state"
                ).fetchall()
            out = {str(state): int(count) for state, count, _ in rows}
            out["untrusted"] = sum(int(u or 0) for state, _, u in rows if state in ("live", "pending"))
            return out

        return self.console.with_store(caller, read)

    def _events(self, caller: Caller) -> tuple[int, float]:
        from korg_bridge.recall.semantic.model import resolve_model
        from korg_bridge.recall.semantic.vectors import coverage

        env = self.console.env_for(caller)

        def read(index: Any) -> tuple[int, float]:
            total = int(index.read(lambda conn: conn.execute("SELECT count(*) FROM events").fetchone()[0]))
            spec = resolve_model(env)
            if spec is None or not total:
                return total, 0.0
            found = coverage(index, spec.model_id, spec.dim).to_dict()
            return total, float(found.get("embedded", 0)) / total

        try:
            return self.console.warm.with_index(caller.warm_key, env, read)
        except KorgError:
            return 0, 0.0


class Metrics:
    """The registry, and the middleware that counts requests per route template."""

    def __init__(self, console: Console) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "korg_console_requests",
            "HTTP requests answered.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "korg_console_request_seconds",
            "Server time per request.",
            ["route", "method"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.figures = _Figures(console)
        self.registry.register(self.figures)

    def render(self, caller: Caller) -> bytes:
        """The text exposition, with the figures of ``caller``'s tenant (run in a worker thread)."""
        self.figures.caller = caller
        try:
            return generate_latest(self.registry)
        finally:
            self.figures.caller = None

    def middleware(self, app: ASGIApp) -> ASGIApp:
        metrics = self

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            status = 500

            async def watch(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                await send(message)

            try:
                await app(scope, receive, watch)
            finally:
                route = _template(scope)
                method = str(scope["method"])
                metrics.requests.labels(route, method, str(status)).inc()
                metrics.seconds.labels(route, method).observe(time.perf_counter() - started)

        return counted


def _template(scope: Scope) -> str:
    """The matched route's path template, or ``other`` (a 404, a static file)."""
    app = scope.get("app")
    router = getattr(app, "router", None)
    if str(scope.get("path", "")).startswith("/static/"):
        return "/static"
    for route in getattr(router, "routes", ()):
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return str(getattr(route, "path", "other"))
    return "other"
