"""A SQLite store's memory vectors: float32 blobs in ``memory_vectors``, compared in numpy.

The :class:`~korg_bridge.recall.memory.backend.protocols.VectorStore` of :mod:`.store`; numpy
is imported only when vectors are compared, so a keyword-only process never loads it. What is
embedded, and when, is :mod:`korg_bridge.recall.memory.embedding`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from korg_bridge.recall.memory.backend.sqlite.resident import dot_rows, read_vectors, scored
from korg_bridge.recall.memory.backend.sqlite.schema import HEADS_INDEX, SCOPE_INDEX, VECTOR_INDEX
from korg_bridge.recall.memory.rows import match_where

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx


_HEADS = "m.scope = ? AND m.superseded_by IS NULL AND m.state IN ('live', 'pending')"
"""Live and pending heads of a scope."""
_HEADS_VECTORS = (
    f"SELECT m.rowid, v.stamp, m.id, v.row IS NOT NULL FROM memory m INDEXED BY {HEADS_INDEX} "
    f"LEFT JOIN memory_vectors v INDEXED BY {VECTOR_INDEX} "
    f"ON v.model_id = ? AND v.dim = ? AND v.row = m.rowid WHERE {_HEADS} ORDER BY m.rowid"
)
"""Every live or pending head of a scope: rowid, its vector's stamp, memory id, whether it has a
vector of the model (the rows of :func:`listing_sql` that have one, and those without). Params: the
model id, the dimension, the scope."""


def missing_sql(every_scope: bool) -> str:
    """Live or pending heads without a vector of one model, newest first. Params: (the scope,) the
    model id, the dimension, the limit."""
    scope = "" if every_scope else "m.scope = ? AND "
    return (
        f"SELECT m.rowid, m.title, m.body FROM memory m INDEXED BY {HEADS_INDEX} WHERE {scope}m.superseded_by IS NULL "
        "AND m.state IN ('live', 'pending') AND NOT EXISTS (SELECT 1 FROM memory_vectors v "
        f"INDEXED BY {VECTOR_INDEX} WHERE v.row = m.rowid AND v.model_id = ? AND v.dim = ?) ORDER BY m.recorded_at DESC, m.rowid DESC LIMIT ?"
    )


def listing_sql(where: str) -> str:
    """Rows of ``memory m`` matching ``where``, in rowid order: rowid and its vector's stamp,
    whether it has a vector of one model, whether it is a live head -- from two indexes, without
    reading a row or a vector. Params: the model id, the dimension, ``where``'s."""
    return (
        "SELECT m.rowid, v.stamp, v.row IS NOT NULL, m.superseded_by IS NULL AND m.state = 'live' "
        f"FROM memory m INDEXED BY {SCOPE_INDEX} LEFT JOIN memory_vectors v INDEXED BY {VECTOR_INDEX} "
        f"ON v.model_id = ? AND v.dim = ? AND v.row = m.rowid WHERE {where} ORDER BY m.rowid"
    )


class _Listing(NamedTuple):
    """One pass over the rows a search by meaning may rank (:func:`listing_sql`)."""

    found: list[tuple[int, int | None]]
    """Rowid and stamp of each row with a vector, in rowid order."""
    live: int
    """Live heads among the rows."""
    embedded: int
    """Of them, those with a vector."""


def coverage_sql(scope_count: int | None) -> str:
    """Live heads (of ``scope_count`` scopes, or all) and how many have a vector of one model.
    Params: the model id, the dimension, (the scopes)."""
    scopes = "" if scope_count is None else f" AND m.scope IN ({', '.join('?' * scope_count)})"
    return (
        f"SELECT count(*), count(v.row) FROM memory m INDEXED BY {HEADS_INDEX} "
        f"LEFT JOIN memory_vectors v INDEXED BY {VECTOR_INDEX} "
        "ON v.row = m.rowid AND v.model_id = ? AND v.dim = ? "
        f"WHERE m.superseded_by IS NULL AND m.state = 'live'{scopes}"
    )


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
    ) -> tuple[dict[str, float], bool | None]:
        # Every head of the scope, scored in numpy (a Python loop of dot products cost 11 ms at 10k);
        # the heads without a vector come from the same listing (a second pass over the scope's
        # heads, to ask which lack one, was 3 ms of every remember).
        import numpy as np

        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1 or query.size != dim:
            return {}, None
        listed = tx.execute(_HEADS_VECTORS, (model_id, dim, scope)).fetchall()
        found = [row for row in listed if row[3]]
        lacking = len(found) < len(listed)
        if not found:
            return {}, lacking
        places, sims = scored(tx, found, model_id, dim, query)
        ids = [str(found[place][2]) for place in places]
        # A lineage's greatest cosine, never below -1 (NaN: -1). Built by dict() in C: a Python
        # loop over 10k heads was 3 ms of every remember. One head per lineage is the usual case.
        values = np.fmax(sims, np.float32(-1.0)).tolist()
        out = dict(zip(ids, values, strict=True))
        if len(out) < len(ids):  # a lineage with a live head and a pending proposal
            out = {}
            for memory_id, value in zip(ids, values, strict=True):
                out[memory_id] = max(out.get(memory_id, -1.0), value)
        return out, lacking

    def coverage(self, tx: Tx, scopes: Sequence[str] | None, model_id: str, dim: int) -> tuple[int, int]:
        if scopes is not None and getattr(tx, "listed", None) is not None:
            # In a read: a recall ranks these scopes' rows next (nearest_rows), from this listing.
            _found, live, embedded = _listed(
                tx, match_where(len(scopes), 0, heads_only=False), scopes, model_id, dim
            )
            return live, embedded
        sql = coverage_sql(None if scopes is None else len(scopes))
        live, embedded = tx.execute(sql, (model_id, dim, *(scopes or ()))).fetchone()
        return int(live), int(embedded)

    def nearest_rows(
        self, tx: Tx, where: str, params: Sequence[object], model_id: str, dim: int, vector: Any, limit: int
    ) -> list[tuple[int, float]]:
        # Every vector the condition allows, one matrix product: a store's few thousand rows cost
        # milliseconds, and an exact answer needs no index.
        # The scores are the same bytes whether a vector was kept by an engine (:mod:`.resident`)
        # or read here.
        import numpy as np

        query = np.asarray(vector, dtype=np.float32)
        if query.ndim != 1 or query.size != dim or limit < 1:
            return []
        found = _listed(tx, where, params, model_id, dim).found
        if not found:
            return []
        places, sims = scored(tx, found, model_id, dim, query)
        memo = getattr(tx, "scored", None)
        if memo is not None:  # rowid order (listing_sql's), as cosines_of looks them up
            listed = np.fromiter((found[place][0] for place in places), dtype=np.int64, count=len(places))
            memo[(model_id, dim, query.tobytes())] = (listed, sims)
        order = np.argsort(-sims, kind="stable")[:limit]
        return [(int(found[places[i]][0]), float(sims[i])) for i in order.tolist()]

    def cosines_of(
        self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int, vector: Any
    ) -> dict[int, float]:
        # A search by meaning scored every row it listed (nearest_rows): the rows it then ranks by
        # keywords are among them, and reading their vectors again was 2 ms of a hybrid recall.
        # The same bytes either way: each row's cosine is summed on its own (dot_rows).
        import numpy as np

        query = np.asarray(vector, dtype=np.float32)
        out: dict[int, float] = {}
        memo = getattr(tx, "scored", None)
        hit = None if not memo or not rowids else memo.get((model_id, dim, query.tobytes()))
        if hit is not None:
            listed, sims = hit
            wanted = np.asarray(rowids, dtype=np.int64)
            at = np.minimum(np.searchsorted(listed, wanted), len(listed) - 1)
            known = listed[at] == wanted if len(listed) else np.zeros(len(wanted), dtype=bool)
            out = dict(zip(wanted[known].tolist(), sims[at[known]].tolist(), strict=True))
            rowids = wanted[~known].tolist()
        order, matrix = _read_matrix(tx, rowids, model_id, dim)
        if order:
            sims = dot_rows(matrix, query)
            out.update(zip(order, sims.tolist(), strict=True))
        return out

    def alike(self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int) -> dict[tuple[int, int], float]:
        if len(rowids) < 2:
            return {}
        order, matrix = _read_matrix(tx, rowids, model_id, dim)
        if len(order) < 2:
            return {}
        sims = (matrix @ matrix.T).tolist()
        return {
            (order[i], order[j]): float(sims[i][j])
            for i in range(len(order))
            for j in range(i + 1, len(order))
        }


def _listed(tx: Tx, where: str, params: Sequence[object], model_id: str, dim: int) -> _Listing:
    """:func:`listing_sql`'s rows, read once per read-only transaction (its ``listed``; in a write,
    each time): a recall by meaning asks first how much of its scopes is embedded, then ranks their
    rows -- two passes over the same rows and the same vector index, 4 ms each at 4k memories."""
    memo: dict[tuple[str, tuple[object, ...], str, int], _Listing] | None = getattr(tx, "listed", None)
    key = (where, tuple(params), model_id, dim)
    listing = None if memo is None else memo.get(key)
    if listing is None:
        rows = tx.execute(listing_sql(where), (model_id, dim, *params)).fetchall()
        found = [(rowid, stamp) for rowid, stamp, has, _live in rows if has]
        live = sum(1 for row in rows if row[3])
        embedded = sum(1 for row in rows if row[3] and row[2])
        listing = _Listing(found, live, embedded)
        if memo is not None:
            memo[key] = listing
    return listing


def _read_matrix(tx: Tx, rowids: Sequence[int], model_id: str, dim: int) -> tuple[list[int], Any]:
    """The vectors of the model of these rows, read from the store, one row each in rowid order
    (rows without a readable one left out), and their rowids."""
    import numpy as np

    read = read_vectors(tx, list(dict.fromkeys(rowids)), model_id, dim) if rowids else {}
    order = sorted(read)
    if not order:
        return [], np.zeros((0, dim), dtype=np.float32)
    return order, np.stack([read[rowid] for rowid in order])


SQLITE_VECTORS = SqliteVectors()
