"""The background indexer: one detached, niced process that fills missing vectors, then exits.

A query embeds only itself, so the events' vectors must come from somewhere
else: ``recall`` and ``index`` call :func:`start` when a model is on disk and
vectors are missing, and this module, run as ``python -m
korg_bridge.recall.semantic.indexer INDEX``, embeds them (:func:`~korg_bridge.recall.semantic.embedpass.embed_pending`,
newest first) and exits when none are left.

* **Detached on purpose.** Through the bridge, korg-recall runs in the tool
  call's process group, which the bridge kills when the call ends; the
  indexer is spawned in a session of its own (``posix_spawn`` with
  ``setsid``), with stdin and stdout on ``/dev/null`` and stderr appended to
  ``<index>.embed.log`` (left alone once it passes :data:`LOG_CAP` bytes), so
  it outlives the call and holds none of its pipes. It lowers its own
  priority (``nice`` :data:`NICE`) so queries keep the CPU.
* **One at a time.** It holds an exclusive ``flock`` on ``<index>.embed.lock``
  for its whole run; a second one exits at once. The kernel drops the lock
  when the process dies however it dies, so a killed indexer never blocks the
  next one, and a lock file is never deleted or rewritten.
* **Safe to kill, resumes.** Each slice of vectors is its own transaction
  (:mod:`korg_bridge.recall.semantic.embedpass`), and the indexer's state (pid,
  progress, outcome) is written into the index's ``meta`` table in the same
  transactions; a killed run loses at most one slice, and the next run embeds
  only what is still missing.
* **Bounded.** A run stops after :data:`MAX_RUN_S` seconds (the next recall
  starts another, which resumes); the CPU limit is the kernel's backstop.
* **Handing over.** ``korg-recall index`` embeds in the foreground: it asks a
  running indexer to stop (a ``meta`` flag checked between slices), waits up
  to :data:`STOP_WAIT_S` for the lock, and holds it while it embeds.
* **Off switch.** ``KORG_RECALL_BACKGROUND=0`` keeps :func:`start` from
  spawning anything (the tests' default; ``korg-recall index`` still embeds).
* **Memories too.** ``python -m korg_bridge.recall.memory.backfill`` embeds the
  live memories of the store its environment names (``KORG_RECALL_STORE``, and for
  a team store the tenant) that have no vector yet, under a lock of its own beside
  the index: :mod:`korg_bridge.recall.memory.backfill`, spawned the same way.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from korg_bridge.config import ENV_RECALL_INDEX
from korg_bridge.errors import KorgError

__all__ = [
    "Lock",
    "background_enabled",
    "held",
    "main",
    "request_stop",
    "run_detached",
    "spawn_indexer",
    "start",
    "state",
    "wait_idle",
]

logger = logging.getLogger(__name__)

NICE = 10
"""Added to the indexer's niceness: a query (nice 0) gets most of the CPU when both want it."""
MAX_RUN_S = 3600.0
"""One run's wall-clock budget: a whole 100k history here, and a bound on a stuck machine."""
MAX_CPU_S = 4 * 3600
"""The kernel's CPU-seconds limit for a run (RLIMIT_CPU): a backstop should the run budget fail."""
LOG_CAP = 1 << 20
"""Bytes the log may reach; past them the indexer's stderr goes to /dev/null (delete it to resume)."""
STOP_WAIT_S = 10.0
"""How long ``index`` waits for a running indexer to finish its slice and let go of the lock."""
POLL_S = 0.05
"""Between two looks at the lock while waiting for it."""

_META_STATE = "indexer"
_META_STOP = "indexer_stop"
_spawned: dict[int, Path] = {}
"""Children this process spawned (pid: index), reaped when it next looks (only a long-lived caller,
such as a test process, has any)."""


def background_enabled(env: Mapping[str, str]) -> bool:
    """``KORG_RECALL_BACKGROUND`` (default on).

    Raises:
        ConfigError: not a yes/no value.
    """
    from korg_bridge.config import background

    return background(env)


def lock_path(index_path: Path) -> Path:
    return index_path.with_name(index_path.name + ".embed.lock")


def log_path(index_path: Path) -> Path:
    return index_path.with_name(index_path.name + ".embed.log")


class Lock:
    """The exclusive ``flock`` on ``<index>.embed.lock`` an indexer (or ``index``) embeds under
    (``lock_file``: another lock file, such as a memory indexer's)."""

    def __init__(self, index_path: Path, *, lock_file: Path | None = None) -> None:
        self.path = lock_file or lock_path(index_path)
        self._fd: int | None = None

    def acquire(self, timeout: float = 0.0) -> bool:
        """Take the lock, waiting up to ``timeout`` seconds; False when another process holds it.

        Raises:
            KorgError: the lock file cannot be created or opened.
        """
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise KorgError(
                    f"cannot open the embedding lock {self.path}: {exc.strerror or exc}. "
                    "Check the permissions of the index folder."
                ) from exc
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise KorgError(f"cannot lock {self.path}: {exc.strerror or exc}.") from exc
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)

    def still_ours(self) -> bool:
        """True while the lock file at the path is the one locked: someone deleting or replacing it
        would let a second indexer start, so the first one stops."""
        if self._fd is None:
            return False
        try:
            here, held_file = os.stat(self.path), os.fstat(self._fd)
        except OSError:
            return False
        return (here.st_dev, here.st_ino) == (held_file.st_dev, held_file.st_ino)

    def release(self) -> None:
        """Let go (closing the file drops the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Lock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def held(index_path: Path, *, lock_file: Path | None = None) -> bool:
    """True while some process holds the embedding lock (an indexer runs, or ``index`` embeds)."""
    from korg_bridge._fs.locks import lock_held

    return lock_held(lock_file or lock_path(index_path))


def _reap() -> None:
    for pid in list(_spawned):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        del _spawned[pid]


def start(index_path: Path, env: Mapping[str, str]) -> str:
    """Start a background indexer for ``index_path`` unless one runs: ``started``, ``running``,
    ``off`` (switched off by the environment) or ``failed`` (could not spawn; logged)."""
    _reap()
    if not background_enabled(env):
        return "off"
    if held(index_path):
        return "running"
    return spawn_indexer(
        __name__,
        [str(index_path)],
        log_path(index_path),
        {**env, ENV_RECALL_INDEX: str(index_path)},
        index_path,
    )


def spawn_indexer(module: str, args: Sequence[str], log: Path, env: Mapping[str, str], key: Path) -> str:
    """``python -m MODULE ARGS`` (this module, or the memories' pass) detached: its own session, stdio on /dev/null,
    stderr appended to ``log`` (to /dev/null once it passes :data:`LOG_CAP`); ``key`` is what
    :func:`wait_idle` knows it by. ``started`` or ``failed`` (logged)."""
    _reap()
    try:
        too_big = log.stat().st_size > LOG_CAP
    except OSError:
        too_big = False
    stderr = os.devnull if too_big else str(log)
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, stderr, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
    ]
    argv = [sys.executable, "-m", module, *args]
    try:
        pid = os.posix_spawn(
            sys.executable,
            argv,
            dict(env),
            file_actions=actions,
            setsid=True,
            setsigdef=(signal.SIGINT, signal.SIGTERM, signal.SIGPIPE),
        )
    except (OSError, NotImplementedError, ValueError) as exc:
        logger.warning("korg-recall: cannot start the background indexer (%s); run `korg-recall index`", exc)
        return "failed"
    _spawned[pid] = key
    return "started"


# --- state in the index ------------------------------------------------------------------------


def _meta(conn: Any, key: str) -> Any:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    try:
        return json.loads(row[0])
    except (TypeError, ValueError):
        return None


def _put(conn: Any, key: str, value: Any) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(value)))


def state(index: Any, index_path: Path) -> dict[str, Any]:
    """What ``stats`` shows: ``running``, and the last run's record (pid, model, progress, outcome)."""
    recorded = index.read(lambda conn: _meta(conn, _META_STATE)) or {}
    running = held(index_path)
    outcome = recorded.get("state")
    if outcome == "running" and not running:
        outcome = "interrupted"  # killed between two slices: the next run resumes
    return {**recorded, "running": running, "state": "running" if running else outcome or "never run"}


def request_stop(index: Any, value: bool) -> None:
    """Ask a running indexer to stop after its slice (True), or clear the request (False).

    Raises:
        KorgError: the index stays locked past the busy timeout.
    """
    with index.write() as conn:
        if value:
            _put(conn, _META_STOP, True)
        else:
            conn.execute("DELETE FROM meta WHERE key = ?", (_META_STOP,))


def wait_idle(index_path: Path, timeout: float, *, lock_file: Path | None = None) -> bool:
    """Wait until no process holds the embedding lock and the indexers this process spawned for
    the index (or ``lock_file``: a memory indexer's) have exited (and are reaped); False if the
    lock is still held after ``timeout``."""
    key = lock_file or index_path
    deadline = time.monotonic() + timeout
    while True:
        _reap()
        mine = [pid for pid, path in _spawned.items() if path == key]
        if not held(index_path, lock_file=lock_file) and not mine:
            return True
        if time.monotonic() >= deadline:
            return not held(index_path, lock_file=lock_file)
        time.sleep(POLL_S)


@contextlib.contextmanager
def foreground(index: Any, index_path: Path) -> Iterator[bool]:
    """Hold the embedding lock for a foreground pass, taking over from a running indexer.

    Yields False when the lock could not be had within :data:`STOP_WAIT_S`
    (the caller then embeds anyway: stored events are never stored twice).
    """
    lock = Lock(index_path)
    got = lock.acquire()
    if not got:
        request_stop(index, True)
        try:
            got = lock.acquire(STOP_WAIT_S)
        finally:
            request_stop(index, False)
    try:
        yield got
    finally:
        lock.release()


# --- the process ---------------------------------------------------------------------------------


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _limit_cpu() -> None:
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        wanted = MAX_CPU_S if hard == resource.RLIM_INFINITY else min(MAX_CPU_S, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (wanted, hard))


def run(index_path: Path, env: Mapping[str, str]) -> int:
    """Embed every missing vector of the index, under the lock; the process's body.

    Returns 0 when done or when another indexer runs, 1 when the model cannot
    be loaded (recorded in the index's state for ``stats``).
    """
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.semantic.embed import load_embedder
    from korg_bridge.recall.semantic.embedpass import EmbedReport, embed_pending

    with Lock(index_path) as lock:
        if not lock.acquire():
            return 0
        started = time.time()
        with Index(index_path) as index:
            record: dict[str, Any] = {"pid": os.getpid(), "started_at": started, "embedded": 0}
            try:
                embedder = load_embedder(env)
            except KorgError as exc:
                with index.write() as conn:
                    _put(conn, _META_STATE, {**record, "state": "failed", "error": exc.message})
                logger.error("korg-recall indexer: %s", exc.message)
                return 1
            record["model"] = embedder.model_id
            logger.info(
                "korg-recall indexer %d: embedding for %s into %s", os.getpid(), embedder.model_id, index_path
            )
            total = 0
            identity = _identity(index_path)
            abandoned = False

            def progress(conn: Any, report: EmbedReport) -> None:
                _put(
                    conn,
                    _META_STATE,
                    {
                        **record,
                        "state": "running",
                        "embedded": total + report.embedded,
                        "updated_at": time.time(),
                    },
                )

            def stop() -> bool:
                nonlocal abandoned
                # Its lock file or index deleted or replaced: another indexer may run now; leave it be.
                abandoned = not lock.still_ours() or _identity(index_path) != identity
                return abandoned or bool(index.read(lambda conn: _meta(conn, _META_STOP)))

            with index.write() as conn:
                _put(conn, _META_STATE, {**record, "state": "running", "updated_at": started})
            outcome = "done"
            while True:
                left = MAX_RUN_S - (time.time() - started)
                if left <= 0:
                    outcome = "paused"
                    break
                report = embed_pending(
                    index, embedder, budget_s=left, role="indexer", on_commit=progress, stop=stop
                )
                total += report.embedded
                if stop():
                    outcome = "abandoned" if abandoned else "stopped"
                    break
                if report.embedded == 0:
                    break  # nothing left (events added meanwhile were embedded by the last loop)
            if abandoned:
                logger.info("korg-recall indexer %d: its lock or index went away; stopping", os.getpid())
                return 0
            with index.write() as conn:
                _put(
                    conn,
                    _META_STATE,
                    {
                        **record,
                        "state": outcome,
                        "embedded": total,
                        "updated_at": time.time(),
                        "finished_at": time.time(),
                    },
                )
            logger.info("korg-recall indexer %d: %s, %d event(s) embedded", os.getpid(), outcome, total)
    return 0


def run_detached(work: Callable[[], int]) -> int:
    """The body of a detached indexer process: logging to its log, niced, CPU-limited; a
    :class:`~korg_bridge.errors.KorgError` logged with its exit code, Ctrl-C 130."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(message)s")
    with contextlib.suppress(OSError):
        os.nice(NICE)
    _limit_cpu()
    try:
        return work()
    except KorgError as exc:
        logger.error("korg-recall indexer: %s", exc.message)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m korg_bridge.recall.semantic.indexer INDEX``: what :func:`start` spawns."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: python -m korg_bridge.recall.semantic.indexer INDEX\n")
        return 2
    return run_detached(lambda: run(Path(args[0]), os.environ))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
