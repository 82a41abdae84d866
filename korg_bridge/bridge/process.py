"""All subprocess work: spawn, read with caps, bound every wait, kill the group.

Why each rule exists:

* ``stdin`` is ``/dev/null``: in server mode our own stdin is the JSON-RPC
  pipe, and a child that inherits it can steal or corrupt protocol messages.
* ``start_new_session=True``: the child leads its own process group, so one
  ``killpg`` reaches every grandchild it spawned (unless one deliberately
  escapes with its own ``setsid``).
* stdout and stderr are read concurrently with a byte cap each; beyond the cap
  the rest is drained and counted, never stored, so a child that writes
  gigabytes cannot grow our memory.
* The call ends when the child exits. A grandchild that keeps the pipes open
  (a forgotten ``&``) gets :data:`LINGER_GRACE` to let go, then what is left
  of the group is terminated.
* Cleanup runs in a cancellation-shielded scope: a cancelled MCP request must
  still kill and reap its process.
* A running child's group is also registered with the reaper
  (:mod:`korg_bridge.bridge.reaper`), which ends it if this process dies first, even
  by SIGKILL.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

# group_alive and signal_group are re-exported: they live beside the reaper,
# which runs without this package.
from korg_bridge.bridge.reaper import Reaper
from korg_bridge.bridge.reaper import group_alive as group_alive
from korg_bridge.bridge.reaper import signal_group as signal_group

log = logging.getLogger(__name__)

KILL_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL: long enough for a CLI to flush and exit."""

LINGER_GRACE = 0.5
"""Seconds the pipes may stay open after the child exited (a grandchild holding
them) before we stop reading and terminate the rest of the group."""

DRAIN_GRACE = 1.0
"""Seconds to wait for the pipes to close after the group was killed."""

READ_CHUNK = 65536
"""Bytes per read: large enough that a flood costs few wake-ups."""

DEFAULT_OUTPUT_CAP = 8 * 1024 * 1024
"""Bytes kept per stream by default (8 MiB)."""

ChunkCallback = Callable[[bytes], Awaitable[None]]


@dataclass(slots=True)
class ProcessResult:
    """What a finished (or killed) child left behind."""

    returncode: int | None
    """Exit status; negative for a signal (``-9``), ``None`` if never reaped."""
    stdout: bytes
    stderr: bytes
    stdout_dropped: int = 0
    """Bytes read beyond the cap and discarded."""
    stderr_dropped: int = 0
    timed_out: bool = False
    lingered: bool = False
    """A descendant still held stdout/stderr after the child exited."""
    duration: float = 0.0


class _CappedBuffer:
    """Keeps the first ``cap`` bytes and counts the rest."""

    __slots__ = ("cap", "data", "dropped")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if room >= len(chunk):
            self.data += chunk
        else:
            if room > 0:
                self.data += chunk[:room]
            self.dropped += len(chunk) - max(room, 0)


async def _pump(
    stream: anyio.abc.ByteReceiveStream | None,
    sink: _CappedBuffer,
    on_chunk: ChunkCallback | None,
    done: anyio.Event,
) -> None:
    try:
        if stream is None:
            return
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                chunk = await stream.receive(READ_CHUNK)
                sink.feed(chunk)
                if on_chunk is not None:
                    await on_chunk(chunk)
    finally:
        done.set()


_LIVE_GROUPS: set[int] = set()
"""Process groups of children still running, for :func:`terminate_all`."""

_REAPER = Reaper(KILL_GRACE)
"""Ends those groups if this process dies without doing it (see :mod:`korg_bridge.bridge.reaper`)."""


async def _wait_group_gone(pgid: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while group_alive(pgid) and time.monotonic() < deadline:
        await anyio.sleep(0.02)


async def _terminate_group(process: anyio.abc.Process, pgid: int) -> None:
    """SIGTERM the group, SIGKILL after :data:`KILL_GRACE`; reap the child."""
    signal_group(pgid, signal.SIGTERM)
    with anyio.move_on_after(KILL_GRACE):
        await process.wait()
        # The leader is gone; give the rest of the group the same grace.
        await _wait_group_gone(pgid, KILL_GRACE)
    signal_group(pgid, signal.SIGKILL)
    with anyio.move_on_after(KILL_GRACE):
        await process.wait()


async def terminate_all() -> None:
    """End every running child's group (the bridge itself is being stopped)."""
    groups = list(_LIVE_GROUPS)
    for pgid in groups:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE
    for pgid in groups:
        await _wait_group_gone(pgid, max(0.0, deadline - time.monotonic()))
        signal_group(pgid, signal.SIGKILL)


async def run_process(
    argv: Sequence[str],
    *,
    timeout: float,
    stdout_cap: int = DEFAULT_OUTPUT_CAP,
    stderr_cap: int = DEFAULT_OUTPUT_CAP,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    on_stdout: ChunkCallback | None = None,
) -> ProcessResult:
    """Run ``argv`` (never through a shell) and collect its capped output.

    Raises:
        FileNotFoundError, PermissionError, OSError: the executable could not be
            started; callers translate these into their own errors.
    """
    started = time.monotonic()
    out = _CappedBuffer(stdout_cap)
    err = _CappedBuffer(stderr_cap)
    _REAPER.ready()
    process = await anyio.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    pgid = process.pid  # start_new_session: the child is its group's leader
    _LIVE_GROUPS.add(pgid)
    result = ProcessResult(returncode=None, stdout=b"", stderr=b"")
    try:
        _REAPER.watch(pgid)
        async with anyio.create_task_group() as readers:
            out_done, err_done = anyio.Event(), anyio.Event()
            readers.start_soon(_pump, process.stdout, out, on_stdout, out_done)
            readers.start_soon(_pump, process.stderr, err, None, err_done)
            with anyio.move_on_after(timeout) as deadline:
                await process.wait()
            if deadline.cancelled_caught:
                result.timed_out = True
                with anyio.CancelScope(shield=True):
                    await _terminate_group(process, pgid)
                grace = DRAIN_GRACE
            else:
                grace = LINGER_GRACE
            with anyio.move_on_after(grace) as drained:
                await out_done.wait()
                await err_done.wait()
            if drained.cancelled_caught:
                # A descendant holds the pipes: stop reading, end what is left.
                result.lingered = True
                with anyio.CancelScope(shield=True):
                    signal_group(pgid, signal.SIGTERM)
                    await anyio.sleep(0.05)
                    signal_group(pgid, signal.SIGKILL)
                readers.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                await _terminate_group(process, pgid)
            elif result.lingered or result.timed_out:
                signal_group(pgid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await process.aclose()
            _LIVE_GROUPS.discard(pgid)
            _REAPER.release(pgid)
    result.returncode = process.returncode
    result.stdout = bytes(out.data)
    result.stderr = bytes(err.data)
    result.stdout_dropped = out.dropped
    result.stderr_dropped = err.dropped
    result.duration = time.monotonic() - started
    return result
