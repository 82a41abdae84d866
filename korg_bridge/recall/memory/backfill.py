"""The memories' vectors filled in behind the writes: the background indexer's ``--memory`` pass.

What is written without a model in the process -- hand edits of the mirror and Claude
Code's files, taken in before any read; imports, which never wait for embedding; memories
from before a model was installed -- is embedded here, newest first, a slice of
:data:`SLICE_ROWS` per transaction (a kill loses one slice; the next run resumes with what
is still missing). It runs as ``python -m korg_bridge.recall.memory.backfill``, detached
and niced like the history indexer (:func:`~korg_bridge.recall.semantic.indexer.spawn_indexer`),
with the store its environment names (``KORG_RECALL_STORE``; for a team store the tenant),
under an exclusive ``flock`` of its own beside the index: ``memory-embed-<digest>.lock``,
one per store and tenant (the cache folder is ours; a store's folder holds user data only),
its log beside it. :func:`start_memory` spawns it unless one runs or
``KORG_RECALL_BACKGROUND=0``; ``recall`` does when the scopes it read hold live memories
without a vector (after answering), ``import`` after writing (:func:`fill_later`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError
from korg_bridge.recall.memory.embedding import coverage, embed_text
from korg_bridge.recall.semantic.indexer import (
    MAX_RUN_S,
    Lock,
    background_enabled,
    held,
    run_detached,
    spawn_indexer,
)

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store
    from korg_bridge.recall.semantic.model import Embedder

__all__ = [
    "SLICE_ROWS",
    "fill_later",
    "fill_missing",
    "memory_indexer_running",
    "memory_lock_path",
    "run_memory",
    "start_memory",
    "vector_stats",
]

logger = logging.getLogger(__name__)

SLICE_ROWS = 64
"""Memories the background pass embeds per transaction: well under a second of model time, so a
kill loses little and a writer waits little for the store."""


def memory_lock_path(env: Mapping[str, str]) -> Path:
    """The memory indexer's lock for the store (and tenant) ``env`` names, beside the index: the
    cache folder is ours, and a store's folder holds user data only.

    Raises:
        ConfigError: ``KORG_RECALL_STORE`` names a URL of another scheme.
    """
    import hashlib

    from korg_bridge.recall.paths import index_path, store_location
    from korg_bridge.recall.tenancy import tenant_from

    where = store_location(env)
    index = index_path(env)
    tenant = (tenant_from(env) or "") if where.is_url else ""
    identity = f"{where.label}\0{tenant}"
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return index.with_name(f"memory-embed-{digest}.lock")


def start_memory(env: Mapping[str, str]) -> str:
    """Start the background indexer for the memories of the store ``env`` names unless one runs:
    ``started``, ``running``, ``off`` or ``failed``, as :func:`start`.

    Raises:
        ConfigError: ``KORG_RECALL_STORE`` names a URL of another scheme.
    """
    if not background_enabled(env):
        return "off"
    lock = memory_lock_path(env)
    if held(lock, lock_file=lock):
        return "running"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        logger.warning("korg-recall: cannot make %s for the memory indexer: %s", lock.parent, exc)
        return "failed"
    return spawn_indexer(__name__, [], lock.with_suffix(".log"), dict(env), lock)


def memory_indexer_running(env: Mapping[str, str]) -> bool:
    """True while a memory indexer runs for the store (and tenant) ``env`` names."""
    lock = memory_lock_path(env)
    return held(lock, lock_file=lock)


def run_memory(env: Mapping[str, str]) -> int:
    """Embed every live memory without a vector in the store ``env`` names, under the memory lock;
    the ``--memory`` process's body (and what a test or bench runs in process).

    Returns 0 when done, when another one runs or when there is no store; 1 when the model cannot
    be loaded.

    Raises:
        KorgError: the store cannot be opened or written.
    """
    from korg_bridge.recall.memory.backend.factory import open_store, store_exists
    from korg_bridge.recall.semantic.modes import shared_embedder

    lock_file = memory_lock_path(env)
    with contextlib.suppress(OSError):  # if it cannot be made, taking the lock says so
        lock_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with Lock(lock_file, lock_file=lock_file) as lock:
        if not lock.acquire():
            return 0
        if not store_exists(env):  # never creates a store
            return 0
        try:
            embedder = shared_embedder(env)
        except KorgError as exc:
            logger.error("korg-recall memory indexer: %s", exc.message)
            return 1
        started = time.time()
        with open_store(env) as store:
            stored = fill_missing(store, embedder, budget_s=MAX_RUN_S, stop=lambda: not lock.still_ours())
        logger.info(
            "korg-recall memory indexer %d: %d memory version(s) embedded in %.1f s",
            os.getpid(),
            stored,
            time.time() - started,
        )
    return 0


def fill_later(env: Mapping[str, str]) -> str | None:
    """Start the background indexer for the memories of the store ``env`` names, when a model is
    on disk (after writes that embedded nothing: an import, hand edits taken in before a recall).
    Never raises; returns what :func:`start_memory` said, or None."""
    from korg_bridge.recall.semantic.model import model_available

    if not model_available(env):
        return None
    try:
        return start_memory(env)
    except KorgError as exc:
        logger.info("memory vectors: the background indexer was not started: %s", exc.message)
        return None


_STILL_MISSING = (
    "SELECT m.rowid FROM memory m WHERE m.rowid IN ({marks}) AND m.superseded_by IS NULL "
    "AND m.state IN ('live', 'pending') AND NOT EXISTS "
    "(SELECT 1 FROM memory_vectors v WHERE v.row = m.rowid AND v.model_id = ? AND v.dim = ?)"
)


def fill_missing(
    store: Store,
    embedder: Embedder,
    *,
    budget_s: float | None = None,
    stop: Callable[[], bool] | None = None,
    slice_rows: int = SLICE_ROWS,
) -> int:
    """Embed every live or pending head without a vector for ``embedder``'s model, newest first,
    a slice per transaction; return how many were stored. With ``budget_s`` no slice starts
    after that many seconds; ``stop()`` is asked before each slice.

    A row that changed meanwhile (superseded, purged) or that another process embedded is
    left as it is: the slice's transaction looks again before it stores anything.

    Raises:
        KorgError: the store cannot be read or written.
    """
    started = time.monotonic()
    stored = 0
    skipped: set[int] = set()
    while True:
        if (budget_s is not None and time.monotonic() - started >= budget_s) or (stop is not None and stop()):
            break
        with store.reading() as tx:
            found = tx.vectors.missing(tx, None, embedder.model_id, embedder.dim, slice_rows + len(skipped))
        rows = [row for row in found if row[0] not in skipped][:slice_rows]
        if not rows:
            break
        computed = embedder.embed([embed_text(title, body) for _, title, body in rows])
        wanted = {rowid: computed[position] for position, (rowid, _, _) in enumerate(rows)}
        with store.write() as tx:
            marks = ", ".join("?" * len(wanted))
            sql = _STILL_MISSING.format(marks=marks)
            still = {int(row[0]) for row in tx.execute(sql, (*wanted, embedder.model_id, embedder.dim))}
            for rowid, vector in wanted.items():
                if rowid in still:
                    tx.vectors.put(tx, rowid, embedder.model_id, embedder.dim, vector)
                    stored += 1
                else:
                    skipped.add(rowid)
    return stored


def vector_stats(store: Store, env: Mapping[str, str]) -> dict[str, Any] | None:
    """What ``stats`` shows of the memories' vectors: coverage for the configured model, and
    whether the background indexer runs; None without a model on disk."""
    from korg_bridge.recall.memory.backfill import memory_indexer_running

    with store.reading() as tx:
        found = coverage(tx, env)
    if found is None:
        return None
    return {**found.to_dict(), "indexer_running": memory_indexer_running(env)}


def main() -> int:
    """``python -m korg_bridge.recall.memory.backfill``: what :func:`start_memory` spawns."""
    return run_detached(lambda: run_memory(os.environ))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
