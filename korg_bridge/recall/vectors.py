"""Embeddings stored in the recall index: computed once per event, read fast at query time.

Why it looks like this:

* **Chunks, not rows.** Vectors live in ``vector_chunks``: up to
  :data:`CHUNK_ROWS` events per row, their ids as one int64 BLOB and their
  vectors as one ``count x dim`` float32 BLOB (little-endian, rows
  L2-normalised). A query reads a few hundred BLOBs through SQLite's mmap and
  multiplies each in place with the query vector, so no 150 MB matrix is ever
  materialised. Measured on this 2-core machine at 100k x 384: one BLOB per
  event read with one query and ``b"".join`` took 270-450 ms (Python rows plus
  page faults on fresh memory); chunks of 256 with mmap take about 30 ms
  (45-55 ms for a process's first scan), and 1M vectors about 0.3 s. So:
  exact cosine over every vector, no approximate index.
* **Model identity.** ``model_id`` and ``dim`` sit beside every chunk; reads
  and writes are always for one model, so vectors of two models are never
  compared. Another model's vectors stay (switching back costs nothing) and
  the new model's are computed lazily, like any missing vector.
* **Staleness without touching the indexer.** Triggers (migration
  ``m004_vectors``) record in ``vector_stale`` every event whose text changes
  (a late tool result) or that is deleted (a file truncated or removed). Such
  ids are masked at query time; the next embedding pass drops them from their
  chunks, after which a changed event is simply missing and embedded again.
* **Bounded and concurrent.** Embedding is slow (35-60 events/s for real
  events on two cores, about 350/s for one-line prompts), so
  :func:`embed_pending` takes a time budget, embeds newest events first, and
  writes each chunk in its own short transaction, checking there that the
  text it embedded is still the event's and that no other process stored the
  event meanwhile.

numpy is imported inside the functions that need it: :func:`counts` (for
``stats``) works without the ``[semantic]`` extra.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.embed import INDEX_BATCH_SIZE, Embedder
from korg_bridge.recall.event import Event
from korg_bridge.recall.index import Index
from korg_bridge.recall.rows import load_json
from korg_bridge.recall.text import embed_text

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = [
    "CHUNK_ROWS",
    "EmbedReport",
    "counts",
    "drop_stale",
    "embed_pending",
    "embed_texts",
    "pending_count",
    "similarities",
]

logger = logging.getLogger(__name__)

CHUNK_ROWS = 256
"""Events per stored chunk: 384 KB at 384 dimensions. Measured best of 64-4096 for a 100k scan
(smaller chunks cost Python per row, larger ones cost fresh memory per BLOB)."""
MMAP_BYTES = 1 << 31
"""SQLite maps the index file for the vector scan: BLOBs are copied from the page cache once,
not read page by page. SQLite clamps it to its compile-time limit."""

_IDS = "<i8"
_FLOATS = "<f4"


@dataclass
class EmbedReport:
    """What one :func:`embed_pending` call did."""

    model_id: str
    dim: int
    embedded: int = 0
    """Events embedded and stored by this call."""
    pending: int = 0
    """Events still without a vector for this model afterwards (budget spent)."""
    dropped: int = 0
    """Stale vectors removed (changed or deleted events)."""
    duration_s: float = 0.0

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
            "events_per_s": round(rate, 1),
        }


def counts(index: Index) -> dict[str, int]:
    """Stored vectors per model id (stale ones included until the next embedding pass)."""
    rows = index.read(
        lambda conn: conn.execute(
            "SELECT model_id, sum(count) FROM vector_chunks GROUP BY model_id ORDER BY model_id"
        ).fetchall()
    )
    return {str(model): int(total) for model, total in rows}


def _embedded_ids(conn: sqlite3.Connection, model_id: str, dim: int, after: int = 0) -> NDArray[numpy.int64]:
    """Ids of the events with a vector for the model, in chunks with an id above ``after``."""
    import numpy as np

    parts = [
        np.frombuffer(blob, dtype=_IDS)
        for (blob,) in conn.execute(
            "SELECT ids FROM vector_chunks WHERE model_id = ? AND dim = ? AND id > ?", (model_id, dim, after)
        )
    ]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def _missing(conn: sqlite3.Connection, model_id: str, dim: int) -> NDArray[numpy.int64]:
    """Events without a vector for the model, newest first.

    Cheap when nothing is missing (two counts); otherwise one pass over the
    event ids (about 0.1 s at 1M events).
    """
    import numpy as np

    total = int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    embedded = _embedded_ids(conn, model_id, dim)
    if len(embedded) >= total:
        return np.zeros(0, dtype=np.int64)
    every = np.array([row[0] for row in conn.execute("SELECT id FROM events")], dtype=np.int64)
    missing: NDArray[np.int64] = np.setdiff1d(every, embedded)[::-1]
    return missing


def pending_count(index: Index, model_id: str, dim: int) -> int:
    """Events in the index without a vector for the model."""
    return int(index.read(lambda conn: len(_missing(conn, model_id, dim))))


def drop_stale(index: Index) -> int:
    """Remove the vectors of changed or deleted events from every chunk; return how many.

    Raises:
        KorgError: the index stays locked past the busy timeout, or SQLite fails.
    """
    import numpy as np

    if index.read(lambda conn: conn.execute("SELECT 1 FROM vector_stale LIMIT 1").fetchone()) is None:
        return 0  # the usual case: no write lock taken
    dropped = 0
    with index.write() as conn:
        stale = np.array(
            [row[0] for row in conn.execute("SELECT event_id FROM vector_stale")], dtype=np.int64
        )
        chunks = conn.execute("SELECT id, dim, ids FROM vector_chunks").fetchall()
        for chunk_id, dim, blob in chunks:
            ids = np.frombuffer(blob, dtype=_IDS)
            gone = np.isin(ids, stale)
            if not gone.any():
                continue
            dropped += int(gone.sum())
            if gone.all():
                conn.execute("DELETE FROM vector_chunks WHERE id = ?", (chunk_id,))
                continue
            (vectors,) = conn.execute(
                "SELECT vectors FROM vector_chunks WHERE id = ?", (chunk_id,)
            ).fetchone()
            keep = ~gone
            matrix = np.frombuffer(vectors, dtype=_FLOATS).reshape(-1, dim)[keep]
            conn.execute(
                "UPDATE vector_chunks SET count = ?, ids = ?, vectors = ? WHERE id = ?",
                (
                    int(keep.sum()),
                    ids[keep].astype(_IDS).tobytes(),
                    matrix.astype(_FLOATS).tobytes(),
                    chunk_id,
                ),
            )
        conn.execute("DELETE FROM vector_stale")
    return dropped


def _append(
    conn: sqlite3.Connection,
    model_id: str,
    dim: int,
    ids: NDArray[numpy.int64],
    matrix: NDArray[numpy.float32],
) -> None:
    """Store rows, first filling the model's one partly filled chunk, so chunks stay few and full."""
    import numpy as np

    open_chunk = conn.execute(
        "SELECT id, ids, vectors FROM vector_chunks WHERE model_id = ? AND dim = ? AND count < ?"
        " ORDER BY id DESC LIMIT 1",
        (model_id, dim, CHUNK_ROWS),
    ).fetchone()
    if open_chunk is not None:
        conn.execute("DELETE FROM vector_chunks WHERE id = ?", (open_chunk[0],))
        ids = np.concatenate([np.frombuffer(open_chunk[1], dtype=_IDS).astype(np.int64), ids])
        matrix = np.concatenate([np.frombuffer(open_chunk[2], dtype=_FLOATS).reshape(-1, dim), matrix])
    for start in range(0, len(ids), CHUNK_ROWS):
        part = slice(start, start + CHUNK_ROWS)
        conn.execute(
            "INSERT INTO vector_chunks (model_id, dim, count, ids, vectors) VALUES (?, ?, ?, ?, ?)",
            (
                model_id,
                dim,
                len(ids[part]),
                ids[part].astype(_IDS).tobytes(),
                np.ascontiguousarray(matrix[part], dtype=_FLOATS).tobytes(),
            ),
        )


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def _texts(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, str]:
    """The current (searchable) text of each event of ``ids`` that still exists."""
    sql = f"SELECT id, text FROM events WHERE id IN ({_placeholders(len(ids))})"
    return {int(event_id): str(text) for event_id, text in conn.execute(sql, list(ids))}


def embed_texts(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """Each existing event of ``ids``: its searchable text (what staleness is judged by) and
    the text to embed (:func:`~korg_bridge.recall.text.embed_text`)."""
    sql = f"SELECT id, text, tool, args, result FROM events WHERE id IN ({_placeholders(len(ids))})"
    out: dict[int, tuple[str, str]] = {}
    for event_id, text, tool, args, result in conn.execute(sql, list(ids)):
        event = Event(
            source="", offset=0, seq=0, shape="", tool=tool, args=load_json(args), result=load_json(result)
        )
        out[int(event_id)] = (str(text), embed_text(event))
    return out


def _store(
    index: Index,
    embedder: Embedder,
    ids: Sequence[int],
    texts: Sequence[str],
    matrix: NDArray[numpy.float32],
    watermark: int,
) -> tuple[int, int]:
    """Store what is still valid in one short transaction; return ``(stored, new watermark)``.

    ``texts`` are the events' searchable texts as read before embedding. A
    row is dropped when its event's text changed or vanished while it was
    being embedded, or when another process stored the event meanwhile (in a
    chunk above ``watermark``, the highest chunk id this process has seen).
    """
    import numpy as np

    marks = _placeholders(len(ids))
    with index.write() as conn:
        current = _texts(conn, ids)
        stale = {
            row[0]
            for row in conn.execute(
                f"SELECT event_id FROM vector_stale WHERE event_id IN ({marks})", list(ids)
            )
        }
        others = set(_embedded_ids(conn, embedder.model_id, embedder.dim, after=watermark).tolist())
        keep = [
            position
            for position, (event_id, text) in enumerate(zip(ids, texts, strict=True))
            if current.get(event_id) == text and event_id not in stale and event_id not in others
        ]
        if keep:
            _append(
                conn, embedder.model_id, embedder.dim, np.asarray(ids, dtype=np.int64)[keep], matrix[keep]
            )
        top = conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0]
    return len(keep), int(top or 0)


def embed_pending(
    index: Index,
    embedder: Embedder,
    *,
    budget_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    batch_size: int = INDEX_BATCH_SIZE,
) -> EmbedReport:
    """Embed the events that have no vector for ``embedder``'s model, newest first.

    Events go in slices of :data:`CHUNK_ROWS`, newest slice first, shortest
    text first within a slice. With ``budget_s``, no new batch starts once
    that many seconds have passed (a batch of ``batch_size`` takes 0.3-1 s
    here), so a query never waits for a whole history; ``korg-recall index
    --embed`` passes None.
    ``progress(done, total)`` is called after each batch.

    Raises:
        KorgError: the index stays locked past the busy timeout, or SQLite fails.
    """
    started = time.monotonic()
    deadline = None if budget_s is None else started + budget_s
    report = EmbedReport(embedder.model_id, embedder.dim)
    report.dropped = drop_stale(index)
    watermark = int(
        index.read(lambda conn: conn.execute("SELECT max(id) FROM vector_chunks").fetchone()[0]) or 0
    )
    missing = index.read(lambda conn: _missing(conn, embedder.model_id, embedder.dim)).tolist()
    done = 0
    out_of_time = False
    for start in range(0, len(missing), CHUNK_ROWS):
        wanted = missing[start : start + CHUNK_ROWS]
        found = index.read(functools.partial(embed_texts, ids=wanted))
        # Shortest first within the slice: a batch is padded to its longest text, so sorting makes
        # batches of like lengths (1.6x faster on real events). Ids travel with their vectors.
        ids = sorted((event_id for event_id in wanted if event_id in found), key=lambda i: len(found[i][1]))
        searchable = [found[event_id][0] for event_id in ids]
        texts = [found[event_id][1] for event_id in ids]
        parts: list[NDArray[numpy.float32]] = []
        for first in range(0, len(ids), batch_size):
            if deadline is not None and time.monotonic() >= deadline:
                out_of_time = True
                break
            parts.append(embedder.embed(texts[first : first + batch_size], batch_size=batch_size))
            done += len(parts[-1])
            if progress is not None:
                progress(done, len(missing))
        if parts:
            import numpy as np

            count = sum(len(part) for part in parts)
            stored, watermark = _store(
                index, embedder, ids[:count], searchable[:count], np.concatenate(parts), watermark
            )
            report.embedded += stored
        if out_of_time:
            break
    report.pending = max(0, len(missing) - report.embedded)
    report.duration_s = time.monotonic() - started
    logger.debug(
        "embedded %d event(s) for %s, %d pending", report.embedded, embedder.model_id, report.pending
    )
    return report


def similarities(
    index: Index, model_id: str, dim: int, query: NDArray[numpy.float32]
) -> tuple[NDArray[numpy.int64], NDArray[numpy.float32]]:
    """Cosine of ``query`` (a unit vector) with every stored, current vector of the model.

    Returns ``(event_ids, cosines)``, aligned, in storage order. Vectors of
    changed or deleted events (not yet dropped) are left out.
    """
    import numpy as np

    q = np.ascontiguousarray(query, dtype=np.float32)

    def scan(conn: sqlite3.Connection) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        id_parts: list[NDArray[np.int64]] = []
        sim_parts: list[NDArray[np.float32]] = []
        for count, ids, vectors in conn.execute(
            "SELECT count, ids, vectors FROM vector_chunks WHERE model_id = ? AND dim = ?", (model_id, dim)
        ):
            if len(ids) != 8 * count or len(vectors) != 4 * dim * count:
                logger.warning("skipping a malformed vector chunk of model %s", model_id)
                continue
            id_parts.append(np.frombuffer(ids, dtype=_IDS).astype(np.int64, copy=False))
            sim_parts.append(np.frombuffer(vectors, dtype=_FLOATS).reshape(count, dim) @ q)
        stale = [row[0] for row in conn.execute("SELECT event_id FROM vector_stale")]
        if not id_parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        ids_all = np.concatenate(id_parts)
        sims_all = np.concatenate(sim_parts).astype(np.float32, copy=False)
        if stale:
            keep = ~np.isin(ids_all, np.asarray(stale, dtype=np.int64))
            ids_all, sims_all = ids_all[keep], sims_all[keep]
        return ids_all, sims_all

    return index.read(scan)
