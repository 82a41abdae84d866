"""Embeddings of memories: written with each version, filled in behind, compared for writes and reads.

When a local embedding model is present (:func:`korg_bridge.recall.semantic.model.model_available`),
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
(:class:`~.backend.sqlite.vectors.SqliteVectors`, a scope holds at most a few thousand); in a team store,
pgvector ``halfvec`` columns searched through an HNSW index (:mod:`.pg.vectors`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError
from korg_bridge.recall.memory.normalize import title_of

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx

__all__ = [
    "EMBED_MISSING_MAX",
    "NEAREST",
    "MemoryCoverage",
    "Semantic",
    "coverage",
    "embed_heads",
    "semantic_check",
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
    from korg_bridge.recall.semantic.model import model_available
    from korg_bridge.recall.semantic.modes import shared_embedder

    if not model_available(env):
        return Semantic("not run: no embedding model (keyword check only)", {})
    try:
        embedder = shared_embedder(env)
        vector = embedder.embed([text])[0]
    except KorgError as exc:
        return Semantic(f"not run: {exc.message}", {})
    model_id, dim = embedder.model_id, embedder.dim
    with store.reading() as tx:
        cosines, lacking = tx.vectors.cosines(tx, scope, model_id, dim, vector, NEAREST)
        missing = (
            tx.vectors.missing(tx, scope, model_id, dim, EMBED_MISSING_MAX) if lacking is not False else []
        )
    if missing:
        try:
            computed = embedder.embed([embed_text(title, body) for _, title, body in missing])
        except KorgError as exc:
            return Semantic(f"not run: {exc.message}", {})
        with store.write() as tx:
            for index, (rowid, _title, _body) in enumerate(missing):
                tx.vectors.put(tx, rowid, model_id, dim, computed[index])
        with store.reading() as tx:
            cosines, _ = tx.vectors.cosines(tx, scope, model_id, dim, vector, NEAREST)
    return Semantic(f"ran: {model_id}", cosines, model_id, dim, vector)


def embed_text(title: str, body: str) -> str:
    """What is embedded for a memory: its body, after its title when someone gave it one.

    A title made from the body (:func:`~korg_bridge.recall.memory.normalize.title_of`: its first
    line, cut at 80 characters, a heading's ``#`` dropped) says nothing the body does not: put
    before the body it took up to a fifth of the model's 128-token window (the end of a long note
    was not embedded) and made each write's embedding a half longer."""
    return body if body.startswith(title) or title == title_of(body) else f"{title}\n{body}"


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
    from korg_bridge.recall.semantic.model import model_available, resolve_model

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
            from korg_bridge.recall.semantic.modes import shared_embedder

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
    from korg_bridge.recall.semantic.model import model_available, resolve_model

    spec = resolve_model(env)
    if spec is None or spec.dim is None or not model_available(env):
        return None
    live, embedded = tx.vectors.coverage(tx, scopes, spec.model_id, spec.dim)
    return MemoryCoverage(spec.model_id, live, embedded)
