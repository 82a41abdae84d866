"""History vectors a resident engine keeps in memory, so a call's semantic or hybrid recall reads
only the chunks written since, not every vector of the index.

A query scores every window vector of the model (:func:`~korg_bridge.recall.semantic.vectors.
similarities`); reading them through SQLite is most of a hybrid recall's time (30 MB at 20k
events). A fresh process has nothing here and reads them all, as before. The engine loads the
chunks before it serves and again after each call it forks (only what changed:
a listing from an index, then the changed chunks' BLOBs); each child inherits the copy at its
fork (:func:`~korg_bridge.recall.semantic.vectors.keep_resident` loads them), and reuses a chunk
only while its ``stamp`` -- a fresh random number on every chunk written
(history migration ``m011``) -- is the one it was loaded with. A chunk written since is read from
the index, so the answer is exactly what a fresh process computes.

Bounded: at most :data:`BUDGET_BYTES` of vectors are kept (the first chunks in storage order);
the rest are read per call, as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

    from korg_bridge.recall.history.index import Index

__all__ = ["BUDGET_BYTES", "Chunk", "chunks", "replace"]

BUDGET_BYTES = 96 << 20
"""Vectors kept at most: 64k windows of 384 floats; the engine's RSS goal is 350 MB."""


@dataclass(frozen=True, slots=True)
class Chunk:
    stamp: int
    ids: NDArray[numpy.int64]
    vectors: NDArray[numpy.float32]


_KEPT: dict[tuple[str, str, int], dict[int, Chunk]] = {}
"""(index path, model id, dimension) -> chunk id -> what was loaded."""


def _key(index: Index, model_id: str, dim: int) -> tuple[str, str, int]:
    return (os.path.realpath(index.path), model_id, dim)


def chunks(index: Index, model_id: str, dim: int) -> dict[int, Chunk] | None:
    """What this process inherited for ``index`` and the model (None: a fresh process)."""
    return _KEPT.get(_key(index, model_id, dim))


def replace(index: Index, model_id: str, dim: int, kept: dict[int, Chunk]) -> None:
    """Make ``kept`` what this process holds for ``index`` and the model (the engine, between forks)."""
    _KEPT[_key(index, model_id, dim)] = kept
