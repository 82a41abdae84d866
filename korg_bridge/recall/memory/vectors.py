"""Embeddings of memories, for the write policy's semantic check (and ranking, in phase 2).

When a local embedding model is present (:func:`korg_bridge.recall.embed.model_available`),
``remember`` embeds the new text and compares it with the live memories of its
scope; without one the keyword check runs alone and ``checks.semantic`` says so.
Vectors are stored once per version row, beside their model id and dimension
(``memory_vectors``), so two models' vectors are never compared. numpy and the
model runtime are imported inside these functions only: a keyword-only call
never pays for them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = ["EMBED_MISSING_MAX", "Semantic", "semantic_check", "store_vector"]

EMBED_MISSING_MAX = 64
"""Live memories without a vector that one write embeds (newest first): a few seconds at most
on two cores; the rest are embedded by later writes."""


@dataclass(slots=True)
class Semantic:
    """The semantic side of one write: what ran, and the cosine of each memory of the scope."""

    note: str
    cosines: dict[str, float]
    model_id: str | None = None
    dim: int = 0
    vector: Any = None
    """The new text's vector (numpy float32), stored with the new version."""


def semantic_check(store: Any, env: Mapping[str, str], scope: str, text: str) -> Semantic:
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
    import numpy as np

    model_id, dim = embedder.model_id, embedder.dim
    conn: sqlite3.Connection = store.conn
    heads = conn.execute(
        "SELECT m.rowid, m.id, m.title, m.body, v.vector FROM memory m LEFT JOIN memory_vectors v "
        "ON v.row = m.rowid AND v.model_id = ? AND v.dim = ? "
        "WHERE m.scope = ? AND m.superseded_by IS NULL AND m.state IN ('live', 'pending') "
        "ORDER BY m.recorded_at DESC",
        (model_id, dim, scope),
    ).fetchall()
    missing = [row for row in heads if row[4] is None][:EMBED_MISSING_MAX]
    fresh: dict[int, NDArray[numpy.float32]] = {}
    if missing:
        try:
            computed = embedder.embed([embed_text(row[2], row[3]) for row in missing])
        except KorgError as exc:
            return Semantic(f"not run: {exc.message}", {})
        fresh = {row[0]: computed[i] for i, row in enumerate(missing)}
        with store.write() as tx:
            for rowid, vec in fresh.items():
                store_vector(tx, rowid, model_id, dim, vec)
    cosines: dict[str, float] = {}
    for rowid, memory_id, _title, _body, blob in heads:
        stored = fresh.get(rowid) if blob is None else np.frombuffer(blob, dtype=np.float32)
        if stored is not None and stored.shape == vector.shape:
            cosines[memory_id] = max(cosines.get(memory_id, -1.0), float(np.dot(stored, vector)))
    return Semantic(f"ran: {model_id}", cosines, model_id, dim, vector)


def embed_text(title: str, body: str) -> str:
    """What is embedded for a memory: its body, after its title when that is not the first line."""
    return body if body.startswith(title) else f"{title}\n{body}"


def store_vector(conn: sqlite3.Connection, rowid: int, model_id: str, dim: int, vector: Any) -> None:
    """Keep ``vector`` (float32) for version row ``rowid`` (inside the caller's transaction)."""
    import numpy as np

    blob = np.asarray(vector, dtype=np.float32).tobytes()
    conn.execute(
        "INSERT OR REPLACE INTO memory_vectors (row, model_id, dim, vector) VALUES (?, ?, ?, ?)",
        (rowid, model_id, dim, blob),
    )


def drop_vectors(conn: sqlite3.Connection, rowids: Sequence[int]) -> None:
    """Delete the vectors of these version rows (a purge)."""
    conn.executemany("DELETE FROM memory_vectors WHERE row = ?", [(rowid,) for rowid in rowids])
