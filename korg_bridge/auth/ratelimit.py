"""Per-token limits: a rate limit at the HTTP gate, a cap on tool calls in flight.

**Rate** (``--rate-limit N/s``, ``N/m``, ``N/h``; :class:`Limiter`): a token
bucket per token, holding at most N (the burst) -- but never fewer than
:data:`SESSION_START` -- refilled at N per period.
What counts is every authorised POST and GET to ``/mcp``, whatever its
JSON-RPC method: the gate decides before the body is read, before the SDK
sees the request, and an initialize or a ping costs the server work too. A
session's start costs up to four at once (``initialize``, its
``notifications/initialized``, an older client's ``GET`` stream, and the
``tools/list`` every client sends next): a bucket smaller than that would
refuse the start of every session at a low rate (``2/s``), however rarely
the token called.
``/healthz``, requests refused with 401, and ``DELETE`` (which ends a
session, freeing what it holds) never count. An empty bucket answers 429 with
``Retry-After``: the whole seconds until the next request would pass,
rounded up. A server without tokens (loopback only) counts all its callers
as one.

**Calls in flight** (``--max-calls-per-token N``; :class:`CallCap`): tool
calls of one token running at once, counted where calls are run
(:class:`korg_bridge.serving.server.Bridge`), not at the gate: a cap on requests
would also refuse the ``notifications/cancelled`` that would end a running
call, and a ``tools/list`` while one runs. Beyond N the call is refused as a
tool result with ``isError`` (nothing is run; the model can wait and call
again) and audited as refused.

State is kept per token only, and dropped for tokens a reload removed (or
whose calls all ended), so it is bounded by the token file.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from korg_bridge.errors import UsageError

__all__ = ["SESSION_START", "CallCap", "Limiter", "Rate", "Refusal"]

PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
SESSION_START = 4
"""Requests one session's start sends at once: the smallest burst a bucket holds (see above)."""
RATE_FORM = "expected N/s, N/m or N/h with N a whole number >= 1, e.g. 10/s"
_RATE = re.compile(r"\s*(\d{1,9})\s*/\s*([smh])\s*", re.ASCII)


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` requests per ``period`` seconds, with a burst of ``count``.

    Raises:
        UsageError: (on construction) a count below 1 or a period that is not a
            positive finite number of seconds.
    """

    count: int
    period: float

    def __post_init__(self) -> None:
        if self.count < 1 or not (self.period > 0 and math.isfinite(self.period)):
            raise UsageError(f"invalid rate {self.count} per {self.period} s: {RATE_FORM}")

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``"10/s"`` → ``Rate(10, 1.0)``; ``"600/m"``; ``"5000/h"``.

        Raises:
            UsageError: anything else.
        """
        match = _RATE.fullmatch(text)
        if match is None or int(match[1]) < 1:
            raise UsageError(f"invalid --rate-limit value {text!r}: {RATE_FORM}")
        return cls(int(match[1]), PERIODS[match[2]])

    @property
    def per_second(self) -> float:
        return self.count / self.period

    @property
    def burst(self) -> int:
        """Requests a full bucket lets through at once: N, and never fewer than a session's start."""
        return max(self.count, SESSION_START)

    def __str__(self) -> str:
        unit = next((u for u, seconds in PERIODS.items() if seconds == self.period), None)
        return f"{self.count}/{unit}" if unit else f"{self.count} per {self.period:g} s"

    def describe(self) -> str:
        """``10 requests per second``: for messages."""
        name = {1.0: "second", 60.0: "minute", 3600.0: "hour"}.get(self.period, f"{self.period:g} s")
        return f"{self.count} request{'s' if self.count != 1 else ''} per {name}"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is answered 429."""

    message: str
    retry_after: int
    """Whole seconds, at least 1."""
    first: bool
    """The first refusal of this token since one of its requests last passed: worth a log line."""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float
    limited: bool = False


@dataclass(slots=True)
class Limiter:
    """The token buckets of one server's rate limit."""

    rate: Rate
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def admit(self, key: str) -> Refusal | None:
        """Let one request of the token ``key`` in, or say why not."""
        rate, now = self.rate, self.clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(rate.burst), now)
        bucket.tokens = min(float(rate.burst), bucket.tokens + (now - bucket.stamp) * rate.per_second)
        bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            bucket.limited = False
            return None
        seconds = max(1, math.ceil((1.0 - bucket.tokens) / rate.per_second))
        first, bucket.limited = not bucket.limited, True
        return Refusal(
            f"this token is over its rate limit of {rate.describe()} (--rate-limit); retry after {seconds} s",
            seconds,
            first,
        )

    def retain(self, keys: Iterable[str]) -> None:
        """Forget the buckets of tokens no longer accepted (after a reload); those
        still accepted keep theirs, so a reload cannot reset a limit."""
        kept = set(keys)
        for key in [k for k in self._buckets if k not in kept]:
            del self._buckets[key]


class CallCap:
    """Tool calls in flight per token (see the module docstring)."""

    def __init__(self, cap: int | None) -> None:
        """Raises: UsageError: a cap below 1."""
        if cap is not None and cap < 1:
            raise UsageError(f"the tool calls in flight per token must be at least 1, got {cap}")
        self.cap = cap
        self._running: dict[str, int] = {}

    def enter(self, key: str) -> str | None:
        """Count one call of the token ``key``; or, at the cap, the refusal to answer (nothing counted)."""
        if self.cap is None:
            return None
        running = self._running.get(key, 0)
        if running >= self.cap:
            return (
                f"this token already has {running} tool call(s) running, the most allowed "
                f"({self.cap} per token: --max-calls-per-token); wait for one to finish, then call again. "
                "Nothing was run."
            )
        self._running[key] = running + 1
        return None

    def leave(self, key: str) -> None:
        """The end of a call :meth:`enter` counted."""
        running = self._running.get(key, 0)
        if running > 1:
            self._running[key] = running - 1
        else:
            self._running.pop(key, None)

    def running(self, key: str) -> int:
        return self._running.get(key, 0)
