"""The stdio transport: one JSON-RPC message per line on stdin and stdout.

It replaces the SDK's ``stdio_server`` for one reason: a line the SDK cannot
parse is logged and dropped, and the client that sent it waits forever. Here
every line goes through :func:`korg_bridge.serving.jsonrpc.parse_message`; a valid
message reaches the server exactly as the SDK would have parsed it, anything
else is answered at once with a JSON-RPC error (``-32700``/``-32600``, with
the request's id when it can be told) and the session goes on.

Like the SDK's transport, it takes the wire off file descriptors 0 and 1
while serving (fd 0 reads ``/dev/null``, fd 1 writes to stderr), so a stray
``print`` or a child that inherits them cannot corrupt the protocol, and
puts them back afterwards.

Lines are capped at :data:`~korg_bridge.serving.jsonrpc.MAX_MESSAGE_BYTES`: a longer
one is answered with ``-32600`` as soon as it crosses the cap, and the rest
of it is read and dropped without being kept. Reads wait on the event loop
(not in a thread), so cancelling the transport never leaves a reader blocked
on stdin.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from korg_bridge._fs.durable import write_all
from korg_bridge.errors import UsageError
from korg_bridge.serving.jsonrpc import MAX_MESSAGE_BYTES, Rejection, oversized, parse_message

log = logging.getLogger(__name__)

READ_CHUNK = 65536
"""Bytes per read: a typical message in one read, a flood in few."""

HEAD_KEPT = 4096
"""Bytes of an oversized line kept to find its id in: ids come first in practice."""


@dataclass(frozen=True, slots=True)
class Overflow:
    """A line longer than the cap; ``head`` is its beginning."""

    head: bytes


class LineSplitter:
    """Bytes in, complete lines out, never holding more than ``cap`` bytes of one line."""

    def __init__(self, cap: int = MAX_MESSAGE_BYTES) -> None:
        self.cap = cap
        self._partial = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> Iterator[bytes | Overflow]:
        """The lines ``chunk`` completes (without their newline), and an
        :class:`Overflow` for each line that grew past the cap."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._skipping:
                if len(self._partial) + len(piece) > self.cap:
                    head = bytes((self._partial + piece[:HEAD_KEPT])[:HEAD_KEPT])
                    self._partial.clear()
                    self._skipping = True
                    yield Overflow(head)
                elif end >= 0:
                    yield bytes(self._partial + piece) if self._partial else piece
                    self._partial.clear()
                else:
                    self._partial += piece
            if end < 0:
                return
            self._skipping = False  # the newline ends the oversized line too
            start = end + 1

    def end(self) -> Iterator[bytes]:
        """A last line without a newline, at end of input."""
        if self._partial and not self._skipping:
            yield bytes(self._partial)
        self._partial.clear()


@asynccontextmanager
async def stdio_transport(
    stdin: int | None = None, stdout: int | None = None
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """Streams for ``Server.run`` over ``stdin``/``stdout`` (default: this process's fds 0 and 1,
    taken off the wire while serving).

    Raises:
        UsageError: stdin or stdout was closed when the process started.
    """
    with contextlib.ExitStack() as fds:
        in_fd = stdin if stdin is not None else fds.enter_context(_claimed(0, os.O_RDONLY))
        out_fd = stdout if stdout is not None else fds.enter_context(_claimed(1, os.O_WRONLY))
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_client, outgoing = anyio.create_memory_object_stream[SessionMessage](0)
        replies = to_client.clone()  # our own error answers share the writer, so lines never interleave
        async with anyio.create_task_group() as tg:
            tg.start_soon(_write, out_fd, outgoing)
            reading = anyio.CancelScope()
            tg.start_soon(_read, in_fd, to_server, replies, reading)
            try:
                yield from_client, to_client
            finally:
                reading.cancel()
                to_client.close()  # the server usually closed it already; the writer drains and ends


async def _read(
    fd: int,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
    scope: anyio.CancelScope,
) -> None:
    splitter = LineSplitter()
    with scope:
        async with to_server, replies:
            async for chunk in _chunks(fd):
                for line in splitter.feed(chunk):
                    await _handle(line, to_server, replies)
            for line in splitter.end():
                await _handle(line, to_server, replies)


async def _handle(
    line: bytes | Overflow,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
) -> None:
    if isinstance(line, Overflow):
        parsed: types.JSONRPCMessage | Rejection = oversized(line.head)
    elif not line.strip():
        return  # a blank line is no message; nothing to answer
    else:
        parsed = parse_message(line)
    if isinstance(parsed, Rejection):
        log.warning("%s (id %s)%s", parsed.message, parsed.id, "" if parsed.answer else "; not answered")
        if parsed.answer:
            await replies.send(SessionMessage(parsed.response()))
        return
    await to_server.send(SessionMessage(parsed))


async def _chunks(fd: int) -> AsyncIterator[bytes]:
    """What arrives on ``fd`` until end-of-file (or an error, which ends the session too)."""
    # epoll cannot wait on a regular file (stdin redirected from one); it never blocks anyway.
    pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
    while True:
        if pollable:
            try:
                await anyio.wait_readable(fd)
            except PermissionError:  # epoll refuses some devices too (/dev/null); reads on them never block
                pollable = False
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:  # a non-blocking fd woke up with nothing after all
            continue
        except OSError as exc:
            log.warning("cannot read stdin: %s", exc.strerror or exc)
            return
        if not chunk:
            return
        yield chunk
        await anyio.lowlevel.checkpoint()


async def _write(fd: int, outgoing: MemoryObjectReceiveStream[SessionMessage]) -> None:
    """Each message as one line. In a worker thread: a client slow to read
    must not stall the event loop, and a blocking pipe write may wait."""
    async with outgoing:
        async for item in outgoing:
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
            try:
                await anyio.to_thread.run_sync(write_all, fd, data)
            except OSError as exc:  # the client went away: keep draining so senders never block
                log.debug("cannot write to stdout: %s", exc.strerror or exc)


@contextlib.contextmanager
def _claimed(fd: int, divert_mode: int) -> Iterator[int]:
    """A private duplicate of ``fd`` to serve the wire on, while ``fd`` itself points at
    ``/dev/null`` (stdin) or stderr (stdout); put back on exit.

    Raises:
        UsageError: the descriptor was closed when the process started.
    """
    name = "stdin" if fd == 0 else "stdout"
    if (sys.stdin if fd == 0 else sys.stdout) is None:  # Python's mark of a descriptor closed at start
        raise UsageError(
            f"{name} is not open: an MCP client starts korg-bridge with pipes on stdin and stdout "
            "(or serve HTTP with --http PORT)."
        )
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    diversion = os.open(os.devnull, os.O_RDONLY) if divert_mode == os.O_RDONLY else os.dup(2)
    try:
        os.dup2(diversion, fd)
    finally:
        os.close(diversion)
    try:
        yield private
    finally:
        os.dup2(private, fd)
        os.close(private)
