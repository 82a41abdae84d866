"""Which HTTP connections the bridge keeps, and for how long.

uvicorn closes a kept-alive connection that stays idle after a response, but
nothing else: a connection that sends half a request head and stops (a
"slowloris"), or never sends anything, is held forever. A thousand of them
exhaust the default 1,024-descriptor limit, and then the token holder and
``/healthz`` are refused too. So each connection runs uvicorn's h11 protocol
with three additions (:class:`GuardedH11Protocol`):

- **Header timeout**: a request head must arrive complete within
  :data:`HEADER_TIMEOUT` of the connection opening (or of the previous
  response, on a kept-alive connection). An absolute deadline, so trickling
  one byte at a time does not extend it.
- **Body idle timeout**: a request body that stalls for
  :data:`BODY_IDLE_TIMEOUT` is cut. Once a request is fully read (its tool
  call may run for minutes, an SSE stream for hours) no timer runs.
- **A cap on unauthorised connections** (:class:`Admission`): a connection
  counts as *pending* until a request on it passes the bearer-token gate (or,
  without a token, reaches the app). Beyond the cap the **oldest** pending
  connection is closed. A flood therefore pushes out its own oldest
  connections, while an honest client, whose request arrives milliseconds
  after it connects, is the newest and gets through; refusing new
  connections instead would lock honest clients out until the flood's
  timeouts expired.

And at start, :func:`raise_file_limit` lifts the soft open-file limit to
the hard one, so the cap, not the descriptor table, is what runs out first.
When the table runs out all the same (authorised connections are not capped,
and a low hard limit leaves little room), asyncio's accept loop reports every
refused ``accept()`` as an error with a traceback, many a second;
:class:`AcceptErrors` says it once per flood, as one warning line.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEADER_TIMEOUT = 10.0
"""Seconds a request head may take to arrive: honest clients send it in one packet."""

BODY_IDLE_TIMEOUT = 30.0
"""Seconds a request body may stall between two chunks before the connection is cut."""

KEEP_ALIVE_TIMEOUT = 5
"""Seconds an idle connection stays open after a response (uvicorn's default, named here)."""

MAX_PENDING = 1024
"""Most connections held that no request has yet authorised: far more than honest
clients open at once, few enough to bound what a flood costs."""

FILE_LIMIT_CEILING = 65536
"""Highest soft open-file limit we set. Children inherit it, and some programs close
every possible descriptor when they start: under a hard limit of a billion (common
in containers) that takes them minutes."""

TRUST = "korg.admission.trust"
"""Scope key of a callable that marks the request's connection as authorised."""

FLOOD_QUIET = 30.0
"""Seconds without a refused ``accept()`` after which the next one starts a new flood (a new warning)."""

_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""What asyncio's accept loop survives by waiting: the errors it reports as "out of system resource"."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The limits one HTTP server applies (tests shorten them)."""

    header_timeout: float = HEADER_TIMEOUT
    body_idle_timeout: float = BODY_IDLE_TIMEOUT
    keep_alive_timeout: int = KEEP_ALIVE_TIMEOUT
    max_pending: int | None = None
    """``None``: :data:`MAX_PENDING`, or half the open-file limit if that is lower."""

    def pending_cap(self, file_limit: int) -> int:
        if self.max_pending is not None:
            return self.max_pending
        # Half the descriptors stay for authorised clients, tool pipes and files.
        return max(1, min(MAX_PENDING, file_limit // 2))


def raise_file_limit() -> int:
    """Lift the soft ``RLIMIT_NOFILE`` to the hard limit (at most
    :data:`FILE_LIMIT_CEILING`); returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = FILE_LIMIT_CEILING if hard == resource.RLIM_INFINITY else min(hard, FILE_LIMIT_CEILING)
    if soft != resource.RLIM_INFINITY and soft >= target:
        return soft
    if soft == resource.RLIM_INFINITY:
        return FILE_LIMIT_CEILING
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:  # e.g. macOS refuses more than OPEN_MAX
        log.debug("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        return soft
    log.debug("raised the open-file limit from %d to %d", soft, target)
    return target


class Admission:
    """The pending connections of one server, oldest first."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._pending: dict[GuardedH11Protocol, None] = {}

    @property
    def pending(self) -> int:
        return len(self._pending)

    def admit(self, connection: GuardedH11Protocol) -> None:
        self._pending[connection] = None
        while len(self._pending) > self.cap:
            oldest = next(iter(self._pending))
            del self._pending[oldest]
            oldest.close(f"more than {self.cap} connections not yet authorised; this was the oldest")

    def trust(self, connection: GuardedH11Protocol) -> None:
        self._pending.pop(connection, None)

    forget = trust


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the timeouts and the admission described above.

    Bound to one server's limits by :func:`protocol_class`.
    """

    limits: ClassVar[ConnectionLimits]
    admission: ClassVar[Admission]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_for: str | None = None
        self._downstream = self.app
        self.app = self._with_trust  # each request can mark this connection authorised

    async def _with_trust(self, scope: Any, receive: Any, send: Any) -> None:
        scope[TRUST] = self._trusted
        await self._downstream(scope, receive, send)

    def _trusted(self) -> None:
        self.admission.trust(self)

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.admission.admit(self)
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.admission.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    # --- timers ---------------------------------------------------------------------------------

    def _follow(self) -> None:
        """Arm the timer that fits what we now wait for from the client."""
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._waiting_for != "head":  # an absolute deadline: never re-armed while waiting
                self._arm("head", self.limits.header_timeout)
        elif state is h11.SEND_BODY:
            self._arm("body", self.limits.body_idle_timeout)  # re-armed by every chunk
        else:  # the request is read: the app's work is not the client's delay
            self._disarm()

    def _arm(self, waiting_for: str, delay: float) -> None:
        self._disarm()
        self._waiting_for = waiting_for
        self._timer = self.loop.call_later(delay, self._expired, waiting_for, delay)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._waiting_for = None

    def _expired(self, waiting_for: str, delay: float) -> None:
        self._timer = None
        what = "no complete request head" if waiting_for == "head" else "the request body stalled"
        self.close(f"{what} within {delay:g}s")

    def close(self, why: str) -> None:
        """Close the connection (nothing is sent: there is no request to answer)."""
        self._disarm()
        if self.transport.is_closing():
            return
        log.debug("closing connection from %s: %s", self.client, why)
        if self.cycle is not None and not self.cycle.response_complete:
            # A request read but not yet past the gate: what connection_lost will say anyway, said
            # now, so the app's answer goes nowhere instead of into a closed h11 connection (an error).
            self.cycle.disconnected = True
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()


def protocol_class(limits: ConnectionLimits, admission: Admission) -> type[GuardedH11Protocol]:
    """The protocol uvicorn instantiates per connection, bound to one server's limits."""
    return type("BoundGuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits, "admission": admission})


def trust_connection(scope: Any) -> None:
    """Mark the connection of an authorised request (a no-op outside our protocol)."""
    trusted: Callable[[], None] | None = scope.get(TRUST)
    if trusted is not None:
        trusted()


class AcceptErrors:
    """An asyncio exception handler (``loop.set_exception_handler``) that turns the accept loop's
    "out of system resource" reports (a traceback each, many a second while it lasts) into one
    warning per flood; every other report goes to ``fallback`` (None: asyncio's default).

    The loop itself keeps waiting and accepting again, and the connections queued meanwhile get
    in as others close: there is nothing to do but say so, once.
    """

    def __init__(
        self,
        file_limit: int,
        fallback: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.file_limit = file_limit
        self._fallback = fallback
        self._clock = clock
        self._last: float | None = None
        self.refused = 0
        """Accepts refused so far (a flood's size, for tests and ``--debug``)."""

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        message = str(context.get("message", ""))
        if (
            isinstance(exc, OSError)
            and exc.errno in _OUT_OF_RESOURCES
            and message.startswith("socket.accept()")
        ):
            self._note(exc)
            return
        if isinstance(exc, ValueError) and self.refused and "._start_serving(" in message:
            # Each refused accept also scheduled a retry of the whole accept loop (CPython 3.11 goes
            # on to the next of `backlog` attempts, thousands, instead of stopping); those that fire
            # after the listening socket closed find no descriptor. Nothing is lost.
            log.debug("a retry of accept() after the server closed: %s", exc)
            return
        if self._fallback is not None:
            self._fallback(loop, context)
        else:
            loop.default_exception_handler(context)

    def _note(self, exc: OSError) -> None:
        now = self._clock()
        self.refused += 1
        if self._last is None or now - self._last > FLOOD_QUIET:
            log.warning(
                "cannot accept more connections: %s (the open-file limit is %d); new ones wait until "
                "others close. If this is not a flood, raise the limit (ulimit -n, systemd LimitNOFILE=).",
                exc.strerror or exc,
                self.file_limit,
            )
        else:
            log.debug("accept refused again (%d so far): %s", self.refused, exc.strerror or exc)
        self._last = now
