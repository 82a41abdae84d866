"""Live progress: stdout lines of a running call, forwarded as MCP progress.

Clients that reset their timers on progress keep a long call alive, and the
agent sees what the binary is doing. Forwarding is rate-limited (at most
:data:`MAX_RATE` notifications a second): lines that arrive faster are
coalesced, so a chatty binary cannot flood the client. Memory stays bounded:
between two notifications we keep a count and the latest line only.

A notification's message is the latest line that reads as a status. A line of
a JSON document (korg-recall's long-running callables print one, indented:
their last line is ``}``) or a blank one is not: then the message says how
much output there is so far (``12 lines of output so far``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import anyio

MAX_RATE = 20.0
"""Notifications per second, at most."""

MAX_MESSAGE = 200
"""Characters of a line put in a notification's message."""

MAX_LINE_BYTES = 64 * 1024
"""A 'line' longer than this is cut: progress is a glimpse, not the output."""

Report = Callable[[float, str], Awaitable[None]]


class LineProgress:
    """Feed it stdout chunks; it reports ``(lines so far, latest line)`` at a bounded rate."""

    def __init__(self, report: Report, *, max_rate: float = MAX_RATE) -> None:
        self._report = report
        self._interval = 1.0 / max_rate
        self._partial = bytearray()
        self._lines = 0
        self._sent_lines = 0
        self._latest = ""
        self._fresh = False
        """A readable line came since the last notification."""
        self._wake = anyio.Event()
        self._closed = anyio.Event()
        self._last_sent = float("-inf")
        self.sent = 0

    async def feed(self, chunk: bytes) -> None:
        """Called from the reader; never waits on the client."""
        *complete, rest = (bytes(self._partial) + chunk).split(b"\n")
        if complete:
            self._lines += len(complete)
            for raw in reversed(complete):
                line = raw[:MAX_LINE_BYTES].decode("utf-8", "replace").strip()
                if readable(line):
                    self._latest, self._fresh = line, True
                    break
            self._wake.set()
        self._partial = bytearray(rest[:MAX_LINE_BYTES])

    def close(self) -> None:
        """The call is over: stop at once (the result itself carries the whole output)."""
        self._closed.set()
        self._wake.set()

    async def run(self) -> None:
        """Send notifications until :meth:`close`; each carries strictly more lines than the last.

        Closing never waits out the rate limit: the last lines are reported
        only if the interval since the previous notification has passed, so
        the result is not delayed and the rate bound holds to the end.
        """
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            closing = self._closed.is_set()
            due = anyio.current_time() - self._last_sent >= self._interval
            if self._lines > self._sent_lines and (due or not closing):
                await self._send()
            if closing:
                return
            with anyio.move_on_after(self._interval):
                await self._closed.wait()

    async def _send(self) -> None:
        self._sent_lines = self._lines
        self._last_sent = anyio.current_time()
        if self._fresh:
            latest = self._latest
            message = latest if len(latest) <= MAX_MESSAGE else latest[: MAX_MESSAGE - 1] + "…"
        else:
            message = f"{self._lines} line{'s' if self._lines != 1 else ''} of output so far"
        self._fresh = False
        with contextlib.suppress(Exception):  # a lost notification must not fail the call
            await self._report(float(self._sent_lines), message)
            self.sent += 1


_JSON_STRUCTURE = tuple('{}[]",')


def readable(line: str) -> bool:
    """Whether a stripped line of output reads as a status: it holds a letter or a digit and is
    not a piece of JSON (a brace, a bracket, a ``"key": value`` line)."""
    return bool(line) and not line.startswith(_JSON_STRUCTURE) and any(c.isalnum() for c in line)
