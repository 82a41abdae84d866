"""What the front half and the engine share: the wire (frames of one kind byte, a 4-byte
big-endian length and a JSON body), where an engine lives beside the index, who may talk to it,
and what makes two installations the same code. Standard library only: the front imports it on
every call before anything else.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import sys
import zlib
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on the engine's front path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "ACCEPT",
    "EXIT",
    "GO",
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
    "configured_store",
    "connect",
    "engine_dir",
    "frame",
    "make_dir",
    "peer_uid",
    "read_frame",
    "version",
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
    try:  # noqa: SIM105 -- contextlib is not imported on the front's path
        where.mkdir(mode=0o700)
    except FileExistsError:
        pass
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
        try:
            with os.scandir(folder) as found:
                entries = sorted(found, key=lambda item: item.name)
        except OSError:
            continue
        for entry in entries:  # (try/except, not contextlib: the front imports as little as it can)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(entry.path)
                elif not entry.name.endswith((".pyc", ".pyo")):
                    info = entry.stat()
                    parts.append(f"{entry.path[len(root) :]}\0{info.st_size}\0{info.st_mtime_ns}")
            except OSError:
                continue
    listing = "\n".join(parts).encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(listing):08x}{zlib.adler32(listing):08x}{len(parts):04x}"


def version() -> str:
    from korg_bridge._version import __version__

    return __version__


# --- handing a call over -----------------------------------------------------------------------


def connect(where: Path) -> socket.socket | None:
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
