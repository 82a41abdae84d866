"""Linux inotify through ctypes: the engine's two watches (the memory mirror's folders, its own
code) are told of every change in a folder the moment the system call that made it returns."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

__all__ = [
    "IN_ATTRIB",
    "IN_CLOSE_WRITE",
    "IN_CREATE",
    "IN_DELETE",
    "IN_DELETE_SELF",
    "IN_IGNORED",
    "IN_ISDIR",
    "IN_MODIFY",
    "IN_MOVED_FROM",
    "IN_MOVED_TO",
    "IN_MOVE_SELF",
    "IN_Q_OVERFLOW",
    "MASK",
    "Inotify",
]

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW
)  # fmt: skip
_EVENT = struct.Struct("iIII")


class Inotify:
    """The three calls of libc's inotify, through ctypes (the standard library has no binding)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        self._init = libc.inotify_init1
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.fd = self._init(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")

    def add(self, folder: str) -> int:
        wd = int(self._add(self.fd, os.fsencode(folder), MASK))
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder} failed")
        return wd

    def events(self) -> list[tuple[int, int, str]]:
        """``(wd, mask, name)`` of every pending event (none: an empty list)."""
        out: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return out
            if not data:
                return out
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
                raw = data[at + _EVENT.size : at + _EVENT.size + size]
                out.append((wd, mask, os.fsdecode(raw.rstrip(b"\0"))))
                at += _EVENT.size + size
