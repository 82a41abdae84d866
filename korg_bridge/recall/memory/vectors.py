"""Embeddings of memories: written with each version, filled in behind, compared for writes and reads.

When a local embedding model is present (:func:`korg_bridge.recall.embed.model_available`),
every live memory version gets a vector, stored beside its model id and dimension
(two models' vectors are never compared):

* **with the version.** ``remember`` embeds the new text for the write policy's
  semantic check and keeps that vector; ``revise`` and ``restore`` embed their new
  version after the commit (:func:`embed_heads`; a restored text reuses the vector
  its lineage already has). A model that fails to load fails nothing: the version
  is written, and embedded later.
* **behind.** What was written without a model in the process -- hand edits of the
  mirror and Claude Code's files taken in before a read, imports (thousands must
  never wait for embedding), memories from before a model was installed -- is
  embedded by the background indexer's pass (:mod:`.backfill`), which ``recall``
  starts when it sees a live memory without a vector, and ``import`` after it wrote. Reads that list memories
  (``memories``, the session brief) never load a model.
* **read.** :mod:`.search` ranks by meaning with :meth:`~.backend.VectorStore.nearest_rows`
  and :meth:`~.backend.VectorStore.cosines_of`; ``auto`` does so once
  :func:`coverage` says enough of the live memories have a vector.

numpy and the model runtime are imported inside functions only: a keyword-only call
never pays for them. Where the vectors live is the store's :class:`~.backend.VectorStore`:
in a SQLite store, float32 blobs in ``memory_vectors`` compared in numpy
(:class:`SqliteVectors`, a scope holds at most a few thousand); in a team store,
pgvector ``halfvec`` columns searched through an HNSW index (:mod:`.pg.vectors`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend import Store, Tx

__all__ = [
    "EMBED_MISSING_MAX",
    "NEAREST",
    "SQLITE_VECTORS",
    "MemoryCoverage",
    "Semantic",
    "SqliteVectors",
    "coverage",
    "embed_heads",
    "semantic_check",
    "vector_stats",
]

logger = logging.getLogger(__name__)

EMBED_MISSING_MAX = 64
"""Live memories without a vector that one write embeds (newest first): a few seconds at most
on two cores; the rest are embedded by later writes or the background indexer."""
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
    from korg_bridge.recall.embed import model_available
    from korg_bridge.recall.modes import shared_embedder

    if not model_available(env):
        return Semantic("not run: no embedding model (keyword check only)", {})
    try:
        embedder = shared_embedder(env)
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


# --- with the version, and behind it ----------------------------------------------------------

_UNEMBEDDED_HEADS = (
    "SELECT m.rowid, m.id, m.content_hash, m.title, m.body FROM memory m WHERE m.id IN ({marks}) "
    "AND m.superseded_by IS NULL AND m.state IN ('live', 'pending') AND NOT EXISTS "
    "(SELECT 1 FROM memory_vectors v WHERE v.row = m.rowid AND v.model_id = ? AND v.dim = ?)"
)
_SAME_TEXT = (
    "SELECT v.row FROM memory_vectors v JOIN memory m ON m.rowid = v.row "
    "WHERE m.id = ? AND m.content_hash = ? AND m.title = ? AND v.model_id = ? AND v.dim = ? LIMIT 1"
)
"""A version of the lineage whose embedded text (:func:`embed_text`: title and body) is the same,
with a vector of one model. The body alone is not enough: a revise that sets only the title keeps
the body, and its version took the vector of the old title."""


def embed_heads(store: Store, env: Mapping[str, str], ids: Sequence[str]) -> str | None:
    """Give the current versions of ``ids`` a vector, after the write that made them committed.

    A version whose text -- title and body -- its lineage held before (a restore) takes that
    version's vector; the rest are embedded, when a model is present. Never raises: a model that
    cannot be loaded, or a store that is busy, leaves the versions to the background indexer, and
    the note returned says why (None when nothing was left undone).
    """
    from korg_bridge.recall.embed import model_available, resolve_model

    spec = resolve_model(env) if ids else None
    if spec is None or spec.dim is None or not model_available(env):
        return None
    model_id, dim = spec.model_id, spec.dim
    try:
        with store.reading() as tx:
            rows = tx.execute(
                _UNEMBEDDED_HEADS.format(marks=", ".join("?" * len(ids))), (*ids, model_id, dim)
            ).fetchall()
            copies = {
                int(rowid): tx.execute(_SAME_TEXT, (memory_id, content_hash, title, model_id, dim)).fetchone()
                for rowid, memory_id, content_hash, title, _body in rows
            }
        if not rows:
            return None
        fresh = [
            (int(row[0]), embed_text(str(row[3]), str(row[4]))) for row in rows if copies[int(row[0])] is None
        ]
        vectors: dict[int, Any] = {}
        if fresh:
            from korg_bridge.recall.modes import shared_embedder

            embedder = shared_embedder(env)
            if (embedder.model_id, embedder.dim) != (model_id, dim):
                return "not embedded: the model on disk changed meanwhile"
            computed = embedder.embed([text for _, text in fresh])
            vectors = {rowid: computed[position] for position, (rowid, _) in enumerate(fresh)}
        with store.write() as tx:
            for rowid, source in copies.items():
                if source is not None:
                    tx.execute(
                        "INSERT INTO memory_vectors (row, model_id, dim, vector) SELECT CAST(? AS bigint), model_id, dim, "
                        "vector "
                        "FROM memory_vectors WHERE row = ? ON CONFLICT DO NOTHING",
                        (rowid, int(source[0])),
                    )
                elif rowid in vectors:
                    tx.vectors.put(tx, rowid, model_id, dim, vectors[rowid])
    except KorgError as exc:
        logger.info("memory vectors left to the background indexer: %s", exc.message)
        return f"not embedded: {exc.message}"
    return None


# --- how much is embedded ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemoryCoverage:
    """How many live memories (heads) have a vector of one model."""

    model_id: str
    live: int
    embedded: int

    @property
    def missing(self) -> int:
        return self.live - self.embedded

    @property
    def fraction(self) -> float:
        return 1.0 if self.live == 0 else self.embedded / self.live

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "model": self.model_id,
            "live": self.live,
            "embedded": self.embedded,
            "not_embedded": self.missing,
            "coverage": round(self.fraction, 4),
        }


def coverage(tx: Tx, env: Mapping[str, str], scopes: Sequence[str] | None = None) -> MemoryCoverage | None:
    """The live memories of ``scopes`` (None: all) with a vector of the configured model; None
    without a model on disk. SQL only: nothing of the model is loaded."""
    from korg_bridge.recall.embed import model_available, resolve_model

    spec = resolve_model(env)
    if spec is None or spec.dim is None or not model_available(env):
        return None
    live, embedded = tx.vectors.coverage(tx, scopes, spec.model_id, spec.dim)
    return MemoryCoverage(spec.model_id, live, embedded)


def vector_stats(store: Store, env: Mapping[str, str]) -> dict[str, Any] | None:
    """What ``stats`` shows of the memories' vectors: coverage for the configured model, and
    whether the background indexer runs; None without a model on disk."""
    from korg_bridge.recall.memory.backfill import memory_indexer_running

    with store.reading() as tx:
        found = coverage(tx, env)
    if found is None:
        return None
    return {**found.to_dict(), "indexer_running": memory_indexer_running(env)}


# --- a SQLite store's vectors -----------------------------------------------------------------

_HEADS = (
    "SELECT m.rowid, m.id, m.title, m.body, v.vector FROM memory m LEFT JOIN memory_vectors v "
    "ON v.row = m.rowid AND v.model_id = ? AND v.dim = ? "
    "WHERE m.scope = ? AND m.superseded_by IS NULL AND m.state IN ('live', 'pending') "
    "ORDER BY m.recorded_at DESC"
)
"""Live and pending heads of a scope with their vector of one model, if any, newest first."""


def missing_sql(every_scope: bool) -> str:
    """Live or pending heads without a vector of one model, newest first. Params: (the scope,) the
    model id, the dimension, the limit."""
    scope = "" if every_scope else "m.scope = ? AND "
    return (
        f"SELECT m.rowid, m.title, m.body FROM memory m WHERE {scope}m.superseded_by IS NULL "
        "AND m.state IN ('live', 'pending') AND NOT EXISTS (SELECT 1 FROM memory_vectors v "
        "WHERE v.row = m.rowid AND v.model_id = ? AND v.dim = ?) ORDER BY m.recorded_at DESC, m.rowid DESC LIMIT ?"
    )


def coverage_sql(scope_count: int | None) -> str:
    """Live heads (of ``scope_count`` scopes, or all) and how many have a vector of one model.
    Params: the model id, the dimension, (the scopes)."""
    scopes = "" if scope_count is None else f" AND m.scope IN ({', '.join('?' * scope_count)})"
    return (
        "SELECT count(*), count(v.row) FROM memory m LEFT JOIN memory_vectors v "
        "ON v.row = m.rowid AND v.model_id = ? AND v.dim = ? "
        f"WHERE m.superseded_by IS NULL AND m.state = 'live'{scopes}"
    )


def _matrix(blobs: Sequence[bytes], dim: int) -> Any:
    import numpy as np

    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)


class SqliteVectors:
    """:class:`~.backend.VectorStore` of a SQLite store: float32 blobs, compared in numpy."""

    def missing(
        self, tx: Tx, scope: str | None, model_id: str, dim: int, limit: int
    ) -> list[tuple[int, str, str]]:
        params = (model_id, dim, limit) if scope is None else (scope, model_id, dim, limit)
        rows = tx.execute(missing_sql(scope is None), params).fetchall()
        return [(int(rowid), str(title), str(body)) for rowid, title, body in rows]

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

    def coverage(self, tx: Tx, scopes: Sequence[str] | None, model_id: str, dim: int) -> tuple[int, int]:
        sql = coverage_sql(None if scopes is None else len(scopes))
        live, embedded = tx.execute(sql, (model_id, dim, *(scopes or ()))).fetchone()
        return int(live), int(embedded)

    def nearest_rows(
        self, tx: Tx, where: str, params: Sequence[object], model_id: str, dim: int, vector: Any, limit: int
    ) -> list[tuple[int, float]]:
        # Every vector the condition allows, one matrix product: a store's few thousand rows cost
        # milliseconds, and an exact answer needs no index.
        import numpy as np

        rows = [
            (int(rowid), blob)
            for rowid, blob in tx.execute(
                "SELECT m.rowid, v.vector FROM memory m JOIN memory_vectors v ON v.row = m.rowid "
                f"WHERE v.model_id = ? AND v.dim = ? AND {where}",
                (model_id, dim, *params),
            )
            if len(blob) == 4 * dim
        ]
        if not rows or limit < 1:
            return []
        sims = _matrix([blob for _, blob in rows], dim) @ np.asarray(vector, dtype=np.float32)
        order = np.argsort(-sims, kind="stable")[:limit]
        return [(rows[i][0], float(sims[i])) for i in order.tolist()]

    def cosines_of(
        self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int, vector: Any
    ) -> dict[int, float]:
        import numpy as np

        if not rowids:
            return {}
        marks = ", ".join("?" * len(rowids))
        rows = [
            (int(rowid), blob)
            for rowid, blob in tx.execute(
                f"SELECT row, vector FROM memory_vectors WHERE model_id = ? AND dim = ? AND row IN ({marks})",
                (model_id, dim, *rowids),
            )
            if len(blob) == 4 * dim
        ]
        if not rows:
            return {}
        sims = _matrix([blob for _, blob in rows], dim) @ np.asarray(vector, dtype=np.float32)
        return {rowid: float(sim) for (rowid, _), sim in zip(rows, sims.tolist(), strict=True)}

    def alike(self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int) -> dict[tuple[int, int], float]:
        if len(rowids) < 2:
            return {}
        marks = ", ".join("?" * len(rowids))
        rows = sorted(
            (int(rowid), blob)
            for rowid, blob in tx.execute(
                f"SELECT row, vector FROM memory_vectors WHERE model_id = ? AND dim = ? AND row IN ({marks})",
                (model_id, dim, *rowids),
            )
            if len(blob) == 4 * dim
        )
        if len(rows) < 2:
            return {}
        matrix = _matrix([blob for _, blob in rows], dim)
        sims = (matrix @ matrix.T).tolist()
        return {
            (rows[i][0], rows[j][0]): float(sims[i][j])
            for i in range(len(rows))
            for j in range(i + 1, len(rows))
        }


SQLITE_VECTORS = SqliteVectors()
