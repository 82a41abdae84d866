"""Drift reload: notice a rebuilt binary and serve its new tools without a restart.

A cheap poll of the executable's identity (size, mtime, inode) every
:data:`POLL_INTERVAL` seconds, and again before answering ``tools/list``.
Only when it changed do we re-run ``--introspect``; only when the document's
content changed do we swap the catalogue. A failed re-introspection keeps the
old catalogue and logs why: a half-written binary mid-build must not take
the tools away.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio

from .contract import Document
from .discovery import DEFAULT_DISCOVERY_TIMEOUT, discover
from .errors import KorgError

log = logging.getLogger(__name__)

POLL_INTERVAL = 2.0
"""Seconds between identity checks: a stat call, far cheaper than re-running the binary."""


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What we compare to decide the binary may have changed."""

    size: int
    mtime_ns: int
    inode: int
    dev: int

    @classmethod
    def of(cls, path: str) -> FileStamp | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return cls(st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def document_fingerprint(document: Document) -> str:
    return json.dumps(document.raw, sort_keys=True, separators=(",", ":"))


class Watch:
    """One bridged binary: its current document, and how to notice it changed."""

    def __init__(
        self,
        binary: str,
        document: Document,
        *,
        discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.binary = binary
        self.document = document
        self.discovery_timeout = discovery_timeout
        self.env = env
        self._path = document.path or binary
        self._stamp = FileStamp.of(self._path)
        self._fingerprint = document_fingerprint(document)
        self._lock = anyio.Lock()

    async def check(self) -> bool:
        """Re-introspect if the executable changed; ``True`` when the document changed."""
        async with self._lock:
            stamp = FileStamp.of(self._path)
            if stamp == self._stamp:
                return False
            # Remember the stamp even if discovery fails: the same broken build
            # is not retried every poll, and the next rebuild changes it again.
            self._stamp = stamp
            try:
                document = await discover(self.binary, timeout=self.discovery_timeout, env=self.env)
            except KorgError as exc:
                log.error(
                    "%s changed but re-introspection failed; keeping the old tools: %s", self.binary, exc
                )
                return False
            fingerprint = document_fingerprint(document)
            if fingerprint == self._fingerprint:
                return False
            self._fingerprint = fingerprint
            self.document = document
            log.warning("%s changed: reloaded %d tool(s)", self.binary, len(document.callables))
            return True


async def poll_forever(check: Callable[[], Awaitable[object]], interval: float = POLL_INTERVAL) -> None:
    """Run ``check`` every ``interval`` seconds until cancelled; errors are logged, never fatal."""
    while True:
        await anyio.sleep(interval)
        try:
            await check()
        except Exception:  # a watcher must never take the server down
            log.exception("drift check failed")
