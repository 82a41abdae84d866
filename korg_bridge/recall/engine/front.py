"""The front half of ``korg-recall``: hand the call to a resident engine, or run it here.

This is the console script. When an engine answers, this process imports only the standard
library (and :mod:`korg_bridge.recall.paths` with its two small neighbours, the one resolver of
the index path): it connects to ``<index dir>/engine/engine.sock``, sends the call (argv, cwd,
umask, the environment and its stdin, stdout and stderr themselves, as descriptors), waits for
the exit code and exits with it. The child that runs the call writes to the caller's own
descriptors, so bytes, ``isatty`` and terminal size are exactly a fresh process's.

Anything else -- no engine, ``KORG_RECALL_ENGINE=off``, a refusal (another version, code
fingerprint, index or store), a full engine -- and the call runs in this process, as it always
did (:func:`main` imports :func:`korg_bridge.recall.cli.app.main`).

Never a wrong answer, never a write done twice. The engine answers ``accept`` with whether the
command has side effects; the front then says ``go``, and only from that moment can the call
run. An engine that dies before ``go`` ran nothing: the front runs the call. One that dies
after it (no exit frame): a read that printed nothing yet is run again here; a write -- or a
read that already printed -- is not: one line on stderr says so and the front exits with
:data:`LOST_EXIT`.

The wire: frames of one kind byte, a 4-byte big-endian length and a JSON body. What the engine
shares with this module (the wire, the folder, the fingerprint) is :mod:`.protocol`.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal without its enum (no stubs)
import os
import sys
import time

from korg_bridge.recall.engine.protocol import (
    ACCEPT,
    EXIT,
    GO,
    LOCK_NAME,
    LOST_EXIT,
    MAX_WAIT_S,
    POLL_S,
    PROTOCOL,
    REPLY_S,
    REQUEST,
    WROTE,
    code_identity,
    configured_store,
    connect,
    engine_dir,
    engine_folder,
    frame,
    read_frame,
    send_with_fds,
    version,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING: this process has no time to import typing
if TYPE_CHECKING:
    from _socket import socket
    from collections.abc import Callable, Mapping, Sequence
    from types import TracebackType
    from typing import Any

__all__ = [
    "LOST_EXIT",
    "code_identity",
    "console",
    "engine_dir",
    "main",
]


def _stdio() -> list[dict[str, Any]] | None:
    """How this process's stdin, stdout and stderr are set up; None when one is missing."""
    described = []
    for fd, stream in ((0, sys.stdin), (1, sys.stdout), (2, sys.stderr)):
        try:
            os.fstat(fd)
        except OSError:
            return None
        described.append(
            {
                "encoding": getattr(stream, "encoding", None) or "utf-8",
                "errors": getattr(stream, "errors", None) or "strict",
                "line_buffering": bool(getattr(stream, "line_buffering", False)),
                "write_through": bool(getattr(stream, "write_through", False)),
            }
        )
    return described


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


class _Forwarding:
    """Signals meant for this call go to the child's process group: Ctrl-C becomes the child's
    KeyboardInterrupt; a terminating signal ends the child, then this process, as it would a
    fresh one. (A class, not ``contextlib``: this process imports as little as it can.)"""

    SIGNALS = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)

    def __init__(self, child: int) -> None:
        self.child = child
        self.kept: dict[int, Any] = {}

    def forward(self, signum: int, _frame: Any) -> None:
        try:  # noqa: SIM105 -- contextlib is not imported on this path
            os.killpg(self.child, signum)
        except OSError:
            pass
        if signum != _signal.SIGINT:
            _signal.signal(signum, _signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def __enter__(self) -> None:
        for sig in self.SIGNALS:
            try:
                self.kept[sig] = _signal.signal(sig, self.forward)
            except ValueError:  # not the main thread: only the main thread may set handlers
                break

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        for sig, handler in self.kept.items():
            _signal.signal(sig, handler)


def _lost(command: str, write: bool) -> int:
    if write:
        why = (
            f"its write may have landed: check with `korg-recall memories` (or `korg-recall stats`) before "
            f"running `{command}` again."
        )
    else:
        why = f"its answer above is incomplete: run `{command}` again."
    sys.stderr.write(f"korg-recall: error: the engine stopped during the call; {why}\n")
    sys.stderr.flush()
    return LOST_EXIT


def call(conn: socket, argv: Sequence[str], index: str, store: str) -> int | None:
    """Run ``argv`` in the engine at ``conn``: its exit code, or None to run it here instead."""
    streams = _stdio()
    try:
        cwd = os.getcwd()
    except OSError:  # a folder deleted under the caller: the call itself reports what it can
        return None
    if streams is None:
        return None
    request = {
        "protocol": PROTOCOL,
        "version": version(),
        "fingerprint": code_identity(),
        "index": index,
        "store": store,
        "argv": list(argv),
        "argv0": sys.argv[0] if sys.argv else "korg-recall",
        "cwd": cwd,
        "umask": _umask(),
        "env": dict(os.environ),
        "stdio": streams,
    }
    conn.settimeout(REPLY_S)
    try:
        send_with_fds(conn, frame(REQUEST, request), [0, 1, 2])
        kind, reply = read_frame(conn)
    except (OSError, EOFError, ValueError):
        return None  # nothing ran
    if kind != ACCEPT or not isinstance(reply, dict):
        return None  # refused: another version, fingerprint, index or store
    child, write, command = int(reply["pid"]), bool(reply["write"]), str(reply["command"])
    try:
        conn.sendall(frame(GO))
    except OSError:
        return None  # the child is gone before it was told to run
    conn.settimeout(None)  # the call takes as long as it takes, as a fresh process would
    started = False
    with _Forwarding(child):
        while True:
            try:
                kind, body = read_frame(conn)
            except (OSError, EOFError, ValueError):
                break
            if kind == WROTE:
                started = True
            elif kind == EXIT and isinstance(body, dict):
                return int(body["code"])
    if not started and not write:
        return None  # a read that printed nothing: run it again here
    return _lost(command, write)


def _auto_start(where: str, env: Mapping[str, str]) -> socket | None:
    """Start an engine for ``where`` (detached, niced, single by its lock) unless one is starting;
    wait ``KORG_RECALL_ENGINE_WAIT`` seconds for it to answer (default: not at all)."""
    import fcntl

    from korg_bridge.config import engine_idle, engine_wait

    try:  # nothing is created here: the engine makes its folder once the index proves ours
        lock = os.open(os.path.join(where, LOCK_NAME), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        starting = False
    else:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            starting = True  # an engine holds it: starting up, or draining
        else:
            starting = False
        finally:
            os.close(lock)
    pid = None if starting else spawn(engine_idle(env), dict(env))
    wait = engine_wait(env)
    deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT_S)
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        conn = connect(where)
        if conn is not None:
            return conn
        if pid is not None and _exited(pid):
            return None  # it could not start (its log says why)
    return None


def _exited(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def spawn(idle: str, env: dict[str, str]) -> int | None:
    """``korg-recall engine --idle-exit IDLE --nice --log`` detached: a session of its own, stdio on
    /dev/null until it appends its stderr to ``engine.log``; its pid, or None if it could not start."""
    actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    argv = [sys.executable, "-m", "korg_bridge.recall.engine", "--idle-exit", idle, "--nice", "--log"]
    from korg_bridge.config import ENV_RECALL_ENGINE

    env.pop(ENV_RECALL_ENGINE, None)  # the engine's own process never hands over
    try:
        return os.posix_spawn(
            sys.executable,
            argv,
            env,
            file_actions=actions,
            setsid=True,
            setsigdef=(_signal.SIGINT, _signal.SIGTERM, _signal.SIGPIPE),
        )
    except (OSError, NotImplementedError, ValueError):
        return None


def hand_over(argv: Sequence[str], mode: str, env: Mapping[str, str]) -> int | None:
    """The call's exit code from an engine, or None: run it here."""
    from korg_bridge.recall.paths import index_file

    try:
        index = index_file(env)
        store = configured_store(env)
        where = engine_folder(env)
    except Exception:  # a configuration error: the call reports it itself
        return None
    conn = connect(where)
    if conn is None and mode == "auto":
        conn = _auto_start(where, env)
    if conn is None:
        return None
    try:
        return call(conn, argv, index, store)
    finally:
        conn.close()


def _in_process(argv: Sequence[str]) -> int:
    from korg_bridge.recall.cli.app import main as run

    return run(list(argv))


def main(
    argv: Sequence[str] | None = None,
    *,
    fallback: Callable[[Sequence[str]], int] = _in_process,
    leave: bool = False,
) -> int:
    """The engine's answer when one gives it, else the call run here (``leave``: exit this
    process as soon as an engine answered; see :func:`console`)."""
    from korg_bridge.config import engine_mode
    from korg_bridge.errors import ConfigError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        mode = engine_mode(os.environ)
    except ConfigError as exc:
        sys.stderr.write(f"korg-recall: error: {exc.message}\n")
        return exc.exit_code
    if mode != "off" and args[:1] != ["engine"]:
        code = hand_over(args, mode, os.environ)
        if code is not None:
            if leave:
                _leave(code)
            return code
    return fallback(args)


def _leave(code: int) -> None:
    """Exit with the engine's ``code`` now. The engine ran the call; this process has nothing of
    its own to finish (no thread, no ``atexit`` handler, nothing unflushed but what is flushed
    here), and tearing its interpreter down would only add milliseconds to every call."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    os._exit(code)


def console() -> int:
    """The ``korg-recall`` console script: :func:`main` for ``sys.argv``, leaving at once when an
    engine answered."""
    return main(leave=True)
