"""Live updates: new memories, pending approvals and newly indexed events reach open pages as
server-sent events (``GET /api/v1/events``), and a background tick keeps the history index fresh.

Each stream looks at its caller's store and index every :data:`POLL_S` (at once after a write
made in the console) and sends what changed since it last looked:

* ``event: memory`` -- ``{"memories": [summary…]}``, new or changed memories (newest row first);
* ``event: pending`` -- ``{"count": n}``, when the number of proposals awaiting approval changed;
* ``event: events`` -- ``{"added": n, "newest": "e123"}``, history indexed since.

A ``: keep-alive`` comment every :data:`KEEPALIVE_S` keeps proxies from closing an idle stream.
A stream reads through the caller's tenant like every other request: one tenant never hears of
another's memories. Looking costs two indexed ``max()`` queries, so a poll is cheap; the seam
for a push (the memory write path's after-commit notifications, once they land) is
:meth:`~.warm.Warm.notify`, which wakes every stream at once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from korg_bridge.errors import KorgError

if TYPE_CHECKING:
    from korg_bridge.recall.console.core import Caller
    from korg_bridge.recall.console.core import Core as Console
    from korg_bridge.recall.memory.backend.protocols import Store

__all__ = ["Indexer", "changes", "stream"]

log = logging.getLogger(__name__)

POLL_S = 0.25
"""How often an open stream looks for changes: well inside the one second a person notices."""
KEEPALIVE_S = 15.0
INDEX_EVERY_S = 3.0
"""How often the background tick brings the history index up to date (a no-op refresh stats the
sources and reads nothing)."""
NEW_MAX = 20
"""Memories one ``memory`` event carries at most (the newest)."""


def changes(
    console: Console, caller: Caller, since: Mapping[str, int] | None
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The caller's marks now, and the changes since ``since`` (see the module docstring)."""
    from korg_bridge.recall.console import memview
    from korg_bridge.recall.memory.rows import select_versions

    marks: dict[str, int] = {"row": 0, "pending": 0, "event": 0}
    found: list[dict[str, Any]] = []
    newest_rows: list[Any] = []
    if console.store_exists(caller):
        old_row = since["row"] if since else None

        def look(store: Store) -> tuple[int, int, list[Any]]:
            with store.reading() as conn:
                row = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM memory").fetchone()[0])
                waiting = memview.pending_count_in(conn)
                rows = []
                if old_row is not None and row > old_row:
                    rows = select_versions(
                        conn,
                        "rowid > ? AND state <> 'purged' ORDER BY rowid DESC LIMIT ?",
                        (old_row, NEW_MAX),
                    )
            return row, waiting, rows

        marks["row"], marks["pending"], newest_rows = console.with_store(caller, look)
    try:
        marks["event"] = _newest_event(console, caller)
    except KorgError as exc:
        log.debug("live: history index not read: %s", exc.message)
    if since is None:
        return marks, found
    if newest_rows:
        now = time.time()
        found.append({"type": "memory", "memories": [memview.summary(v, now) for v in newest_rows]})
    if marks["pending"] != since.get("pending"):
        found.append({"type": "pending", "count": marks["pending"]})
    if marks["event"] > since.get("event", 0):
        found.append(
            {
                "type": "events",
                "added": marks["event"] - since.get("event", 0),
                "newest": f"e{marks['event']}",
            }
        )
    return marks, found


def _newest_event(console: Console, caller: Caller) -> int:
    def work(conn: Any) -> int:
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0])

    env = console.env_for(caller)
    return console.warm.with_index(caller.warm_key, env, lambda index: index.read(work))


async def stream(console: Console, caller: Caller, stopping: anyio.Event) -> AsyncIterator[bytes]:
    """The bytes of one SSE stream until the client leaves or the server stops."""
    marks, _ = await anyio.to_thread.run_sync(changes, console, caller, None)
    yield b"retry: 2000\n\n"
    seen_generation = console.warm.generation
    quiet = 0.0
    while not stopping.is_set():
        waited = 0.0
        while waited < POLL_S and console.warm.generation == seen_generation and not stopping.is_set():
            await anyio.sleep(0.05)
            waited += 0.05
        if stopping.is_set():
            break
        seen_generation = console.warm.generation
        try:
            marks, found = await anyio.to_thread.run_sync(changes, console, caller, marks)
        except KorgError as exc:
            log.info("live: %s", exc.message)
            found = []
        for item in found:
            kind = item.pop("type")
            yield f"event: {kind}\ndata: {json.dumps(item, ensure_ascii=True)}\n\n".encode()
        quiet = 0.0 if found else quiet + POLL_S
        if quiet >= KEEPALIVE_S:
            quiet = 0.0
            yield b": keep-alive\n\n"


class Indexer:
    """The background tick: brings the history index up to date for every caller seen lately, so
    newly written transcripts show on open pages without anyone searching first."""

    def __init__(self, console: Console) -> None:
        self.console = console

    async def run(self, stopping: anyio.Event) -> None:
        from korg_bridge.recall.console import history

        while not stopping.is_set():
            for caller in list(self.console.callers.values()):
                try:
                    await anyio.to_thread.run_sync(history.refresh, self.console, caller)
                except KorgError as exc:
                    log.info("background indexing for %s: %s", caller.warm_key, exc.message)
            with anyio.move_on_after(INDEX_EVERY_S):
                await stopping.wait()
