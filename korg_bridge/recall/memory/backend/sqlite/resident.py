"""Memory vectors a resident engine keeps in memory, so a search by meaning in a SQLite store
reads which rows have a vector, not the vectors.

Ranking memories by meaning scores the query against the vector of every row it may show; at
10,000 memories reading those BLOBs through SQLite was a fifth of a hybrid recall, and most of
``remember``'s duplicate check. The engine loads the vectors of its store and model before it
serves and, at most once a second, after a call (only rows it has not seen: rowids only grow);
each call's child inherits the copy (:mod:`korg_bridge.recall.engine.server`). A fresh process
has nothing here and reads every vector, as before.

A kept vector stands for a row only while the row is the one it was loaded for: the same memory
id, version, ``recorded_at`` and content hash (a restored or replaced file may hand a rowid to
another text), and only if the row has a vector of the model in the store now (an index lists
them without reading them: store migration ``m008``). Anything else is read from the store. The
matrix a call scores is assembled row by row in rowid order whichever way each row came, so the
scores are the bytes a fresh process computes.

Bounded: at most :data:`BUDGET_BYTES` of vectors (the oldest rows first); the rest are read per call.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = [
    "BUDGET_BYTES",
    "IDENTITY_COLUMNS",
    "Identity",
    "Kept",
    "keep",
    "kept",
    "read_vectors",
    "stack",
]

BUDGET_BYTES = 48 << 20
"""Vectors kept at most: 32k memories of 384 floats."""

Identity = tuple[Any, ...]
"""What a row was when its vector was kept: :data:`IDENTITY_COLUMNS`, as SQLite returns them."""
IDENTITY_COLUMNS = "m.id, m.version, m.recorded_at, m.content_hash"
"""Memory id, version, recorded_at and content hash, as columns of ``memory m``."""


@dataclass(slots=True)
class Kept:
    """One store's vectors of one model: ``rows[rowid] = (identity, position in matrix)``."""

    rows: dict[int, tuple[Identity, int]] = field(default_factory=dict)
    matrix: NDArray[numpy.float32] | None = None
    last: int = 0
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
        sqlite3.Error: the store cannot be read.
    """
    import numpy as np

    have = _KEPT.get(_key(path, model_id, dim)) or Kept()
    from urllib.parse import quote

    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5.0)
    try:
        rows = conn.execute(
            f"SELECT v.row, v.vector, {IDENTITY_COLUMNS} FROM memory_vectors v "
            "JOIN memory m ON m.rowid = v.row WHERE v.model_id = ? AND v.dim = ? AND v.row > ? ORDER BY v.row",
            (model_id, dim, have.last),
        ).fetchall()
    finally:
        conn.close()
    room = BUDGET_BYTES // (4 * dim) - len(have.rows)
    fresh = [row for row in rows if len(row[1]) == 4 * dim][: max(room, 0)]
    if not fresh and have.last >= (rows[-1][0] if rows else 0):
        _KEPT[_key(path, model_id, dim)] = have
        return 0
    added = np.frombuffer(b"".join(row[1] for row in fresh), dtype=np.float32).reshape(len(fresh), dim)
    matrix = added.copy() if have.matrix is None else np.concatenate([have.matrix, added])
    rows_kept = dict(have.rows)
    start = 0 if have.matrix is None else len(have.matrix)
    for offset, (rowid, _blob, *columns) in enumerate(fresh):
        rows_kept[int(rowid)] = (tuple(columns), start + offset)
    last = max([have.last, *(int(row[0]) for row in rows)])
    _KEPT[_key(path, model_id, dim)] = Kept(rows_kept, matrix, last)
    return len(fresh)


def stack(
    conn: Any, found: Sequence[tuple[int, Identity]], model_id: str, dim: int
) -> tuple[list[int], NDArray[numpy.float32]]:
    """The vectors of the model of ``found`` (rowid, identity; rows listed with one), one row each
    in that order -- kept ones copied, the rest read from ``conn`` (a fresh process reads them all)
    -- and which places of ``found`` they are (a malformed vector, of the wrong length, is left out)."""
    import numpy as np

    here = kept(getattr(conn, "path", None), model_id, dim)
    matrix = np.empty((len(found), dim), dtype=np.float32)
    missing: dict[int, int] = {}
    if here is None or here.matrix is None:
        missing = {rowid: place for place, (rowid, _identity) in enumerate(found)}
    else:
        rows = here.rows
        places: list[int] = []
        positions: list[int] = []
        for place, (rowid, identity) in enumerate(found):
            entry = rows.get(rowid)
            if entry is not None and entry[0] == identity:
                places.append(place)
                positions.append(entry[1])
            else:
                missing[rowid] = place
        if places:
            matrix[places] = here.matrix[positions]
    unreadable: list[int] = []
    if missing:
        read = read_vectors(conn, list(missing), model_id, dim)
        for rowid, place in missing.items():
            vector = read.get(rowid)
            if vector is None:
                unreadable.append(place)
            else:
                matrix[place] = vector
    if not unreadable:
        return list(range(len(found))), matrix
    left = sorted(set(range(len(found))) - set(unreadable))
    return left, matrix[left]


IN_AT_ONCE = 500
"""Rowids per ``IN (...)``."""


def read_vectors(
    conn: Any, rowids: Sequence[int], model_id: str, dim: int
) -> dict[int, NDArray[numpy.float32]]:
    """The vectors of the model of these rows, from the store (rows without one are left out)."""
    import numpy as np

    out: dict[int, NDArray[numpy.float32]] = {}
    for start in range(0, len(rowids), IN_AT_ONCE):
        part = rowids[start : start + IN_AT_ONCE]
        marks = ", ".join("?" * len(part))
        for rowid, blob in conn.execute(
            f"SELECT row, vector FROM memory_vectors WHERE model_id = ? AND dim = ? AND row IN ({marks})",
            (model_id, dim, *part),
        ):
            if len(blob) == 4 * dim:
                out[int(rowid)] = np.frombuffer(blob, dtype=np.float32)
    return out
