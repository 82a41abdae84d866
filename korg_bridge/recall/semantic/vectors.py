"""The vector store in the recall index: window vectors in chunks, read fast at query time.

Why it looks like this:

* **Chunks, not rows.** Vectors live in ``vector_chunks``: up to
  :data:`CHUNK_ROWS` vectors per row, the id of the event each belongs to as
  one int64 BLOB and the vectors as one ``count x dim`` float32 BLOB
  (little-endian, rows L2-normalised); ``events`` counts the distinct events
  in the chunk. A query reads a few hundred BLOBs through SQLite's mmap and
  multiplies each in place with the query vector, so no 150 MB matrix is ever
  materialised. Measured on this 2-core machine at 100k x 384: one BLOB per
  event read with one query took 270-450 ms; chunks of 256 with mmap take
  about 30 ms, and 1M vectors about 0.3 s. So: exact cosine over every
  vector, no approximate index.
* **Several vectors per event.** A long prompt or reply is stored as up to
  four window vectors (:mod:`korg_bridge.recall.semantic.embedtext`), written
  together, so an event's rows are one run in storage order; a query scores
  an event by its best window (max-sim), one ``maximum.reduceat`` over the
  runs.
* **Model identity.** ``model_id`` and ``dim`` sit beside every chunk; reads
  and writes are always for one model, so vectors of two models are never
  compared. Another model's vectors stay (switching back costs nothing).
* **Staleness without touching the writer.** Triggers (migration
  ``m004_vectors``) record in ``vector_stale`` every event whose text changes
  (a late tool result) or that is deleted. Such ids are masked at query time;
  the next embedding pass drops them from their chunks, after which a
  changed event is simply missing and embedded again.
* **Coverage in SQL.** :func:`coverage` answers "how much is embedded" from
  two aggregates, without numpy: ``auto`` decides between keyword and hybrid
  with it on every call, and ``stats`` shows it.

The embedding pass that fills the store is :mod:`korg_bridge.recall.semantic.embedpass`.
numpy is imported inside the functions that need it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.history.index import Index
from korg_bridge.recall.semantic import resident

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = [
    "CHUNK_ROWS",
    "Coverage",
    "append",
    "counts",
    "coverage",
    "drop_stale",
    "embedded_ids",
    "keep_resident",
    "missing_ids",
    "similarities",
]

logger = logging.getLogger(__name__)

CHUNK_ROWS = 256
"""Vectors per stored chunk: 384 KB at 384 dimensions. Measured best of 64-4096 for a 100k scan
(smaller chunks cost Python per row, larger ones cost fresh memory per BLOB)."""
MMAP_BYTES = 1 << 31
"""SQLite maps the index file for the vector scan: BLOBs are copied from the page cache once,
not read page by page. SQLite clamps it to its compile-time limit."""

IDS = "<i8"
FLOATS = "<f4"


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of the index has vectors for one model (stale vectors not counted)."""

    model_id: str
    events: int
    embedded: int

    @property
    def missing(self) -> int:
        return self.events - self.embedded

    @property
    def fraction(self) -> float:
        return 1.0 if self.events == 0 else self.embedded / self.events

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "model": self.model_id,
            "events": self.events,
            "embedded": self.embedded,
            "not_embedded": self.missing,
            "coverage": round(self.fraction, 4),
        }


def coverage_sql(dim: int | None) -> str:
    """Events, vectors' events for one model (and dim, when given), stale events: one row."""
    dim_clause = " AND dim = ?" if dim is not None else ""
    return (
        "SELECT (SELECT count(*) FROM events),"
        f" (SELECT coalesce(sum(events), 0) FROM vector_chunks WHERE model_id = ?{dim_clause}),"
        " (SELECT count(*) FROM vector_stale)"
    )


def coverage(index: Index, model_id: str, dim: int | None = None) -> Coverage:
    """The events of the index and how many have a current vector for the model; SQL only.

    A stale vector (its event changed or was deleted, not yet dropped) does not
    count: it is masked at query time. Costs two aggregates (a few ms at 1M events).

    Raises:
        KorgError: the index cannot be read.
    """
    params: list[Any] = [model_id] if dim is None else [model_id, dim]
    total, stored, stale = index.read(lambda conn: conn.execute(coverage_sql(dim), params).fetchone())
    embedded = max(0, min(int(total), int(stored) - int(stale)))
    return Coverage(model_id, int(total), embedded)


def counts(index: Index) -> dict[str, int]:
    """Events with stored vectors per model id (stale ones included until the next embedding pass)."""
    rows = index.read(
        lambda conn: conn.execute(
            "SELECT model_id, sum(events) FROM vector_chunks GROUP BY model_id ORDER BY model_id"
        ).fetchall()
    )
    return {str(model): int(total) for model, total in rows}


def embedded_ids(conn: sqlite3.Connection, model_id: str, dim: int, after: int = 0) -> NDArray[numpy.int64]:
    """Ids of the events with vectors for the model, in chunks with an id above ``after``, unique."""
    import numpy as np

    parts = [
        np.frombuffer(blob, dtype=IDS)
        for (blob,) in conn.execute(
            "SELECT ids FROM vector_chunks WHERE model_id = ? AND dim = ? AND id > ?", (model_id, dim, after)
        )
    ]
    return np.unique(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def missing_ids(conn: sqlite3.Connection, model_id: str, dim: int) -> NDArray[numpy.int64]:
    """Events without a vector for the model, newest first (call :func:`drop_stale` first).

    Cheap when nothing is missing (a count and the chunks' id BLOBs); otherwise
    one pass over the event ids (about 0.1 s at 1M events).
    """
    import numpy as np

    total = int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    embedded = embedded_ids(conn, model_id, dim)
    if len(embedded) >= total:
        return np.zeros(0, dtype=np.int64)
    every = np.fromiter((row[0] for row in conn.execute("SELECT id FROM events")), dtype=np.int64)
    missing: NDArray[np.int64] = np.setdiff1d(every, embedded)[::-1]
    return missing


def drop_stale(index: Index) -> int:
    """Remove the vectors of changed or deleted events from every chunk; return how many events.

    Raises:
        KorgError: the index stays locked past the busy timeout, or SQLite fails.
    """
    import numpy as np

    if index.read(lambda conn: conn.execute("SELECT 1 FROM vector_stale LIMIT 1").fetchone()) is None:
        return 0  # the usual case: no write lock taken
    dropped = 0
    with index.write() as conn:
        stale = np.fromiter((row[0] for row in conn.execute("SELECT event_id FROM vector_stale")), np.int64)
        chunks = conn.execute("SELECT id, dim, ids FROM vector_chunks").fetchall()
        for chunk_id, dim, blob in chunks:
            ids = np.frombuffer(blob, dtype=IDS)
            gone = np.isin(ids, stale)
            if not gone.any():
                continue
            dropped += len(np.unique(ids[gone]))
            if gone.all():
                conn.execute("DELETE FROM vector_chunks WHERE id = ?", (chunk_id,))
                continue
            (vectors,) = conn.execute(
                "SELECT vectors FROM vector_chunks WHERE id = ?", (chunk_id,)
            ).fetchone()
            keep = ~gone
            matrix = np.frombuffer(vectors, dtype=FLOATS).reshape(-1, dim)[keep]
            conn.execute(
                "UPDATE vector_chunks SET count = ?, events = ?, ids = ?, vectors = ?, stamp = random() "
                "WHERE id = ?",
                (
                    int(keep.sum()),
                    len(np.unique(ids[keep])),
                    ids[keep].astype(IDS).tobytes(),
                    matrix.astype(FLOATS).tobytes(),
                    chunk_id,
                ),
            )
        conn.execute("DELETE FROM vector_stale")
    return dropped


def append(
    conn: sqlite3.Connection,
    model_id: str,
    dim: int,
    ids: NDArray[numpy.int64],
    matrix: NDArray[numpy.float32],
) -> None:
    """Store rows (an event's windows next to each other), first filling the model's one partly
    filled chunk, so chunks stay few and full. Runs inside the caller's transaction."""
    import numpy as np

    open_chunk = conn.execute(
        "SELECT id, ids, vectors FROM vector_chunks WHERE model_id = ? AND dim = ? AND count < ?"
        " ORDER BY id DESC LIMIT 1",
        (model_id, dim, CHUNK_ROWS),
    ).fetchone()
    if open_chunk is not None:
        conn.execute("DELETE FROM vector_chunks WHERE id = ?", (open_chunk[0],))
        ids = np.concatenate([np.frombuffer(open_chunk[1], dtype=IDS).astype(np.int64), ids])
        matrix = np.concatenate([np.frombuffer(open_chunk[2], dtype=FLOATS).reshape(-1, dim), matrix])
    for start in range(0, len(ids), CHUNK_ROWS):
        part = ids[start : start + CHUNK_ROWS]
        conn.execute(
            "INSERT INTO vector_chunks (model_id, dim, count, events, ids, vectors, stamp)"
            " VALUES (?, ?, ?, ?, ?, ?, random())",
            (
                model_id,
                dim,
                len(part),
                len(np.unique(part)),
                part.astype(IDS).tobytes(),
                np.ascontiguousarray(matrix[start : start + CHUNK_ROWS], dtype=FLOATS).tobytes(),
            ),
        )


def best_per_event(
    ids: NDArray[numpy.int64], sims: NDArray[numpy.float32]
) -> tuple[NDArray[numpy.int64], NDArray[numpy.float32]]:
    """Each event's best window: one value per run of equal ids (an event's windows are stored
    together), in storage order."""
    import numpy as np

    if len(ids) < 2:
        return ids, sims
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    if len(starts) == len(ids):
        return ids, sims  # one window each: the usual case, nothing to reduce
    return ids[starts], np.maximum.reduceat(sims, starts)


def keep_resident(index: Index, model_id: str, dim: int) -> int:
    """Load (again) the model's chunks of ``index`` into :mod:`.resident`, within its budget; how
    many chunks were read now.

    Only chunks whose stamp changed, or that are new, are read: after a call that embedded a few
    events this is one or two BLOBs. A resident engine calls it between forks, never a child.

    Raises:
        KorgError: the index cannot be read.
    """
    import numpy as np

    old = resident.chunks(index, model_id, dim) or {}

    def load(conn: sqlite3.Connection) -> dict[int, resident.Chunk]:
        listed = conn.execute(
            "SELECT id, stamp FROM vector_chunks WHERE model_id = ? AND dim = ? ORDER BY id", (model_id, dim)
        ).fetchall()
        kept: dict[int, resident.Chunk] = {}
        size = 0
        for chunk_id, stamp in listed:
            known = old.get(chunk_id)
            if known is None or known.stamp != stamp:
                row = conn.execute(
                    "SELECT count, ids, vectors, stamp FROM vector_chunks WHERE id = ?", (chunk_id,)
                ).fetchone()
                if row is None or len(row[1]) != 8 * row[0] or len(row[2]) != 4 * dim * row[0]:
                    continue
                known = resident.Chunk(
                    int(row[3]),
                    np.frombuffer(row[1], dtype=IDS).astype(np.int64),  # copies: the BLOB is freed
                    np.frombuffer(row[2], dtype=FLOATS).reshape(int(row[0]), dim).copy(),
                )
            if size + known.vectors.nbytes > resident.BUDGET_BYTES:
                continue
            kept[chunk_id] = known
            size += known.vectors.nbytes
        return kept

    fresh = index.read(load)
    resident.replace(index, model_id, dim, fresh)
    return sum(1 for chunk_id, chunk in fresh.items() if old.get(chunk_id) is not chunk)


def _chunks(
    conn: sqlite3.Connection, model_id: str, dim: int, kept: dict[int, resident.Chunk] | None
) -> Iterator[tuple[NDArray[numpy.int64], NDArray[numpy.float32]]]:
    """Each chunk's event ids and vectors, in storage order, one at a time (never all at once):
    from the BLOBs (a fresh process), or the copies a resident engine ``kept`` unless a chunk was
    written since (its stamp moved)."""
    import numpy as np

    rows: Iterator[Any] = (
        conn.execute(
            "SELECT count, ids, vectors FROM vector_chunks WHERE model_id = ? AND dim = ? ORDER BY id",
            (model_id, dim),
        )
        if kept is None
        else _unkept(conn, model_id, dim, kept)
    )
    for item in rows:
        if isinstance(item, resident.Chunk):
            yield item.ids, item.vectors
            continue
        count, ids, vectors = item
        if len(ids) != 8 * count or len(vectors) != 4 * dim * count:
            logger.warning("skipping a malformed vector chunk of model %s", model_id)
            continue
        matrix = np.frombuffer(vectors, dtype=FLOATS).reshape(count, dim)
        yield np.frombuffer(ids, dtype=IDS).astype(np.int64, copy=False), matrix


def _unkept(
    conn: sqlite3.Connection, model_id: str, dim: int, kept: dict[int, resident.Chunk]
) -> Iterator[Any]:
    """The kept chunk where its stamp is still the one loaded, else the row itself."""
    listed = conn.execute(  # from an index: no BLOB is read
        "SELECT id, stamp FROM vector_chunks WHERE model_id = ? AND dim = ? ORDER BY id", (model_id, dim)
    ).fetchall()
    for chunk_id, stamp in listed:
        known = kept.get(chunk_id)
        if known is not None and known.stamp == stamp:
            yield known
            continue
        row = conn.execute(
            "SELECT count, ids, vectors FROM vector_chunks WHERE id = ?", (chunk_id,)
        ).fetchone()
        if row is not None:
            yield row


def similarities(
    index: Index, model_id: str, dim: int, query: NDArray[numpy.float32]
) -> tuple[NDArray[numpy.int64], NDArray[numpy.float32]]:
    """Cosine of ``query`` (a unit vector) with every current event of the model: its best window.

    Returns ``(event_ids, cosines)``, aligned, in storage order. Vectors of
    changed or deleted events (not yet dropped) are left out.
    """
    import numpy as np

    q = np.ascontiguousarray(query, dtype=np.float32)

    kept = resident.chunks(index, model_id, dim)

    def scan(conn: sqlite3.Connection) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        id_parts: list[NDArray[np.int64]] = []
        sim_parts: list[NDArray[np.float32]] = []
        began = not conn.in_transaction
        if began:
            conn.execute("BEGIN")  # one snapshot for a listing and the chunks read after it
        try:
            for ids, vectors in _chunks(conn, model_id, dim, kept):
                id_parts.append(ids)
                sim_parts.append(vectors @ q)
            stale = [row[0] for row in conn.execute("SELECT event_id FROM vector_stale")]
        finally:
            if began:
                conn.execute("COMMIT")
        if not id_parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        ids_all, sims_all = best_per_event(
            np.concatenate(id_parts), np.concatenate(sim_parts).astype(np.float32, copy=False)
        )
        if stale:
            keep = ~np.isin(ids_all, np.asarray(stale, dtype=np.int64))
            ids_all, sims_all = ids_all[keep], sims_all[keep]
        return ids_all, sims_all

    return index.read(scan)


def vectors_of(
    index: Index, model_id: str, dim: int, event_ids: Sequence[int]
) -> dict[int, NDArray[numpy.float32]]:
    """The stored window vectors of some events (``show --query``, query expansion), by event id."""
    import numpy as np

    wanted = np.asarray(sorted(set(event_ids)), dtype=np.int64)
    if not len(wanted):
        return {}

    def scan(conn: sqlite3.Connection) -> dict[int, NDArray[np.float32]]:
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        found: dict[int, list[NDArray[np.float32]]] = {}
        for count, ids, vectors in conn.execute(
            "SELECT count, ids, vectors FROM vector_chunks WHERE model_id = ? AND dim = ?", (model_id, dim)
        ):
            if len(ids) != 8 * count or len(vectors) != 4 * dim * count:
                continue
            rows = np.frombuffer(ids, dtype=IDS)
            hit = np.flatnonzero(np.isin(rows, wanted))
            if not len(hit):
                continue
            matrix = np.frombuffer(vectors, dtype=FLOATS).reshape(count, dim)
            for position in hit.tolist():
                found.setdefault(int(rows[position]), []).append(matrix[position])
        stale = {row[0] for row in conn.execute("SELECT event_id FROM vector_stale")}
        return {event_id: np.stack(rows) for event_id, rows in found.items() if event_id not in stale}

    return index.read(scan)
