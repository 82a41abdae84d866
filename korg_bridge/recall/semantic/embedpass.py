"""One embedding pass: the events without a vector, newest first, into the vector store.

Who runs it: ``korg-recall index`` in the foreground, and the background
indexer (:mod:`korg_bridge.recall.semantic.indexer`) — never a query, which embeds
only itself.

* **Slices, each its own transaction.** Events go in slices of
  :data:`SLICE_EVENTS`, newest first; each slice's vectors are stored in one
  short ``BEGIN IMMEDIATE`` transaction, so a pass killed at any moment loses
  at most the slice in flight, and the next pass resumes with what is still
  missing. In that transaction the pass checks that each event's text is
  still the one it embedded and that no other process stored the event
  meanwhile; ``on_commit`` lets the indexer record its progress in the same
  transaction.
* **Identical texts once.** A history repeats itself (the same ``git
  status``, the same "The file has been updated."): vectors are kept by a
  hash of their text in a bounded LRU (:data:`CACHE_ROWS` vectors, about
  30 MB), so a text seen earlier in the pass costs nothing. Measured on the
  bench's mixed history: half the events need no model call.
* **Empty texts cost nothing.** An event with nothing to read (an empty
  result, a bare marker) gets a zero vector: it counts as embedded and never
  matches.
* **Who embedded what.** Each transaction adds its count to
  ``meta.embedded_by`` under the pass's ``role`` (``index``, ``indexer``), so
  a test can tell that no query ever embedded an event.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.ingest.event import Event
from korg_bridge.recall.history.ingest.rows import load_json
from korg_bridge.recall.semantic.embedtext import embed_text, embed_windows
from korg_bridge.recall.semantic.model import Embedder
from korg_bridge.recall.semantic.vectors import append, drop_stale, embedded_ids, missing_ids

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = ["CACHE_ROWS", "SLICE_EVENTS", "EmbedReport", "embed_pending", "embedded_by", "event_texts"]

logger = logging.getLogger(__name__)

SLICE_EVENTS = 512
"""Events per slice (and per transaction): ~0.3-1 s of embedding on two cores, so a kill loses
little, while batches still find texts of like lengths to share."""
CACHE_ROWS = 20_000
"""Vectors kept by text hash across a pass: 30 MB at 384 dimensions."""

OnCommit = Callable[[sqlite3.Connection, "EmbedReport"], None]


@dataclass
class EmbedReport:
    """What one :func:`embed_pending` call did."""

    model_id: str
    dim: int
    embedded: int = 0
    """Events embedded and stored by this call."""
    pending: int = 0
    """Events still without a vector for this model afterwards (budget spent, or stopped)."""
    dropped: int = 0
    """Events whose stale vectors were removed (changed or deleted events)."""
    duration_s: float = 0.0
    cpu_s: float = 0.0
    """CPU time of this process over the pass (all threads): unlike wall time, barely moved by load."""
    texts: int = 0
    """Distinct texts the model read (the rest were repeats or empty)."""
    tokens: int = 0
    """Tokens the model read, when the embedder counts them."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the throughput (events per second spent embedding)."""
        rate = self.embedded / self.duration_s if self.duration_s > 0 else 0.0
        return {
            "model": self.model_id,
            "dim": self.dim,
            "embedded": self.embedded,
            "not_embedded": self.pending,
            "dropped_stale": self.dropped,
            "embed_s": round(self.duration_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "events_per_s": round(rate, 1),
            "texts_embedded": self.texts,
        }


class _Cache:
    """Window vectors by text hash, least recently used out first, at most ``limit`` rows."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rows = 0
        self._items: OrderedDict[bytes, NDArray[numpy.float32]] = OrderedDict()

    def get(self, key: bytes) -> NDArray[numpy.float32] | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: bytes, matrix: NDArray[numpy.float32]) -> None:
        if key in self._items:
            return
        self._items[key] = matrix
        self.rows += len(matrix)
        while self.rows > self.limit and self._items:
            _, dropped = self._items.popitem(last=False)
            self.rows -= len(dropped)


def _key(text: str, windows: int) -> bytes:
    return hashlib.blake2b(f"{windows}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).digest()


def event_texts(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
    """Each existing event of ``ids``: its head (what staleness is judged by), the text the model
    reads (:func:`~korg_bridge.recall.semantic.embedtext.embed_text`) and its most windows."""
    marks = ", ".join("?" * len(ids))
    sql = f"SELECT id, text, tool, args, result FROM events WHERE id IN ({marks})"
    out: dict[int, tuple[str, str, int]] = {}
    for event_id, text, tool, args, result in conn.execute(sql, list(ids)):
        event = Event(
            source="", offset=0, seq=0, shape="", tool=tool, args=load_json(args), result=load_json(result)
        )
        out[int(event_id)] = (str(text), embed_text(event), embed_windows(tool))
    return out


def embedded_by(conn: sqlite3.Connection) -> dict[str, int]:
    """Events embedded so far, by who embedded them (``index``, ``indexer``)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'embedded_by'").fetchone()
    try:
        value = json.loads(row[0]) if row else {}
    except ValueError:
        value = {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, int)} if isinstance(value, dict) else {}


def _vectors(
    embedder: Embedder, found: dict[int, tuple[str, str, int]], cache: _Cache, report: EmbedReport
) -> dict[int, NDArray[numpy.float32]]:
    """Each event's window vectors: from the cache, zeros for an empty text, else the model."""
    import numpy as np

    out: dict[int, NDArray[np.float32]] = {}
    wanted: dict[bytes, tuple[str, int]] = {}
    for event_id, (_head, text, windows) in found.items():
        if not text.strip():
            out[event_id] = np.zeros((1, embedder.dim), dtype=np.float32)
            continue
        key = _key(text, windows)
        if cache.get(key) is None:
            wanted.setdefault(key, (text, windows))
    if wanted:
        keys = list(wanted)
        before = getattr(embedder, "tokens", 0)
        matrix, owner = embedder.embed_windows([wanted[k][0] for k in keys], [wanted[k][1] for k in keys])
        report.tokens += int(getattr(embedder, "tokens", 0)) - int(before)
        report.texts += len(keys)
        for position, key in enumerate(keys):
            cache.put(key, matrix[owner == position])
    for event_id, (_head, text, windows) in found.items():
        if event_id not in out:
            hit = cache.get(_key(text, windows))
            if hit is None:  # evicted within this slice: only with a cache smaller than a slice
                hit = embedder.embed_windows([text], [windows])[0]
            out[event_id] = hit
    return out


def _store(
    index: Index,
    embedder: Embedder,
    heads: dict[int, str],
    vectors: dict[int, NDArray[numpy.float32]],
    watermark: int,
    role: str,
    report: EmbedReport,
    on_commit: OnCommit | None,
) -> tuple[int, int]:
    """Store what is still valid in one short transaction; return ``(stored, new watermark)``.

    A row is dropped when its event's head changed or vanished while it was
    being embedded, or when another process stored the event meanwhile (in a
    chunk above ``watermark``, the highest chunk id this process has seen).
    """
    import numpy as np

    ids = sorted(vectors)
    marks = ", ".join("?" * len(ids))
    with index.write() as conn:
        current = dict(conn.execute(f"SELECT id, text FROM events WHERE id IN ({marks})", ids).fetchall())
        stale = {
            row[0]
            for row in conn.execute(f"SELECT event_id FROM vector_stale WHERE event_id IN ({marks})", ids)
        }
        others = set(embedded_ids(conn, embedder.model_id, embedder.dim, after=watermark).tolist())
        keep = [
            event_id
            for event_id in ids
            if current.get(event_id) == heads[event_id] and event_id not in stale and event_id not in others
        ]
        if keep:
            rows = [vectors[event_id] for event_id in keep]
            owners = np.repeat(np.asarray(keep, dtype=np.int64), [len(matrix) for matrix in rows])
            append(conn, embedder.model_id, embedder.dim, owners, np.concatenate(rows))
            counts = embedded_by(conn)
            counts[role] = counts.get(role, 0) + len(keep)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('embedded_by', ?)",
                (json.dumps(counts, sort_keys=True),),
            )
        report.embedded += len(keep)
        if on_commit is not None:
            on_commit(conn, report)
        top = conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0]
    return len(keep), int(top or 0)


def embed_pending(
    index: Index,
    embedder: Embedder,
    *,
    budget_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    role: str = "index",
    on_commit: OnCommit | None = None,
    stop: Callable[[], bool] | None = None,
    slice_events: int = SLICE_EVENTS,
) -> EmbedReport:
    """Embed the events that have no vector for ``embedder``'s model, newest first.

    With ``budget_s``, no new slice starts once that many seconds have passed;
    ``stop()`` is asked before each slice too (the indexer's handover).
    ``progress(done, total)`` is called after each slice.

    Raises:
        KorgError: the index stays locked past the busy timeout, or SQLite fails.
    """
    started, cpu_started = time.monotonic(), time.process_time()
    deadline = None if budget_s is None else started + budget_s
    report = EmbedReport(embedder.model_id, embedder.dim)
    report.dropped = drop_stale(index)
    watermark = int(
        index.read(lambda conn: conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0]) or 0
    )
    missing = index.read(lambda conn: missing_ids(conn, embedder.model_id, embedder.dim)).tolist()
    cache = _Cache(CACHE_ROWS)
    done = 0
    for start in range(0, len(missing), slice_events):
        if (deadline is not None and time.monotonic() >= deadline) or (stop is not None and stop()):
            break
        wanted = missing[start : start + slice_events]
        found = index.read(functools.partial(event_texts, ids=wanted))
        if found:
            vectors = _vectors(embedder, found, cache, report)
            heads = {event_id: found[event_id][0] for event_id in found}
            _, watermark = _store(index, embedder, heads, vectors, watermark, role, report, on_commit)
        done += len(wanted)
        if progress is not None:
            progress(done, len(missing))
    report.pending = max(0, len(missing) - report.embedded)
    report.duration_s = time.monotonic() - started
    report.cpu_s = time.process_time() - cpu_started
    logger.debug(
        "embedded %d event(s) for %s, %d pending", report.embedded, embedder.model_id, report.pending
    )
    return report
