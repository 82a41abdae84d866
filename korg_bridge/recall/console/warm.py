"""Stores and history indexes opened once and kept: the console answers in milliseconds, not in
the tens of milliseconds that opening (and checking) a database costs.

A SQLite connection belongs to the thread that opened it, and a psycopg connection serves one
transaction at a time. So each tenant gets a **lane**: one thread that owns that tenant's store
and index connections and runs every piece of work on them, in order (SQLite has one writer at a
time anyway). A tenant's lane never serves another (the key is the caller's
:attr:`~.services.Caller.warm_key`). Work already on a lane (a service calling another) runs in
place. A team store's connection that dropped is opened anew; a read that saw it drop runs once
more. :meth:`Warm.close` closes every connection on its own thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from korg_bridge.errors import ConnectionDropped, KorgError

if TYPE_CHECKING:
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.memory.backend.protocols import Store

__all__ = ["Warm"]

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_LANES = 64
"""Tenants with a lane at once; past it the least recently used lane is closed (its connections
are opened again when that tenant comes back)."""


class _Lane:
    def __init__(self, key: str) -> None:
        self.key = key
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"console-{key[:24]}")
        self.thread: threading.Thread | None = None
        self.store: Store | None = None
        self.index: Index | None = None

    def run(self, work: Callable[[], T]) -> T:
        if threading.current_thread() is self.thread:
            return work()

        def job() -> T:
            self.thread = threading.current_thread()
            return work()

        return self.executor.submit(job).result()

    def close(self) -> None:
        def shut() -> None:
            for item in (self.store, self.index):
                if item is not None:
                    try:
                        item.close()
                    except Exception as exc:  # closing must not hide the shutdown's own errors
                        log.debug("closing %s: %s", self.key, exc)
            self.store = self.index = None

        try:
            self.executor.submit(shut).result()
        finally:
            self.executor.shutdown(wait=True)


class Warm:
    """The lanes, and a change counter live updates watch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}
        self.generation = 0
        """Bumped by every console write: live streams look at once instead of at their next poll."""

    def notify(self) -> None:
        with self._lock:
            self.generation += 1

    def _lane(self, key: str) -> _Lane:
        old: _Lane | None = None
        with self._lock:
            lane = self._lanes.pop(key, None) or _Lane(key)
            self._lanes[key] = lane  # most recently used last
            if len(self._lanes) > MAX_LANES:
                oldest = next(iter(self._lanes))
                old = self._lanes.pop(oldest)
        if old is not None:
            old.close()
        return lane

    async def call(self, key: str, work: Callable[[], T]) -> T:
        """Await ``work`` run on ``key``'s store lane: one hop from the event loop to the thread
        that owns the caller's connections and back, where a worker thread in between would add
        two (each a scheduler wake-up, which a loaded machine makes costly)."""
        lane = self._lane(f"store:{key}")

        def job() -> T:
            lane.thread = threading.current_thread()
            return work()

        return await asyncio.wrap_future(lane.executor.submit(job))

    def with_store(self, key: str, env: Mapping[str, str], work: Callable[[Store], T], *, retry: bool) -> T:
        """Run ``work`` on the store of ``key``'s lane (opened from ``env`` when missing).

        Raises:
            KorgError: from opening the store or from ``work``.
        """
        lane = self._lane(f"store:{key}")

        def job() -> T:
            for attempt in (1, 2):
                if lane.store is None:
                    from korg_bridge.recall.memory.backend.factory import open_store

                    lane.store = open_store(env)
                store = lane.store
                try:
                    return work(store)
                except ConnectionDropped:
                    _drop_store(lane)
                    if not retry or attempt == 2:
                        raise
                    log.info("memory store connection dropped; reading again on a new one")
                except KorgError:
                    raise
                except BaseException:
                    _drop_store(lane)  # a connection in an unknown state is not reused
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

        return lane.run(job)

    def with_index(self, key: str, env: Mapping[str, str], work: Callable[[Index], T]) -> T:
        """Run ``work`` on ``key``'s history index, behind the walls of its tenant (if any).

        Raises:
            ConfigError: the index cannot be opened, or a bad tenant ledgers file.
            KorgError: from ``work``.
        """
        lane = self._lane(f"index:{key}")  # a long refresh never holds up memory reads

        def job() -> T:
            if lane.index is None:
                from korg_bridge.recall.history.index import Index
                from korg_bridge.recall.history.walls import history_of
                from korg_bridge.recall.paths import index_path

                lane.index = Index(index_path(env), history_of(env))
            return work(lane.index)

        return lane.run(job)

    def close(self) -> None:
        """Close every lane's connections on its own thread, and the lanes."""
        with self._lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            lane.close()


def _drop_store(lane: _Lane) -> None:
    store, lane.store = lane.store, None
    if store is not None:
        try:
            store.close()
        except Exception as exc:  # the connection is gone already
            log.debug("closing a dropped store: %s", exc)
