"""Memory vectors a resident engine keeps in memory, so a search by meaning in a SQLite store
reads which rows have a vector, not the vectors.

Ranking memories by meaning scores the query against the vector of every row it may show; at
10,000 memories reading those BLOBs through SQLite was a fifth of a hybrid recall, and most of
``remember``'s duplicate check. The engine loads the vectors of its store and model before it
serves and, at most once a second, after a call (only rows it has not seen: rowids only grow);
each call's child inherits the copy (:mod:`korg_bridge.recall.engine.server`). A fresh process
has nothing here and reads every vector, as before.

A kept vector stands for a row only while the row holds the very write it was copied from: every
write of a vector row gives it a new random *stamp* (store migration ``m009``: triggers, so
whatever writes the row -- another version, sync, a person -- stamps it), and a call compares the
stamps the store lists now (from an index, without reading a BLOB) with the kept ones. A restored
or replaced file cannot repeat a stamp by chance (odds 2**-64 per row). Stamps and vectors are held
in numpy arrays: touching a Python object per row would make a child copy the pages they live on.
Anything else is read from the store. Each row is scored on its own (:func:`dot_rows`), so a kept
row scored in the kept matrix gives the bytes a fresh process computes for it.

Bounded: at most :data:`BUDGET_BYTES` of vectors (the oldest rows first); the rest are read per call.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = ["BUDGET_BYTES", "Kept", "dot_rows", "keep", "kept", "read_vectors", "scored"]

BUDGET_BYTES = 48 << 20
"""Vectors kept at most: 32k memories of 384 floats."""
NO_STAMP = 0
"""A stamp that matches nothing (a row the triggers never reached reads as NULL)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """One store's vectors of one model, as numpy arrays only: a child reads them without touching
    (and so without copying) a Python object per row. ``rowids`` ascending; ``stamps`` and
    ``matrix`` rows in the same order."""

    rowids: NDArray[numpy.int64]
    stamps: NDArray[numpy.int64]
    matrix: NDArray[numpy.float32]
    last: int
    """The greatest rowid looked at: the next load reads only rows after it."""


_KEPT: dict[tuple[str, str, int], Kept] = {}
"""(store path, model id, dimension) -> what was loaded."""


def _key(path: Path | str, model_id: str, dim: int) -> tuple[str, str, int]:
    return (os.path.realpath(path), model_id, dim)


def kept(path: Path | str | None, model_id: str, dim: int) -> Kept | None:
    """What this process inherited for the store at ``path`` and the model (None: a fresh process)."""
    return None if path is None or not _KEPT else _KEPT.get(_key(path, model_id, dim))


def keep(path: Path, model_id: str, dim: int) -> int:
    """Load the vectors of rows not seen yet into this process (the engine, between forks), within
    the budget; how many were added. Read-only: the store is opened and closed here, never created.

    Raises:
        sqlite3.Error: the store cannot be read (or is not migrated yet: no stamps).
    """
    import numpy as np

    key = _key(path, model_id, dim)
    have = _KEPT.get(key)
    last = 0 if have is None else have.last
    from urllib.parse import quote

    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5.0)
    try:
        rows = conn.execute(
            "SELECT row, vector, stamp FROM memory_vectors WHERE model_id = ? AND dim = ? AND row > ? "
            "ORDER BY row",
            (model_id, dim, last),
        ).fetchall()
    finally:
        conn.close()
    if not rows:
        return 0
    room = BUDGET_BYTES // (4 * dim) - (0 if have is None else len(have.rowids))
    fresh = [row for row in rows if len(row[1]) == 4 * dim and row[2] is not None][: max(room, 0)]
    rowids = np.fromiter((row[0] for row in fresh), dtype=np.int64, count=len(fresh))
    stamps = np.fromiter((row[2] for row in fresh), dtype=np.int64, count=len(fresh))
    matrix = np.frombuffer(b"".join(row[1] for row in fresh), dtype=np.float32).reshape(len(fresh), dim)
    if have is not None:
        rowids = np.concatenate([have.rowids, rowids])
        stamps = np.concatenate([have.stamps, stamps])
        matrix = np.concatenate([have.matrix, matrix])
    _KEPT[key] = Kept(rowids, stamps, matrix.copy() if have is None else matrix, int(rows[-1][0]))
    return len(fresh)


def dot_rows(vectors: NDArray[numpy.float32], query: NDArray[numpy.float32]) -> NDArray[numpy.float32]:
    """Each row's dot product with ``query``, the same bytes for a row wherever it lies: numpy's
    ``einsum`` sums each row on its own, in one order, whatever the matrix around it (a BLAS matrix
    product does not: a row's last bits changed with the rows beside it). So a kept vector is
    scored in place, in the kept matrix, and gives what a fresh process computes for it."""
    import numpy as np

    out: NDArray[numpy.float32] = np.einsum("ij,j->i", vectors, query)
    return out


def scored(
    conn: Any, found: Sequence[Sequence[Any]], model_id: str, dim: int, query: NDArray[numpy.float32]
) -> tuple[list[int], NDArray[numpy.float32]]:
    """The cosine with ``query`` of the vector of the model of each row of ``found`` (rows of
    :func:`~.vectors.listing_sql`: rowid, stamp, ...), in that order -- kept ones scored where they are kept,
    the rest read from ``conn`` (a fresh process reads them all) -- and which places of ``found``
    they are (a malformed vector, of the wrong length, is left out)."""
    import numpy as np

    here = kept(getattr(conn, "path", None), model_id, dim)
    sims = np.zeros(len(found), dtype=np.float32)
    if here is None or not len(here.rowids) or not found:
        missing = list(range(len(found)))
    else:
        rowids = np.fromiter((row[0] for row in found), dtype=np.int64, count=len(found))
        stamps = np.fromiter(
            (NO_STAMP if row[1] is None else row[1] for row in found), dtype=np.int64, count=len(found)
        )
        at = np.minimum(np.searchsorted(here.rowids, rowids), len(here.rowids) - 1)
        same = (here.rowids[at] == rowids) & (here.stamps[at] == stamps) & (stamps != NO_STAMP)
        if same.any():
            sims[same] = dot_rows(here.matrix, query)[at[same]]
        missing = np.flatnonzero(~same).tolist()
    unreadable: list[int] = []
    if missing:
        read = read_vectors(conn, [found[place][0] for place in missing], model_id, dim)
        present = [place for place in missing if found[place][0] in read]
        unreadable = [place for place in missing if found[place][0] not in read]
        if present:
            matrix = np.stack([read[found[place][0]] for place in present])
            sims[present] = dot_rows(matrix, query)
    if not unreadable:
        return list(range(len(found))), sims
    left = sorted(set(range(len(found))) - set(unreadable))
    return left, sims[left]


def read_vectors(
    conn: Any, rowids: Sequence[int], model_id: str, dim: int
) -> dict[int, NDArray[numpy.float32]]:
    """The vectors of the model of these rows, from the store (rows without one are left out)."""
    import numpy as np

    from korg_bridge.recall.memory.rows import chunks

    out: dict[int, NDArray[numpy.float32]] = {}
    for part in chunks(rowids):
        marks = ", ".join("?" * len(part))
        for rowid, blob in conn.execute(
            f"SELECT row, vector FROM memory_vectors WHERE model_id = ? AND dim = ? AND row IN ({marks})",
            (model_id, dim, *part),
        ):
            if len(blob) == 4 * dim:
                out[int(rowid)] = np.frombuffer(blob, dtype=np.float32)
    return out
