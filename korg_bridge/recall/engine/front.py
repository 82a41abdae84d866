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

The wire: frames of one kind byte, a 4-byte big-endian length and a JSON body. The engine
code is shared with this module: it imports the frame helpers and the fingerprint from here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import stat
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "LOST_EXIT",
    "code_fingerprint",
    "engine_dir",
    "main",
]

PROTOCOL = 1
"""The wire's version: part of every request; an engine speaking another refuses."""
DIR_NAME = "engine"
SOCKET_NAME = "engine.sock"
INFO_NAME = "engine.json"
LOCK_NAME = "engine.lock"
LOG_NAME = "engine.log"
SUN_PATH_MAX = 107
"""Bytes a Unix socket path may have (``sun_path`` less its NUL): a longer one means no engine."""
CONNECT_S = 2.0
"""Connecting to a live socket is immediate; a full backlog (a swamped engine) gets this long."""
REPLY_S = 10.0
"""The engine forks and answers within milliseconds; past this the front runs the call itself."""
MAX_FRAME = 16 << 20
"""Bytes one frame may hold: a request carries the whole environment, never near this."""
LOST_EXIT = 4
"""Exit code (``error.io``) when the engine died during a call that may have written or printed."""
POLL_S = 0.02
"""Between two tries to reach an engine being started (``KORG_RECALL_ENGINE_WAIT``)."""
MAX_WAIT_S = 60.0
"""The most ``KORG_RECALL_ENGINE_WAIT`` may ask for."""
LOG_CAP = 1 << 20
"""Bytes an auto-started engine's log may reach; past them its stderr goes to /dev/null."""
NICE = 10
"""An auto-started engine's niceness, as the background indexer's."""

ACCEPT, REFUSE, GO, WROTE, EXIT, REQUEST = b"A", b"R", b"G", b"W", b"X", b"Q"
_HEADER = struct.Struct(">cI")


# --- the wire ----------------------------------------------------------------------------------


def frame(kind: bytes, body: Any = None) -> bytes:
    """One frame: ``kind``, the length, ``body`` as JSON."""
    data = b"" if body is None else json.dumps(body).encode("utf-8")
    return _HEADER.pack(kind, len(data)) + data


def _exactly(conn: socket.socket, size: int, first: bytes = b"") -> bytes:
    chunks = [first]
    have = len(first)
    while have < size:
        chunk = conn.recv(min(size - have, 1 << 20))
        if not chunk:
            raise EOFError("the connection closed in the middle of a frame")
        chunks.append(chunk)
        have += len(chunk)
    return b"".join(chunks)


def read_frame(conn: socket.socket, first: bytes = b"") -> tuple[bytes, Any]:
    """The next frame's kind and body (``first``: bytes of it already read).

    Raises:
        EOFError: the peer closed the connection.
        OSError: the connection failed or timed out.
        ValueError: not a frame of this protocol.
    """
    head = _exactly(conn, _HEADER.size, first[: _HEADER.size])
    kind, size = _HEADER.unpack(head)
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    data = _exactly(conn, size, first[_HEADER.size :])
    return kind, json.loads(data) if data else None


# --- where an engine is, and whether it is ours ---------------------------------------------------


def engine_dir(env: Mapping[str, str]) -> Path:
    """``engine/`` beside the index ``env`` names: one engine per index.

    Raises:
        ConfigError: see :func:`korg_bridge.recall.paths.index_path`.
    """
    from korg_bridge.recall.paths import index_path

    return index_path(env).parent / DIR_NAME


def configured_store(env: Mapping[str, str]) -> str:
    """The store ``env`` configures, before any tenant's folder: an engine serves one.

    Raises:
        ConfigError: see :func:`korg_bridge.recall.paths.store_location`.
    """
    from korg_bridge.config import store_url
    from korg_bridge.recall.paths import default_store_path

    return store_url(env) or str(default_store_path(env))


def owner_only(where: Path) -> bool:
    """True when ``where`` is a real directory of ours that nobody else may enter."""
    try:
        info = os.lstat(where)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def make_dir(where: Path) -> None:
    """Create ``where`` (and the index's folder) owner-only; an existing one of ours is made so.

    Raises:
        OSError: it cannot be created, or it is not a directory of ours.
    """
    where.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        where.mkdir(mode=0o700)
    info = os.lstat(where)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(f"{where} is not a directory of this user's")
    if info.st_mode & 0o077:
        os.chmod(where, 0o700)


def peer_uid(conn: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end (``SO_PEERCRED``)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return pid, uid


def code_fingerprint() -> str:
    """What the code is: the interpreter, and every file of the package by name, size and mtime.

    An engine started before an upgrade or an edit differs from a front started after it, and
    refuses the call. Stats, not contents, and ``zlib``'s checksums rather than ``hashlib`` (whose
    OpenSSL import alone costs more than the walk): about a millisecond for the whole package.
    The checksums guard against accidents (an edit, an upgrade, another venv), not an adversary:
    whoever can write the package's files runs their own code anyway.
    """
    root = str(Path(__file__).resolve().parents[2])
    parts = [f"{sys.version}\0{sys.prefix}\0{root}"]
    folders = [root]
    while folders:
        folder = folders.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda item: item.name):
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(entry.path)
                elif not entry.name.endswith((".pyc", ".pyo")):
                    with contextlib.suppress(OSError):
                        info = entry.stat()
                        parts.append(f"{entry.path[len(root) :]}\0{info.st_size}\0{info.st_mtime_ns}")
    listing = "\n".join(parts).encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(listing):08x}{zlib.adler32(listing):08x}{len(parts):04x}"


def version() -> str:
    from korg_bridge._version import __version__

    return __version__


# --- handing a call over -----------------------------------------------------------------------


def _connect(where: Path) -> socket.socket | None:
    """A connection to the engine in ``where``, if one of ours listens there."""
    path = where / SOCKET_NAME
    if len(os.fsencode(path)) > SUN_PATH_MAX or not owner_only(where):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_S)
        conn.connect(os.fspath(path))
        if peer_uid(conn)[1] != os.getuid():
            raise PermissionError("the engine runs as another user")
    except OSError:
        conn.close()
        return None
    return conn


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


@contextlib.contextmanager
def _forwarding(child: int) -> Iterator[None]:
    """Signals meant for this call go to the child's process group: Ctrl-C becomes the child's
    KeyboardInterrupt; a terminating signal ends the child, then this process, as it would a
    fresh one."""

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):
            os.killpg(child, signum)
        if signum != signal.SIGINT:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    kept = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


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


def call(conn: socket.socket, argv: Sequence[str], index: str, store: str) -> int | None:
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
        "fingerprint": code_fingerprint(),
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
        data = frame(REQUEST, request)
        sent = socket.send_fds(conn, [data], [0, 1, 2])
        conn.sendall(data[sent:])  # the descriptors went with the first bytes
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
    with _forwarding(child):
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


def _auto_start(where: Path, env: Mapping[str, str]) -> socket.socket | None:
    """Start an engine for ``where`` (detached, niced, single by its lock) unless one is starting;
    wait ``KORG_RECALL_ENGINE_WAIT`` seconds for it to answer (default: not at all)."""
    from korg_bridge.config import ENV_RECALL_ENGINE_IDLE, ENV_RECALL_ENGINE_WAIT

    try:  # nothing is created here: the engine makes its folder once the index proves ours
        lock = os.open(where / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
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
    pid = None if starting else spawn(env.get(ENV_RECALL_ENGINE_IDLE, "").strip() or "30m", dict(env))
    try:
        wait = float(env.get(ENV_RECALL_ENGINE_WAIT, "") or 0)
    except ValueError:
        wait = 0.0
    deadline = time.monotonic() + min(max(wait, 0.0), MAX_WAIT_S)
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        conn = _connect(where)
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
            setsigdef=(signal.SIGINT, signal.SIGTERM, signal.SIGPIPE),
        )
    except (OSError, NotImplementedError, ValueError):
        return None


def hand_over(argv: Sequence[str], mode: str, env: Mapping[str, str]) -> int | None:
    """The call's exit code from an engine, or None: run it here."""
    from korg_bridge.recall.paths import index_path

    try:
        index = index_path(env)
        store = configured_store(env)
    except Exception:  # a configuration error: the call reports it itself
        return None
    where = index.parent / DIR_NAME
    conn = _connect(where)
    if conn is None and mode == "auto":
        conn = _auto_start(where, env)
    if conn is None:
        return None
    with conn:
        return call(conn, argv, str(index), store)


def _in_process(argv: Sequence[str]) -> int:
    from korg_bridge.recall.cli.app import main as run

    return run(list(argv))


def main(argv: Sequence[str] | None = None, *, fallback: Callable[[Sequence[str]], int] = _in_process) -> int:
    """Entry point of ``korg-recall``: the engine's answer when one gives it, else the call run here."""
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
            return code
    return fallback(args)
