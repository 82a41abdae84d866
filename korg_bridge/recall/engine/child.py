"""One call, inside a child the engine forked for it: become the caller's process, run, report.

The child is a copy of the engine, whose environment, working directory, umask and stdio are
not the caller's. Before running it takes the caller's, wholesale: the environment sent (and
``time.tzset`` for its ``TZ``), the folder, the umask, and the caller's own stdin, stdout and
stderr descriptors (passed with ``SCM_RIGHTS``), wrapped as the caller's Python wrapped them
(encoding, errors, buffering). Logging handlers and signal dispositions are a fresh process's.
No module keeps state that depends on these between calls -- every path resolver takes the
environment as an argument, and the few ``lru_cache``\\ s are pure -- and every SQLite file or
PostgreSQL connection is opened here, never inherited (the engine holds none across a fork).

Checks come first: a request from another version, code fingerprint, index or store is
refused and the front runs the call itself. Then ``accept`` (with whether the command writes)
and, only after the front's ``go``, the call. Its first byte of output is announced
(``wrote``) before it is written, so a front that loses the child knows whether it may rerun
a read. A thread watches the connection: a front that disappears (killed with the bridge's
process group) takes the call with it, as a fresh process would go.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from korg_bridge.recall.engine.protocol import (
    ACCEPT,
    EXIT,
    GO,
    PROTOCOL,
    REFUSE,
    REQUEST,
    WROTE,
    frame,
    read_frame,
    receive_with_fds,
)

__all__ = ["Identity", "cli_main", "install", "serve_call", "warm_parsers"]

_CLI: dict[str, Any] = {}
"""The command line a child runs: korg-recall's app installs itself here when it is imported
(the engine imports it before serving), so the engine never imports the CLI it runs."""


def install(main: Callable[[list[str]], int], kit: Any) -> None:
    """Make ``main`` (and its toolkit ``kit``, for each command's side effects) what children run."""
    _CLI["main"] = main
    _CLI["kit"] = kit


def cli_main() -> Callable[[list[str]], int]:
    """The command line's ``main`` (what a call runs; a spare rehearses with it too)."""
    main: Callable[[list[str]], int] = _CLI["main"]
    return main


def warm_parsers() -> None:
    """Build every command's argparse parser in the engine, before it forks (the locale's)."""
    kit = _CLI.get("kit")
    if kit is not None:
        kit.warm_parsers()


HANDSHAKE_S = 10.0
"""How long the child waits for the request and for ``go``: the front sends both at once."""
READS = ("none", "fs_read")
"""Side effects of a command that may be run again when its engine dies before it printed."""


class Identity:
    """What an engine is: a request for anything else is refused."""

    def __init__(self, version: str, fingerprint: str, index: str, store: str) -> None:
        self.version = version
        self.fingerprint = fingerprint
        self.index = index
        self.store = store

    def mismatch(self, request: Mapping[str, Any]) -> str | None:
        """Why ``request`` is not for this engine, or None."""
        for key, mine in (
            ("protocol", PROTOCOL),
            ("version", self.version),
            ("fingerprint", self.fingerprint),
            ("index", self.index),
            ("store", self.store),
        ):
            if request.get(key) != mine:
                return f"another {key}"
        return None


def _command(argv: Sequence[str]) -> tuple[str, bool]:
    """The command ``argv`` runs and whether it writes (from the toolkit's ``side_effects``)."""
    kit = _CLI["kit"]
    end = list(argv).index("--") if "--" in argv else len(argv)
    words = [word for word in argv[:end] if word != "--debug"]
    best = None
    for command in kit.commands:
        path = command.command_id.split(".")[1:]
        if words[: len(path)] == path and (best is None or len(path) > len(best[0])):
            best = (path, command)
    if best is None:
        return "korg-recall " + " ".join(words[:1]), False
    return "korg-recall " + " ".join(best[0]), best[1].capabilities.get("side_effects") not in READS


class _Announcing(io.FileIO):
    """A raw stdout or stderr that sends ``wrote`` to the front before its first byte."""

    announce: Any = None

    def write(self, data: Any) -> int:
        if _Announcing.announce is not None:
            _Announcing.announce()
        return super().write(data)


def _streams(stdio: Sequence[Mapping[str, Any]]) -> None:
    """sys.stdin, stdout and stderr over fds 0-2, set up as the caller's Python set up its own."""
    made = []
    for fd, spec in enumerate(stdio):
        raw: io.FileIO = (
            io.FileIO(fd, "rb", closefd=False) if fd == 0 else _Announcing(fd, "wb", closefd=False)
        )
        buffered: Any = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        made.append(
            io.TextIOWrapper(
                buffered,
                encoding=spec.get("encoding") or "utf-8",
                errors=spec.get("errors") or "strict",
                newline="\n",
                line_buffering=bool(spec.get("line_buffering")),
                write_through=bool(spec.get("write_through")),
            )
        )
    sys.stdin, sys.stdout, sys.stderr = made


def _become(request: Mapping[str, Any], fds: Sequence[int]) -> None:
    """Take the caller's folder, umask, environment, argv, descriptors and a fresh process's
    signals and logging."""
    os.chdir(request["cwd"])
    os.umask(int(request["umask"]))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})
    time.tzset()
    sys.argv = [str(request.get("argv0") or "korg-recall"), *request["argv"]]
    for target, fd in enumerate(fds):
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)
    _streams(request["stdio"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)


def _watch(conn: socket.socket, done: threading.Event) -> None:
    """End the call when its front goes away (it never sends after ``go``)."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    if not done.is_set():
        os.killpg(0, signal.SIGTERM)


def _exit_code(value: Any) -> int:
    """What ``sys.exit(value)`` makes the process's status."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    sys.stderr.write(f"{value}\n")
    return 1


def _run(argv: Sequence[str]) -> int:
    main = _CLI["main"]
    try:
        code = _exit_code(main(list(argv)))
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # what the interpreter does with an exception nothing caught
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = 120  # what a fresh interpreter returns when its last flush fails
    atexit._run_exitfuncs()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    return code


def serve_call(conn: socket.socket, identity: Identity, served: dict[str, Any]) -> None:
    """Handshake, run and report one call on ``conn``; returns when the child may exit."""
    fds: list[int] = []
    try:
        conn.settimeout(HANDSHAKE_S)
        data, fds = receive_with_fds(conn, 1 << 16, 3)
        kind, request = read_frame(conn, data)
        if kind != REQUEST or len(fds) != 3 or not isinstance(request, dict):
            return
        why = identity.mismatch(request)
        if why is not None:
            conn.sendall(frame(REFUSE, {"reason": why}))
            return
        command, write = _command(request["argv"])
        try:
            _become(request, fds)
        except (OSError, KeyError, TypeError, ValueError, LookupError) as exc:
            conn.sendall(frame(REFUSE, {"reason": f"cannot take the call's place: {exc}"}))
            return
        fds = []
        os.setpgid(0, 0)
        conn.sendall(frame(ACCEPT, {"pid": os.getpid(), "write": write, "command": command}))
        kind, _ = read_frame(conn)
        if kind != GO:
            return
    except (OSError, EOFError, ValueError):
        return
    finally:
        for fd in fds:
            os.close(fd)
    conn.settimeout(None)
    done = threading.Event()
    threading.Thread(target=_watch, args=(conn, done), daemon=True, name="korg-engine-watch").start()

    def announce() -> None:
        _Announcing.announce = None
        with contextlib.suppress(OSError):
            conn.sendall(frame(WROTE))

    _Announcing.announce = announce
    import korg_bridge.recall.engine as package

    package._serving = served
    code = _run(request["argv"])
    done.set()
    _release_stdio()
    with contextlib.suppress(OSError):
        conn.sendall(frame(EXIT, {"code": code}))


def _release_stdio() -> None:
    """Let go of the caller's descriptors before saying the call ended: whoever reads the caller's
    pipes sees them end when the front exits, not when this copy of a large process has been
    torn down. Anything written after this goes nowhere, as it would after a fresh process's exit."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)
