"""Embeddings of memories, for the write policy's semantic check.

When a local embedding model is present (:func:`korg_bridge.recall.embed.model_available`),
``remember`` embeds the new text and compares it with the live memories of its
scope; without one the keyword check runs alone and ``checks.semantic`` says so.
Vectors are stored once per version row, beside their model id and dimension,
so two models' vectors are never compared. numpy and the model runtime are
imported inside these functions only: a keyword-only call never pays for them.

Where the vectors live is the store's :class:`~.backend.VectorStore`: in a SQLite
store, float32 blobs in ``memory_vectors`` compared in numpy (:class:`SqliteVectors`,
a scope holds at most a few thousand); in a team store, pgvector ``halfvec``
columns searched through an HNSW index (:mod:`.pg.vectors`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Store, Tx

__all__ = ["EMBED_MISSING_MAX", "NEAREST", "SQLITE_VECTORS", "Semantic", "SqliteVectors", "semantic_check"]

EMBED_MISSING_MAX = 64
"""Live memories without a vector that one write embeds (newest first): a few seconds at most
on two cores; the rest are embedded by later writes."""
NEAREST = 32
"""Memories of the scope whose cosine a write needs at least: the write policy looks at its
10 closest above 0.80 (policy.CANDIDATES), so 32 leaves room."""


@dataclass(slots=True)
class Semantic:
    """The semantic side of one write: what ran, and the cosine of each memory of the scope."""

    note: str
    cosines: dict[str, float]
    model_id: str | None = None
    dim: int = 0
    vector: Any = None
    """The new text's vector (numpy float32), stored with the new version."""


def semantic_check(store: Store, env: Mapping[str, str], scope: str, text: str) -> Semantic:
    """Embed ``text`` and the scope's live memories (those still missing a vector, up to
    :data:`EMBED_MISSING_MAX`), and return their cosines; a note says why it did not run."""
    from korg_bridge.recall.embed import load_embedder, model_available

    if not model_available(env):
        return Semantic("not run: no embedding model (keyword check only)", {})
    try:
        embedder = load_embedder(env)
        vector = embedder.embed([text])[0]
    except KorgError as exc:
        return Semantic(f"not run: {exc.message}", {})
    model_id, dim = embedder.model_id, embedder.dim
    with store.reading() as tx:
        missing = tx.vectors.missing(tx, scope, model_id, dim, EMBED_MISSING_MAX)
    if missing:
        try:
            computed = embedder.embed([embed_text(title, body) for _, title, body in missing])
        except KorgError as exc:
            return Semantic(f"not run: {exc.message}", {})
        with store.write() as tx:
            for index, (rowid, _title, _body) in enumerate(missing):
                tx.vectors.put(tx, rowid, model_id, dim, computed[index])
    with store.reading() as tx:
        cosines = tx.vectors.cosines(tx, scope, model_id, dim, vector, NEAREST)
    return Semantic(f"ran: {model_id}", cosines, model_id, dim, vector)


def embed_text(title: str, body: str) -> str:
    """What is embedded for a memory: its body, after its title when that is not the first line."""
    return body if body.startswith(title) else f"{title}\n{body}"


def store_vector(tx: Tx, rowid: int, model_id: str, dim: int, vector: Any) -> None:
    """Keep ``vector`` for version row ``rowid`` (inside the caller's transaction)."""
    tx.vectors.put(tx, rowid, model_id, dim, vector)


def drop_vectors(tx: Tx, rowids: Sequence[int]) -> None:
    """Delete the vectors of these version rows (a purge)."""
    tx.vectors.drop(tx, rowids)


_HEADS = (
    "SELECT m.rowid, m.id, m.title, m.body, v.vector FROM memory m LEFT JOIN memory_vectors v "
    "ON v.row = m.rowid AND v.model_id = ? AND v.dim = ? "
    "WHERE m.scope = ? AND m.superseded_by IS NULL AND m.state IN ('live', 'pending') "
    "ORDER BY m.recorded_at DESC"
)
"""Live and pending heads of a scope with their vector of one model, if any, newest first."""


class SqliteVectors:
    """:class:`~.backend.VectorStore` of a SQLite store: float32 blobs, compared in numpy."""

    def missing(self, tx: Tx, scope: str, model_id: str, dim: int, limit: int) -> list[tuple[int, str, str]]:
        rows = tx.execute(_HEADS, (model_id, dim, scope)).fetchall()
        return [(int(r[0]), str(r[2]), str(r[3])) for r in rows if r[4] is None][:limit]

    def put(self, tx: Tx, rowid: int, model_id: str, dim: int, vector: Any) -> None:
        import numpy as np

        blob = np.asarray(vector, dtype=np.float32).tobytes()
        tx.execute(
            "INSERT INTO memory_vectors (row, model_id, dim, vector) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (row) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
            "vector = excluded.vector",
            (rowid, model_id, dim, blob),
        )

    def drop(self, tx: Tx, rowids: Sequence[int]) -> None:
        tx.executemany("DELETE FROM memory_vectors WHERE row = ?", [(rowid,) for rowid in rowids])

    def cosines(
        self, tx: Tx, scope: str, model_id: str, dim: int, vector: Any, limit: int
    ) -> dict[str, float]:
        # Every head of the scope: a scope holds a few thousand at most, one dot product each.
        import numpy as np

        out: dict[str, float] = {}
        for _rowid, memory_id, _title, _body, blob in tx.execute(_HEADS, (model_id, dim, scope)):
            if blob is None:
                continue
            stored = np.frombuffer(blob, dtype=np.float32)
            if stored.shape == vector.shape:
                out[memory_id] = max(out.get(memory_id, -1.0), float(np.dot(stored, vector)))
        return out


SQLITE_VECTORS = SqliteVectors()
