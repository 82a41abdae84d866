"""Drift reload: notice a rebuilt binary and serve its new tools without a restart.

A cheap poll of the executable's identity (where its symlinks lead, size,
mtime, inode) every :data:`POLL_INTERVAL` seconds, and again before answering
``tools/list``. Only when it changed do we re-run ``--introspect``; only when
the document's content changed do we swap the catalogue. A failed
re-introspection keeps the old catalogue and logs why: a half-written binary
mid-build must not take the tools away.

A binary that rewrites itself whenever it is introspected would otherwise be
re-introspected on every poll forever; while re-introspection keeps finding
nothing new, the watch backs off (the wait doubles, up to
:data:`MAX_BACKOFF`), and it is back to every poll once a real change was
served or the binary has stayed put for a poll. If it also prints a new
document every time (a timestamp in it), every look is a "real change": so a
reload that follows a reload without the binary having stayed put in between
backs off too, and such a binary is reloaded at most once per back-off period
(its clients told of a change each time), not on every poll.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio

from korg_bridge.bridge.contract import Document
from korg_bridge.bridge.discovery import DEFAULT_DISCOVERY_TIMEOUT, discover
from korg_bridge.errors import KorgError

log = logging.getLogger(__name__)

POLL_INTERVAL = 2.0
"""Seconds between identity checks: a stat call, far cheaper than re-running the binary."""

MAX_BACKOFF = 60.0
"""Longest wait between re-introspections of a binary that keeps changing on disk
without changing its document (one that rewrites itself when introspected)."""


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What we compare to decide the binary may have changed.

    ``target`` is where the path leads once every symlink on the way (the
    file itself, or a folder above it) is followed: a package manager that
    repoints a link at a new version changes it even when the new file has
    the old one's size and mtime and the file system reuses the old inode.
    """

    target: str
    size: int
    mtime_ns: int
    inode: int
    dev: int

    @classmethod
    def of(cls, path: str) -> FileStamp | None:
        try:
            target = os.path.realpath(path, strict=True)
            st = os.stat(target)
        except OSError:  # gone, a dangling link, or a link loop
            return None
        return cls(target, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


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
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        self.binary = binary
        self.document = document
        self.discovery_timeout = discovery_timeout
        self.env = env
        self.poll_interval = poll_interval
        self._path = document.path or binary
        self._stamp = FileStamp.of(self._path)
        self._fingerprint = document_fingerprint(document)
        self._lock = anyio.Lock()
        self._backoff = 0.0
        self._not_before = 0.0
        self._reloaded = False
        """The last look served a change, and the binary has not stayed put since."""

    @property
    def backoff(self) -> float:
        """Seconds the watch now waits between re-introspections; 0 when it checks every poll."""
        return self._backoff

    async def check(self) -> bool:
        """Re-introspect if the executable changed; ``True`` when the document changed."""
        async with self._lock:
            if time.monotonic() < self._not_before:
                return False
            stamp = FileStamp.of(self._path)
            if stamp == self._stamp:
                self._backoff = 0.0  # it stayed put: the next change is a real one
                self._reloaded = False
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
                self._back_off()
                return False
            fingerprint = document_fingerprint(document)
            if fingerprint == self._fingerprint:
                self._back_off()
                return False
            self._fingerprint = fingerprint
            self.document = document
            if self._reloaded:  # changed again at once: a document that differs on every run
                self._back_off()
            else:  # a rebuild: watched every poll again
                self._backoff = self._not_before = 0.0
            self._reloaded = True
            log.warning("%s changed: reloaded %d tool(s)", self.binary, len(document.callables))
            return True

    def _back_off(self) -> None:
        """The file changed but the tools did not: wait twice as long before the next look."""
        self._backoff = min(MAX_BACKOFF, max(self._backoff, self.poll_interval) * 2)
        self._not_before = time.monotonic() + self._backoff
        log.debug("%s changed on disk but not its tools; next look in %gs", self.binary, self._backoff)


async def poll_forever(check: Callable[[], Awaitable[object]], interval: float = POLL_INTERVAL) -> None:
    """Run ``check`` every ``interval`` seconds until cancelled; errors are logged, never fatal."""
    while True:
        await anyio.sleep(interval)
        try:
            await check()
        except Exception:  # a watcher must never take the server down
            log.exception("drift check failed")
