"""A parsing worker process: read and parse ledgers while the indexing process writes.

A cold build spends about 60 % of its time parsing JSON and flattening
events and 40 % in SQLite and FTS5. Python threads cannot overlap the two
(the GIL; measured slower than one thread), but a second process can: the
worker runs :func:`~korg_bridge.recall.history.ingest.batches.read_batches` and streams each
:class:`~korg_bridge.recall.history.ingest.batches.Batch` back as a length-prefixed pickle,
one slice ahead of the writer (the pipe is the back-pressure, so memory stays
bounded by a slice or two).

It is only an accelerator. Small refreshes (a query's few appended lines)
stay in process, where starting an interpreter would cost more than it saves;
so do machines with one CPU, frozen applications (no interpreter to start)
and systems other than POSIX. If the worker cannot start, dies, stalls or
says anything unexpected, the rest of the work is read in process from where
the worker stopped, with a warning — the index ends the same either way.

The worker is this module run as ``python -m korg_bridge.recall.history.ingest.worker``: no
shell, stdin carries the work list, stdout the batches, stderr is discarded
(failures come back as a message frame). It stays in the indexing process's
process group, so whoever ends that group (the bridge on a timeout or a
cancelled call) ends the worker too; it ignores SIGINT, leaving a Ctrl-C to
the indexing process, which stops it. When that process goes away anyhow, the
worker's next write fails and it exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import time
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from korg_bridge._fs.lines import MAX_LINE_BYTES
from korg_bridge.errors import WorkerFailed
from korg_bridge.recall.history.ingest.batches import (
    BATCH_BYTES,
    WORKER_MIN_BYTES,
    Batch,
    Work,
    read_batches,
    read_file,
)
from korg_bridge.recall.project import ProjectCache

__all__ = ["parsed_batches"]

logger = logging.getLogger(__name__)

FRAME_TIMEOUT_S = 120.0
"""Longest wait for one batch: a 2 MiB slice parses in ~0.1 s, so only a stuck worker hits it."""
EXIT_TIMEOUT_S = 5.0
"""Wait for a killed or finished worker to be reaped."""
PIPE_BYTES = 1024 * 1024
"""Pipe capacity asked for (Linux): a whole slice fits, so the worker rarely blocks mid-batch."""

_HEADER = 8
_END = 0
"""A zero-length frame: every batch was sent."""


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parsed_batches(
    work: Sequence[Work],
    batch_bytes: int = BATCH_BYTES,
    *,
    min_bytes: int = WORKER_MIN_BYTES,
    max_line: int = MAX_LINE_BYTES,
) -> Generator[Batch, None, None]:
    """Every batch of ``work`` in order, parsed by a worker process when that pays.

    Close the iterator (``contextlib.closing``) when stopping early: that ends
    the worker at once instead of at garbage collection.
    """
    total = sum(item.to_read for item in work)
    # A frozen app's executable is the app itself, not an interpreter that takes ``-m``;
    # off POSIX, select() does not take pipes.
    if (
        total < min_bytes
        or _cpus() < 2
        or not sys.executable
        or getattr(sys, "frozen", False)
        or os.name != "posix"
    ):
        yield from read_batches(work, batch_bytes, max_line)
        return
    done: set[str] = set()
    last: Batch | None = None
    try:
        for batch in _from_worker(work, batch_bytes, max_line):
            last = batch
            if batch.final or batch.error is not None:
                done.add(batch.path)
            yield batch
        return
    except WorkerFailed as exc:
        logger.warning("recall parsing worker failed (%s); reading the rest in this process", exc)
    # Carry on where the worker stopped: the file it was in the middle of, then the others.
    projects = ProjectCache()
    for item in work:
        if item.path in done:
            continue
        after = last if last is not None and last.path == item.path else None
        yield from read_file(item, batch_bytes, max_line, after=after, projects=projects)


def _from_worker(work: Sequence[Work], batch_bytes: int, max_line: int) -> Iterator[Batch]:
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "korg_bridge.recall.history.ingest.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    except OSError as exc:
        raise WorkerFailed(f"cannot start {sys.executable}: {exc.strerror or exc}") from exc
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _grow_pipe(proc.stdout.fileno())
        request = pickle.dumps(
            {"work": list(work), "batch_bytes": batch_bytes, "max_line": max_line}, pickle.HIGHEST_PROTOCOL
        )
        try:
            _write_all(proc.stdin.fileno(), request)
            proc.stdin.close()
        except OSError as exc:
            raise WorkerFailed(f"it would not take its work: {exc}") from exc
        fd = proc.stdout.fileno()
        while True:
            header = _read_exact(fd, _HEADER)
            if header is None:
                raise WorkerFailed(f"it exited early (status {proc.wait(EXIT_TIMEOUT_S)})")
            size = int.from_bytes(header, "big")
            if size == _END:
                return
            payload = _read_exact(fd, size)
            if payload is None:
                raise WorkerFailed("it exited in the middle of a batch")
            item = pickle.loads(payload)
            if isinstance(item, str):
                raise WorkerFailed(item)
            if not isinstance(item, Batch):
                raise WorkerFailed(f"it sent a {type(item).__name__} instead of a batch")
            yield item
    finally:
        _stop(proc)


def _grow_pipe(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # not POSIX: the default pipe size only means more, smaller reads
        return
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if setsize is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setsize, PIPE_BYTES)


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to the worker's stdin, giving up after :data:`FRAME_TIMEOUT_S`.

    A work list of thousands of files is bigger than a pipe: a worker that
    never reads it (stuck before its first line) must not hang the refresh.
    """
    os.set_blocking(fd, False)
    deadline = time.monotonic() + FRAME_TIMEOUT_S
    view = memoryview(data)
    while view:
        remaining = deadline - time.monotonic()
        ready = select.select([], [fd], [], max(0.0, remaining))[1] if remaining > 0 else []
        if not ready:
            raise WorkerFailed(f"it took no work for {FRAME_TIMEOUT_S:g} s")
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[written:]


def _read_exact(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None at end of file; :class:`WorkerFailed` past the timeout."""
    deadline = time.monotonic() + FRAME_TIMEOUT_S
    buffer = bytearray()
    while len(buffer) < size:
        remaining = deadline - time.monotonic()
        ready = select.select([fd], [], [], max(0.0, remaining))[0] if remaining > 0 else []
        if not ready:
            raise WorkerFailed(f"no batch for {FRAME_TIMEOUT_S:g} s")
        chunk = os.read(fd, min(size - len(buffer), PIPE_BYTES))
        if not chunk:
            return None
        buffer += chunk
    return bytes(buffer)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(EXIT_TIMEOUT_S)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


# --- the worker side -------------------------------------------------------------------------------


def _send(out: IO[bytes], item: Any) -> None:
    payload = pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
    out.write(len(payload).to_bytes(_HEADER, "big"))
    out.write(payload)
    out.flush()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the indexing process, which stops us
    out = sys.stdout.buffer
    try:
        request = pickle.load(sys.stdin.buffer)
        for batch in read_batches(request["work"], request["batch_bytes"], request["max_line"]):
            _send(out, batch)
        out.write(_END.to_bytes(_HEADER, "big"))
        out.flush()
    except (BrokenPipeError, KeyboardInterrupt):
        os._exit(1)  # the indexing process is gone: nothing to tell, nothing to flush
    except Exception as exc:  # reported to the indexing process, which reads in process instead
        with contextlib.suppress(OSError):
            _send(out, f"{type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
