"""The engine's parent: load everything once, then accept calls and fork a child for each.

* **Fork per call.** A child runs exactly the code a fresh ``korg-recall`` runs (index refresh
  from the ledgers, Claude Code folder pickup, store reads), so freshness comes free; what the
  engine saves is the interpreter start, the imports and the model load. The parent stays
  single-threaded and holds no database connection across a fork (it opens the index only to
  refresh the vectors it keeps, and closes it before the next fork), so a fork copies nothing half-done: the
  model's onnxruntime session runs one thread per operator and no pool (its threads would not
  survive a fork), and the first query is embedded here so the child finds it warm.
* **Where.** ``<index dir>/engine/`` (mode 0700): ``engine.sock`` (0600), ``engine.lock`` (an
  ``flock`` held for the engine's life: one engine per index), ``engine.json`` (pid, version,
  fingerprint, index, store, socket). The socket is bound only after the preload, so a front
  that connects finds it ready. Each connection's peer must be this user (``SO_PEERCRED``).
* **Bounded.** At most :data:`MAX_CHILDREN` calls at once (the rest wait in the backlog, and a
  front that waits past its reply time runs its call itself); the engine exits after
  ``--idle-exit`` without a call, and on SIGTERM (or SIGINT, SIGHUP) it stops accepting,
  removes its socket and waits up to :data:`DRAIN_S` for the calls running.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import importlib
import json
import logging
import os
import pkgutil
import re
import select
import signal
import socket
import sqlite3
import stat
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from korg_bridge.config import engine_rehearses
from korg_bridge.errors import KorgError, UsageError
from korg_bridge.recall.engine.ahead import open_ahead
from korg_bridge.recall.engine.child import Identity, cli_main, serve_call, warm_parsers
from korg_bridge.recall.engine.codewatch import CodeWatch
from korg_bridge.recall.engine.keeper import keep
from korg_bridge.recall.engine.protocol import (
    HANDOFF,
    INFO_NAME,
    LOCK_NAME,
    LOG_CAP,
    LOG_NAME,
    NICE,
    SOCKET_NAME,
    SUN_PATH_MAX,
    code_fingerprint,
    code_identity,
    configured_store,
    engine_dir,
    frame,
    make_dir,
    package_root,
    peer_uid,
    read_frame,
    receive_with_fds,
    send_with_fds,
    version,
)
from korg_bridge.recall.engine.rehearsal import Rehearsal
from korg_bridge.recall.engine.watch import ChildView, MirrorWatch

__all__ = ["DRAIN_S", "MAX_CHILDREN", "parse_duration", "run"]

logger = logging.getLogger(__name__)

MAX_CHILDREN = 16
"""Calls run at once; a bridge rarely has more in flight, and each child is a full process."""
DRAIN_S = 60.0
"""After SIGTERM: how long running calls may finish before their process groups are ended."""
BACKLOG = 64
"""Connections the kernel queues while every child slot is taken."""
TICK_S = 1.0
"""The longest the parent sleeps between looks at its children and the idle clock."""
LOOK_AGAIN_S = (0.15, 0.6, 2.5)
"""When a waiting spare looks again at the files it opened ahead (:func:`korg_bridge.recall.opened.
refresh`): the keeper's checkpoint after the call before writes them, and a file written since its
look is looked at by the call that takes it, about 0.6 ms a file. The first look comes after the
call before has ended (a spare opens ahead while it runs) and before an agent's next call."""
SPARE_EXIT_S = 10.0
"""How long a spare told to go may take (it finishes its warm-up, tens of milliseconds)."""
REHEARSE_AFTER = 3
"""Calls an engine answers before it makes the scratch history its spares rehearse on (a helper
process, some 150 ms of work: worth it for an agent's session, not for a script's two calls)."""
VECTORS_EVERY_S = 1.0
"""The most often the engine reads the history vectors written since (a listing, then the new chunks)."""
PRELOAD = (
    "korg_bridge.recall",
    "korg_bridge.redact",
    "korg_bridge.ledger",
    "korg_bridge.toolkit",
    "korg_bridge._fs",
)
"""Packages whose modules the CLI runs: imported once here instead of in every call."""
SKIP = re.compile(r"(^|\.)(__main__|console|engine)(\.|$)")
"""Modules not to preload: entry points, and the console (a server of its own)."""
SINGLE_THREADED = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
"""No thread pools in the parent (a fork keeps only the forking thread): numpy's BLAS, and the
tokenizer's, which would otherwise warn on stderr in every child that it was forked after use.
Small vector products split rows, never sums, across threads, so the figures are the same."""
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|)\s*$")


KEEPER_NAME = "korg-keeper"
"""The process holding the index and store open between calls (:mod:`.keeper`)."""
SPARE_NAME = "korg-spare"
"""What ``ps`` calls a child waiting for a call (``/proc/<pid>/comm``, 15 bytes at most)."""
CALL_NAME = "korg-call"
"""What ``ps`` calls a child running one."""


def _name(name: str) -> None:
    """Name this process for ``ps`` and ``top`` (Linux; elsewhere nothing happens)."""
    with contextlib.suppress(OSError), open("/proc/self/comm", "w", encoding="ascii") as comm:
        comm.write(name)


def parse_duration(text: str) -> float | None:
    """``90s``, ``30m``, ``2h`` or plain seconds; ``0`` means never (None).

    Raises:
        UsageError: anything else.
    """
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(
            f"--idle-exit {text!r} is not a duration: give seconds, or a number with s, m or h (30m), "
            "or 0 for never."
        )
    seconds = float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
    return seconds or None


def preload(env: Mapping[str, str]) -> list[str]:
    """Import every module a call may use, and load and warm the model when one is on disk;
    what was loaded, for the log."""
    loaded = []
    for name in PRELOAD:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), prefix=f"{name}."):
            if SKIP.search(info.name):
                continue
            with contextlib.suppress(Exception):  # an optional extra missing: the call will say so
                importlib.import_module(info.name)
    for optional in ("sqlite3", "psycopg"):
        with contextlib.suppress(ImportError):
            importlib.import_module(optional)
    from korg_bridge.recall.memory.safety import injection_signs
    from korg_bridge.redact.rules import RULES

    for rule in RULES:  # patterns that compile lazily (40 ms for the injection signs) do it here, once
        getattr(rule.pattern, "compiled", None)
    injection_signs("warm up")
    warm_parsers()
    from korg_bridge.recall.semantic.model import model_available

    if model_available(env):
        from korg_bridge.recall.semantic.modes import shared_embedder

        try:
            embedder = shared_embedder(env)
            embedder.embed(["warm up the session"])
            loaded.append(embedder.model_id)
        except KorgError as exc:
            logger.warning("korg-recall: engine: the model stays unloaded: %s", exc.message)
    return loaded


class _Vectors:
    """The history vectors the engine keeps for its children (:mod:`~korg_bridge.recall.semantic.
    resident`), loaded before serving and again, at most every :data:`VECTORS_EVERY_S`, after a call."""

    def __init__(self, index: Path, model_id: str, dim: int, store: Path | None = None) -> None:
        self.index, self.model_id, self.dim = index, model_id, dim
        self.store = store
        """The SQLite store whose memory vectors are kept too (None: a team store, or none)."""
        self.loaded_at = 0.0
        self.warned = False

    def refresh(self, *, now: bool = False) -> None:
        from korg_bridge.recall.history.index import Index
        from korg_bridge.recall.semantic.vectors import keep_resident

        if not now and time.monotonic() - self.loaded_at < VECTORS_EVERY_S:
            return
        self.loaded_at = time.monotonic()
        try:
            with Index(self.index) as index:  # opened and closed here: no fork happens while it is open
                keep_resident(index, self.model_id, self.dim)
        except (KorgError, OSError) as exc:  # the children read the vectors from the index, as before
            if not self.warned:
                self.warned = True
                logger.warning("korg-recall: engine: history vectors not kept in memory: %s", exc)
        if self.store is not None and self.store.exists():
            from korg_bridge.recall.memory.backend.sqlite import resident

            # Read-only, opened and closed here; a store not made yet, or busy, is read next time.
            with contextlib.suppress(sqlite3.Error, OSError):
                resident.keep(self.store, self.model_id, self.dim)


class _Lock:
    """``engine.lock``, held exclusively for the engine's life; never deleted."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self.fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise KorgError(
                    f"an engine already runs for this index ({path.parent}): use it, or stop it with "
                    "`korg-recall engine --stop`."
                ) from None
            raise


def _log_to(path: Path) -> None:
    """Append stderr to ``path`` (to /dev/null once it passes :data:`LOG_CAP` bytes)."""
    try:
        too_big = path.stat().st_size > LOG_CAP
    except OSError:
        too_big = False
    fd = os.open(
        os.devnull if too_big else path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600
    )
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)


def _write_info(where: Path, info: Mapping[str, Any]) -> None:
    tmp = where / f".{INFO_NAME}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(info, out, indent=2)
        out.write("\n")
    os.replace(tmp, where / INFO_NAME)


def _listen(path: Path) -> socket.socket:
    """The socket at ``path`` (0600), replacing a stale one left by a killed engine (ours: the
    folder is ours and only an engine holding the lock binds there)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(found.st_mode):
            raise KorgError(f"{path} exists and is not an engine's socket; remove it to start an engine.")
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(os.fspath(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(BACKLOG)
    listener.setblocking(False)
    return listener


class Engine:
    """The parent's state: its children, its clock, whether it drains."""

    def __init__(
        self,
        where: Path,
        identity: Identity,
        idle_s: float | None,
        watch: MirrorWatch | None = None,
        code: CodeWatch | None = None,
    ) -> None:
        self.where = where
        self.identity = identity
        self.watch = watch
        self.code = code
        """The watch over the engine's own package: a change makes it stop answering."""
        self.vectors: _Vectors | None = None
        self.warm: Callable[[], object] | None = None
        """What a spare runs while it waits (:func:`_warmer`)."""
        self.rehearsal: Rehearsal | None = None
        """What a spare rehearses after its warm-up (:mod:`.rehearsal`)."""
        self.idle_s = idle_s
        self.children: set[int] = set()
        self.spare: tuple[int, socket.socket] | None = None
        self.keeper: tuple[int, int] | None = None
        """The keeper's pid and the pipe the engine pokes it through after each call."""
        self.calls = 0
        self.keeps = True
        """Whether to fork a keeper (:mod:`.keeper`)."""
        self.last = time.monotonic()
        self.draining = False
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def _signal(self, signum: int, _frame: Any) -> None:
        if signum != signal.SIGCHLD:
            self.draining = True

    def _reap(self) -> None:
        while self.children or self.spare is not None:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare[0]:
                self.spare[1].close()  # it died waiting (killed from outside): the next call forks another
                self.spare = None
                continue
            if self.keeper is not None and pid == self.keeper[0]:
                os.close(self.keeper[1])  # killed from outside: calls close their files as without one
                self.keeper = None
                continue
            if pid in self.children:
                self._poke_keeper()
            self.children.discard(pid)
            self.last = time.monotonic()

    def _poke_keeper(self) -> None:
        """A call ended: the keeper checkpoints (never waiting for anyone)."""
        if self.keeper is not None:
            with contextlib.suppress(OSError):  # full (it is behind: one poke is as good as many)
                os.write(self.keeper[1], b".")

    def _fork_keeper(self, listener: socket.socket, lock_fd: int) -> None:
        """Fork the keeper (:mod:`.keeper`) for the index and a SQLite store."""
        paths = [(self.identity.index, "index")]
        if "://" not in self.identity.store:
            paths.append((self.identity.store, "store"))
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(write_fd)
                for fd in (listener.fileno(), lock_fd, self.wake_r, self.wake_w, *self._own_fds()):
                    os.close(fd)
                signal.set_wakeup_fd(-1)
                os.setpgid(0, 0)  # Ctrl-C at the engine's terminal is the engine's: it ends the keeper
                _name(KEEPER_NAME)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
                    signal.signal(sig, signal.SIG_DFL)
                keep(read_fd, paths)
            finally:
                os._exit(0)
        os.close(read_fd)
        os.set_blocking(write_fd, False)
        self.keeper = (pid, write_fd)

    def _stop_keeper(self) -> None:
        """Close the keeper's pipe: it closes its files (the logs checkpointed and removed) and
        exits; one that has not within :data:`SPARE_EXIT_S` is killed."""
        if self.keeper is None:
            return
        pid, write_fd = self.keeper
        self.keeper = None
        os.close(write_fd)
        deadline = time.monotonic() + SPARE_EXIT_S
        try:
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    return
                time.sleep(0.01)
        except (ChildProcessError, ProcessLookupError):
            return

    def _fork_spare(self, listener: socket.socket, lock_fd: int) -> None:
        """Fork the child that will take the next call, ahead of it: forking a process this size
        takes milliseconds, which a call should not wait for. The spare waits for its connection
        (and the mirror watch as it is at that moment) on a socket pair; the engine's end closing
        -- the engine gone, or stopping -- ends it."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # the spare: never returns into the parent's loop
            try:
                ours.close()
                listener.close()
                os.close(lock_fd)  # a long call must not keep the next engine from starting
                os.close(self.wake_r)
                os.close(self.wake_w)
                signal.set_wakeup_fd(-1)
                os.setpgid(0, 0)  # Ctrl-C at the engine's terminal is the engine's, not a call's
                _name(SPARE_NAME)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                for fd in self._own_fds():  # the watches, the reports and the keeper's pipe are the parent's
                    os.close(fd)
                self._wait_and_serve(theirs)
            finally:
                os._exit(0)
        theirs.close()
        self.spare = (pid, ours)

    def _wait_and_serve(self, handoff: socket.socket) -> None:
        """In the spare: get ready, wait for a call, then serve it."""
        if self.rehearsal is not None and self.rehearsal.ready:
            self.rehearsal.rehearse(cli_main(), handoff)  # embeds a query too, when there is a model
        elif self.warm is not None:
            with contextlib.suppress(Exception):  # only ever a head start: the call works without it
                self.warm()
        if not select.select([handoff], [], [], 0)[0]:  # no call waiting yet: open what it will read
            open_ahead(self.identity.index, self.identity.store)
            from korg_bridge.recall import opened

            for wait in LOOK_AGAIN_S:  # the last call's checkpoint writes the files after this open
                if select.select([handoff], [], [], wait)[0]:
                    break
                opened.refresh()  # looked at now, not in the next call
        try:
            data, fds = receive_with_fds(handoff, 1 << 20, 1)
            if len(fds) != 1:
                return
            kind, state = read_frame(handoff, data)
        except (OSError, EOFError, ValueError):
            return
        handoff.close()
        conn = socket.socket(fileno=fds[0])
        if kind != HANDOFF or not isinstance(state, dict):
            return
        _name(CALL_NAME)
        served: dict[str, Any] = {"pid": os.getppid()}
        if self.watch is not None and state.get("watch") is not None:
            from korg_bridge.recall.memory.mirror import watched

            generation, clean, folders, named = state["watch"]
            watched.install(ChildView(generation, clean, set(folders), self.watch.report_w, named))
            served["mirror_watch"] = state["watch_status"]
        serve_call(conn, self.identity, served)

    def _own_fds(self) -> list[int]:
        """The engine's descriptors besides its socket, lock and wake-up pipe."""
        return [
            *(self.watch.fds if self.watch else []),
            *(self.code.fds if self.code else []),
            *([self.keeper[1]] if self.keeper else []),
        ]

    def _hand(self, conn: socket.socket, listener: socket.socket, lock_fd: int) -> None:
        """Give ``conn`` to the spare (forking one if there is none), then fork the next spare --
        unless the package changed on disk: then the connection is closed unanswered (its front
        runs the call itself) and the engine stops (:mod:`.codewatch`)."""
        why = self.code.stale() if self.code is not None else None
        if why is not None:
            conn.close()
            if not self.draining:
                logger.warning("korg-recall: engine: its code changed on disk (%s); stopping", why)
                self.draining = True
            return
        if self.watch is not None:
            self.watch.drain()  # every change finished before the call is in what the child sees
        state: dict[str, Any] = {"watch": None}
        if self.watch is not None:
            view = self.watch.child()
            state = {
                "watch": (view.generation, view.clean, sorted(view.watched), view.named),
                "watch_status": self.watch.status(),
            }
        for _attempt in range(2):  # a spare that died meanwhile: one more, forked now
            if self.spare is None:
                self._fork_spare(listener, lock_fd)
            assert self.spare is not None
            pid, ours = self.spare
            self.spare = None
            try:
                send_with_fds(ours, frame(HANDOFF, state), [conn.fileno()])
            except OSError:
                ours.close()
                continue  # the spare is reaped as any child is
            ours.close()
            self.children.add(pid)
            self.calls += 1
            break
        conn.close()  # before the next fork: only the call's child may hold the caller's connection
        self.last = time.monotonic()
        if self.calls == REHEARSE_AFTER and self.rehearsal is not None:
            self._prepare_rehearsal(listener, lock_fd)
        if self.vectors is not None:
            self.vectors.refresh()  # the call runs meanwhile; the next spare starts with them
        if not self.draining:
            self._fork_spare(listener, lock_fd)

    def _prepare_rehearsal(self, listener: socket.socket, lock_fd: int) -> None:
        """Make the scratch history the spares rehearse on, in a helper forked now: after
        :data:`REHEARSE_AFTER` calls, so an engine that serves a few (a test's, a script's) never
        spends on it."""
        assert self.rehearsal is not None
        own = [listener.fileno(), lock_fd, self.wake_r, self.wake_w, *self._own_fds()]
        if self.spare is not None:
            own.append(self.spare[1].fileno())
        pid = self.rehearsal.prepare(cli_main(), own)
        if pid is None:
            self.rehearsal = None
        else:
            self.children.add(pid)  # reaped as a call's child is; a stopping engine waits for it

    def _drop_spare(self) -> None:
        """End the spare (its socket pair closing: it exits once its warm-up is done) and reap it;
        one that has not gone within :data:`SPARE_EXIT_S` is killed."""
        if self.spare is None:
            return
        pid, ours = self.spare
        self.spare = None
        ours.close()
        deadline = time.monotonic() + SPARE_EXIT_S
        try:
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() >= deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)  # immediate: SIGKILL cannot be caught or held
                    return
                time.sleep(0.01)
        except (ChildProcessError, ProcessLookupError):
            return

    def loop(self, listener: socket.socket, lock_fd: int) -> None:
        self.last = time.monotonic()  # idle from the moment it listens, not from before the preload
        signal.set_wakeup_fd(self.wake_w)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, self._signal)
        if self.keeps:
            self._fork_keeper(listener, lock_fd)
        self._fork_spare(listener, lock_fd)
        try:
            self._serve(listener, lock_fd)
        finally:
            self._drop_spare()
            self._stop_keeper()

    def _serve(self, listener: socket.socket, lock_fd: int) -> None:
        deadline: float | None = None
        while True:
            self._reap()
            now = time.monotonic()
            if self.draining:
                if deadline is None:
                    deadline = now + DRAIN_S
                    listener.close()
                    self._forget()
                    self._drop_spare()
                if not self.children:
                    return
                if now >= deadline:
                    for pid in self.children:
                        with contextlib.suppress(OSError):
                            os.killpg(pid, signal.SIGTERM)
                    deadline = now + DRAIN_S
            elif self.idle_s is not None and not self.children and now - self.last >= self.idle_s:
                return
            watch = [self.wake_r, *(self.watch.fds if self.watch is not None else [])]
            if not self.draining and len(self.children) < MAX_CHILDREN:
                watch.append(listener.fileno())
            ready, _, _ = select.select(watch, [], [], TICK_S)
            if self.wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 512)
            if self.watch is not None and any(fd in ready for fd in self.watch.fds):
                self.watch.drain()  # keeps the inotify queue short between calls
            if listener.fileno() in ready and not self.draining:
                self._accept(listener, lock_fd)

    def _accept(self, listener: socket.socket, lock_fd: int) -> None:
        while len(self.children) < MAX_CHILDREN:
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            with conn:
                conn.setblocking(True)
                try:
                    peer = peer_uid(conn)[1]
                except OSError:
                    continue
                if peer != os.getuid():
                    logger.warning("korg-recall: engine: refused a connection from uid %d", peer)
                    continue
                self._hand(conn, listener, lock_fd)

    def _forget(self) -> None:
        """Take the socket and the description away: no front connects to a stopping engine."""
        for name in (SOCKET_NAME, INFO_NAME):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.where / name)


def run(env: Mapping[str, str], idle_s: float | None, *, nice: bool = False, log: bool = False) -> int:
    """Serve calls for the index ``env`` names until idle for ``idle_s`` or told to stop (``nice``:
    at a background process's priority; ``log``: stderr appended to ``engine/engine.log``).

    Nothing is created beside the index before the index is opened (and so proven ours, or made).

    Raises:
        KorgError: another engine runs for the index; the folder or socket cannot be made.
        ConfigError: the index or store ``env`` names is malformed.
    """
    from korg_bridge.recall.paths import index_file

    code = CodeWatch(package_root())  # before anything more of the package is imported
    index = Path(index_file(env))
    rehearse = engine_rehearses(env)  # a bad value stops the engine before it loads anything
    where = engine_dir(env)
    sock = where / SOCKET_NAME
    if len(os.fsencode(sock)) > SUN_PATH_MAX:
        raise KorgError(
            f"the engine's socket path would be {len(os.fsencode(sock))} bytes ({sock}), over the "
            f"system's {SUN_PATH_MAX}: put the index in a shorter folder (KORG_RECALL_INDEX); calls run "
            "in their own process meanwhile."
        )
    from korg_bridge.recall.history.index import Index

    with Index(index):  # what a first call does; a file at that path that is not an index: ConfigError
        pass
    try:
        make_dir(where)
        if log:
            _log_to(where / LOG_NAME)
        lock = _Lock(where / LOCK_NAME)
    except OSError as exc:
        raise KorgError(f"cannot set up the engine's folder {where}: {exc.strerror or exc}.") from exc
    if nice:
        with contextlib.suppress(OSError):
            os.nice(NICE)
    for name, value in SINGLE_THREADED.items():  # before numpy, onnxruntime and tokenizers load
        os.environ.setdefault(name, value)
    identity = Identity(version(), code_identity(), index_file(env), configured_store(env))
    engine = Engine(where, identity, idle_s, _mirror_watch(identity.store), code)
    try:
        started = time.monotonic()
        models = preload(env)
        engine.vectors = _kept_vectors(env, index, identity.store, models)
        engine.warm = _warmer(env, models)
        engine.rehearsal = _rehearsal(where, env, models) if rehearse else None
        # Everything loaded so far lives as long as the engine: out of the collector's sight, a
        # child's collections never walk (and so never copy) the pages it shares with the parent.
        gc.collect()
        gc.freeze()
        listener = _listen(sock)
        _write_info(
            where,
            {
                "pid": os.getpid(),
                "version": identity.version,
                "fingerprint": code.fingerprint or code_fingerprint(),
                "code_watch": code.watching,
                "index": identity.index,
                "store": _store_label(identity.store),
                "socket": str(sock),
                "idle_exit_s": idle_s,
                "models": models,
                "threads": len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None,
                "started": time.time(),
            },
        )
        sys.stderr.write(
            f"korg-recall: engine listening on {sock} (pid {os.getpid()}, ready in "
            f"{time.monotonic() - started:.1f} s{', model ' + models[0] if models else ''}); "
            f"{'exits after ' + str(int(idle_s)) + ' s idle' if idle_s else 'no idle exit'}.\n"
        )
        sys.stderr.flush()
        try:
            engine.loop(listener, lock.fd)
        finally:
            listener.close()
            engine._forget()
    finally:
        if engine.rehearsal is not None:
            engine.rehearsal.discard()
        os.close(lock.fd)
    sys.stderr.write(f"korg-recall: engine stopped after {engine.calls} call(s).\n")
    return 0


def _kept_vectors(env: Mapping[str, str], index: Path, store: str, models: list[str]) -> _Vectors | None:
    """The history vectors of the loaded model, and the memory vectors of a SQLite ``store``, kept
    for the children (none without a model)."""
    if not models:
        return None
    from korg_bridge.recall.semantic.modes import shared_embedder

    embedder = shared_embedder(env)
    vectors = _Vectors(index, embedder.model_id, embedder.dim, None if "://" in store else Path(store))
    vectors.refresh(now=True)
    return vectors


def _warmer(env: Mapping[str, str], models: list[str]) -> Callable[[], object] | None:
    """One embedding, run by each spare while it waits. A forked process's first inference
    copies the pages of the model's buffers it writes (some 850 page faults, 7 ms): the spare
    pays for that before a call arrives instead of during it. Nothing is kept or written."""
    if not models:
        return None
    from korg_bridge.recall.semantic.modes import shared_embedder

    embedder = shared_embedder(env)
    return lambda: embedder.embed_windows(["a spare warming up its copy of the model"], [1])


def _rehearsal(where: Path, env: Mapping[str, str], models: list[str]) -> Rehearsal:
    """What the spares rehearse (:mod:`.rehearsal`): by meaning too when the scratch environment
    finds the model this engine loaded (a second copy is never loaded for it)."""
    rehearsal = Rehearsal(where, env, hybrid=False)
    if models:
        from korg_bridge.recall.semantic.model import resolve_model

        rehearsal.hybrid = resolve_model(rehearsal.env) == resolve_model(env)
    return rehearsal


def _mirror_watch(store: str) -> MirrorWatch | None:
    """The watch over the mirror beside a SQLite store (a team store has no mirror)."""
    if "://" in store:
        return None
    from korg_bridge.recall.paths import MIRROR_NAME

    return MirrorWatch(Path(store).parent / MIRROR_NAME, Path(store))


def _store_label(store: str) -> str:
    """The store as engine.json shows it: a URL without its password."""
    if "://" not in store:
        return store
    from korg_bridge.recall.memory.backend.pg.url import safe_url

    return safe_url(store)
