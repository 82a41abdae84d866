"""What the front half and the engine share: the wire (frames of one kind byte, a 4-byte
big-endian length and a :mod:`marshal` body), where an engine lives beside the index, who may
talk to it, and what makes two installations the same code.

The front imports this on every call before anything else, so it uses only modules built into
the interpreter or already loaded by its start-up (``_socket`` is the one extension module):
not ``socket`` (which pulls in ``enum`` and ``selectors``), ``json`` (``re``), ``struct`` or
``pathlib``; together they were two thirds of a front's own time. ``marshal`` carries the
frames: both ends are the same interpreter (the code identity says so, and a frame another one
cannot read is refused unanswered), and it only ever reads what a process of the same user sent
(``SO_PEERCRED``) -- marshal builds values, it never runs them.
"""

from __future__ import annotations

import _socket
import marshal
import os
import stat
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on the engine's front path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import Any

__all__ = [
    "ACCEPT",
    "EXIT",
    "GO",
    "HANDOFF",
    "INFO_NAME",
    "LOCK_NAME",
    "LOG_CAP",
    "LOG_NAME",
    "NICE",
    "PROTOCOL",
    "REFUSE",
    "REQUEST",
    "SOCKET_NAME",
    "SUN_PATH_MAX",
    "WROTE",
    "code_fingerprint",
    "code_identity",
    "configured_store",
    "connect",
    "engine_dir",
    "engine_folder",
    "frame",
    "make_dir",
    "package_files",
    "package_folders",
    "package_root",
    "peer_uid",
    "read_frame",
    "receive_with_fds",
    "send_with_fds",
    "version",
]

PROTOCOL = 2
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
HANDOFF = b"H"
"""Inside the engine: the parent handing a connection to a waiting child (:mod:`.server`)."""
_HEADER_SIZE = 5
_INT = 4
"""Bytes of a C ``int`` (a descriptor, a pid or uid in ``SO_PEERCRED``): 4 on every Linux ABI."""


# --- the wire ----------------------------------------------------------------------------------


def frame(kind: bytes, body: Any = None) -> bytes:
    """One frame: ``kind``, the length, ``body`` marshalled (plain values: dicts, lists, strings,
    numbers, booleans, None)."""
    data = b"" if body is None else marshal.dumps(body)
    return kind + len(data).to_bytes(4, "big") + data


def _exactly(conn: _socket.socket, size: int, first: bytes = b"") -> bytes:
    chunks = [first]
    have = len(first)
    while have < size:
        chunk = conn.recv(min(size - have, 1 << 20))
        if not chunk:
            raise EOFError("the connection closed in the middle of a frame")
        chunks.append(chunk)
        have += len(chunk)
    return b"".join(chunks)


def read_frame(conn: _socket.socket, first: bytes = b"") -> tuple[bytes, Any]:
    """The next frame's kind and body (``first``: bytes of it already read).

    Raises:
        EOFError: the peer closed the connection.
        OSError: the connection failed or timed out.
        ValueError: not a frame of this protocol.
    """
    head = _exactly(conn, _HEADER_SIZE, first[:_HEADER_SIZE])
    kind, size = head[:1], int.from_bytes(head[1:], "big")
    if size > MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    data = _exactly(conn, size, first[_HEADER_SIZE:])
    if not data:
        return kind, None
    try:
        return kind, marshal.loads(data)
    except (EOFError, TypeError) as exc:  # a truncated or foreign body: not a frame of ours
        raise ValueError(f"an unreadable frame body: {exc}") from None


def send_with_fds(conn: _socket.socket, data: bytes, fds: Sequence[int]) -> None:
    """Send ``data`` with ``fds`` (``SCM_RIGHTS``) riding on its first bytes."""
    rights = b"".join(fd.to_bytes(_INT, sys.byteorder, signed=True) for fd in fds)
    sent = conn.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
    if sent < len(data):
        conn.sendall(data[sent:])


def receive_with_fds(conn: _socket.socket, size: int, most: int) -> tuple[bytes, list[int]]:
    """Up to ``size`` bytes and the descriptors that came with them (at most ``most`` kept; any
    beyond are closed)."""
    data, ancillary, _flags, _addr = conn.recvmsg(size, _socket.CMSG_SPACE(most * _INT))
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % _INT
            fds.extend(
                int.from_bytes(payload[at : at + _INT], sys.byteorder, signed=True)
                for at in range(0, usable, _INT)
            )
    for extra in fds[most:]:
        os.close(extra)
    return data, fds[:most]


# --- where an engine is, and whether it is ours ---------------------------------------------------


def engine_folder(env: Mapping[str, str]) -> str:
    """``engine/`` beside the index ``env`` names: one engine per index.

    Raises:
        ConfigError: see :func:`korg_bridge.recall.paths.index_path`.
    """
    from korg_bridge.recall.paths import index_file

    return os.path.join(os.path.dirname(index_file(env)), DIR_NAME)


def engine_dir(env: Mapping[str, str]) -> Path:
    """:func:`engine_folder` as a :class:`~pathlib.Path`."""
    from pathlib import Path

    return Path(engine_folder(env))


def configured_store(env: Mapping[str, str]) -> str:
    """The store ``env`` configures, before any tenant's folder: an engine serves one.

    Raises:
        ConfigError: see :func:`korg_bridge.recall.paths.store_location`.
    """
    from korg_bridge.config import store_url
    from korg_bridge.recall.paths import store_file

    return store_url(env) or store_file(env)


def owner_only(where: str | Path) -> bool:
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
    try:  # noqa: SIM105 -- contextlib is not imported on the front's path
        where.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = os.lstat(where)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(f"{where} is not a directory of this user's")
    if info.st_mode & 0o077:
        os.chmod(where, 0o700)


def peer_uid(conn: _socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end (``SO_PEERCRED``: three C ints)."""
    creds = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 3 * _INT)
    return (
        int.from_bytes(creds[:_INT], sys.byteorder, signed=True),
        int.from_bytes(creds[_INT : 2 * _INT], sys.byteorder, signed=False),
    )


def package_root() -> str:
    """The folder holding the ``korg_bridge`` package this process imported, links resolved."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def code_identity() -> str:
    """Which installation this process runs: the interpreter, its prefix, the package's folder.

    The front sends this, not a walk over the package's files: an engine answers only while its
    watch over those files (:mod:`.codewatch`) has seen no change since it loaded them, so an
    engine started before an upgrade or an edit stops answering the moment the files change. The
    walk (:func:`code_fingerprint`, 3 ms) was a tenth of a whole call.
    """
    return f"{sys.version}\n{sys.prefix}\n{package_root()}"


def code_fingerprint(root: str | None = None) -> str:
    """What the code is: the interpreter, and every file of the package (this process's, or the
    one in ``root``) by name, size and mtime.

    Stats, not contents, and ``zlib``'s checksums rather than ``hashlib``. What an engine compares
    its package with on each call where it has no inotify watch over it (:mod:`.codewatch`); shown
    in ``engine.json``. The checksums guard against accidents (an edit, an upgrade, another venv),
    not an adversary: whoever can write the package's files runs their own code anyway.
    """
    root = root or package_root()
    parts = [f"{sys.version}\0{sys.prefix}\0{root}"]
    for path, info in package_files(root):
        parts.append(f"{path[len(root) :]}\0{info.st_size}\0{info.st_mtime_ns}")
    listing = "\n".join(parts).encode("utf-8", "surrogateescape")
    import zlib

    return f"{zlib.crc32(listing):08x}{zlib.adler32(listing):08x}{len(parts):04x}"


def package_files(root: str) -> list[tuple[str, os.stat_result]]:
    """Every file under ``root`` but compiled bytecode, with its ``stat``, in a fixed order."""
    found: list[tuple[str, os.stat_result]] = []
    for folder in package_folders(root):
        try:
            with os.scandir(folder) as listed:
                entries = sorted(listed, key=lambda item: item.name)
        except OSError:
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False) and not entry.name.endswith((".pyc", ".pyo")):
                    found.append((entry.path, entry.stat()))
            except OSError:
                continue
    return found


def package_folders(root: str) -> list[str]:
    """``root`` and every folder below it but ``__pycache__``, links not followed, depth first."""
    found: list[str] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        found.append(folder)
        try:
            with os.scandir(folder) as listed:
                subs = sorted(
                    entry.path
                    for entry in listed
                    if entry.name != "__pycache__" and entry.is_dir(follow_symlinks=False)
                )
        except OSError:
            continue
        pending.extend(reversed(subs))
    return found


def version() -> str:
    from korg_bridge._version import __version__

    return __version__


# --- handing a call over -----------------------------------------------------------------------


def connect(where: str | Path) -> _socket.socket | None:
    """A connection to the engine in ``where``, if one of ours listens there."""
    path = os.path.join(where, SOCKET_NAME)
    if len(os.fsencode(path)) > SUN_PATH_MAX or not owner_only(where):
        return None
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_S)
        conn.connect(path)
        if peer_uid(conn)[1] != os.getuid():
            raise PermissionError("the engine runs as another user")
    except OSError:
        conn.close()
        return None
    return conn
