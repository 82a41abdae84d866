"""Embeddings in a team store: pgvector ``halfvec`` columns, an HNSW index, per-tenant queries.

One HNSW index per model dimension (:data:`.schema.HNSW_DIMS`) serves every tenant;
row-level security then keeps the tenant's rows. That is the known pgvector
pitfall: an approximate index scan yields its ``ef_search`` best candidates *of
all tenants*, the tenant filter drops most of them, and the query silently
returns fewer than ``k`` rows. Each query here therefore runs with
``hnsw.iterative_scan = relaxed_order`` (pgvector 0.8): the scan goes on past
``ef_search`` until ``k`` rows passed every filter (or :data:`MAX_SCAN_TUPLES`
were visited), and the outer query puts the relaxed order right.

Vectors of a dimension without an index are compared by an exact scan of the
tenant's rows (one b-tree range: exact and fast at a tenant's size).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory.backend.pg.schema import HNSW_DIMS

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "ALIKE_SQL",
    "EF_SEARCH",
    "MAX_SCAN_TUPLES",
    "PG_VECTORS",
    "PgVectors",
    "coverage_sql",
    "literal",
    "nearest",
    "nearest_sql",
]

EF_SEARCH = 40
"""Candidates the HNSW scan keeps per step (pgvector's default); iterative scans add more as needed."""
MAX_SCAN_TUPLES = 20_000
"""The most index entries one iterative scan visits (pgvector's default): a bound, not a target."""

_CURRENT = "m.superseded_by IS NULL AND m.state IN ('live', 'pending')"
ALIKE_SQL = (
    "SELECT a.row, b.row, 1 - (a.vector <=> b.vector) FROM memory_vectors a JOIN memory_vectors b "
    "ON b.tenant_id = a.tenant_id AND b.row > a.row AND b.model_id = a.model_id AND b.dim = a.dim "
    "WHERE a.model_id = ? AND a.dim = ? AND a.row = ANY(?) AND b.row = ANY(?)"
)
"""The cosine of each two of the given rows with a vector of one model (``(lower, higher, cosine)``).
Params: the model id, the dimension, the rows (twice)."""


def literal(vector: Any) -> str:
    """A vector as pgvector's text form (``[0.1,0.2,…]``), bound as a parameter and cast."""
    values = vector.tolist() if hasattr(vector, "tolist") else list(vector)
    return "[" + ",".join(f"{float(x):.6g}" for x in values) + "]"


def nearest_sql(dim: int, *, indexed: bool, where: str = f"m.scope = ? AND {_CURRENT}") -> str:
    """Rows matching ``where`` (default: the live or pending heads of one scope) with a vector of one
    model, closest first: ``(rowid, id, cosine)``.

    ``indexed``: through the HNSW index of ``dim`` (the expression must be the index's);
    else an exact scan. Params: the vector (twice), the model id, ``where``'s params (the
    default's: the scope), the vector, the limit.
    """
    distance = f"v.vector::halfvec({dim}) <=> ?::halfvec({dim})" if indexed else "v.vector <=> ?::halfvec"
    return f"""
        SELECT rowid, id, cosine FROM (
            SELECT m.rowid, m.id, 1 - ({distance}) AS cosine, {distance} AS distance
            FROM memory_vectors v JOIN memory m ON m.tenant_id = v.tenant_id AND m.rowid = v.row
            WHERE v.dim = {int(dim)} AND v.model_id = ? AND {where}
            ORDER BY {distance}
            LIMIT ?
        ) AS found
        ORDER BY distance, rowid
    """


def _settings(tx: Tx, *, iterative: bool) -> None:
    tx.execute(
        "SELECT set_config('hnsw.iterative_scan', ?, true), set_config('hnsw.ef_search', ?, true), "
        "set_config('hnsw.max_scan_tuples', ?, true)",
        ("relaxed_order" if iterative else "off", str(EF_SEARCH), str(MAX_SCAN_TUPLES)),
    )


def nearest(
    tx: Tx,
    scope: str,
    model_id: str,
    dim: int,
    vector: Any,
    k: int,
    *,
    exact: bool = False,
    iterative: bool = True,
) -> list[tuple[str, float]]:
    """The ``k`` closest heads of ``scope`` (id, cosine), closest first. ``exact`` compares every
    vector of the tenant (what the index is measured against); ``iterative`` off shows the pitfall."""
    _settings(tx, iterative=iterative)
    text = literal(vector)
    sql = nearest_sql(dim, indexed=dim in HNSW_DIMS and not exact)
    rows = tx.execute(sql, (text, text, model_id, scope, text, k)).fetchall()
    return [(str(memory_id), float(cosine)) for _rowid, memory_id, cosine in rows]


def coverage_sql(every_scope: bool) -> str:
    """Live heads (of the scopes given as one array parameter, or all) and how many have a vector
    of one model. Params: the model id, the dimension, (the scopes)."""
    scopes = "" if every_scope else " AND m.scope = ANY(?)"
    return (
        "SELECT count(*), count(v.row) FROM memory m LEFT JOIN memory_vectors v "
        "ON v.tenant_id = m.tenant_id AND v.row = m.rowid AND v.model_id = ? AND v.dim = ? "
        f"WHERE m.superseded_by IS NULL AND m.state = 'live'{scopes}"
    )


class PgVectors:
    """:class:`~..backend.VectorStore` of a team store."""

    def missing(
        self, tx: Tx, scope: str | None, model_id: str, dim: int, limit: int
    ) -> list[tuple[int, str, str]]:
        where = "" if scope is None else "m.scope = ? AND "
        rows = tx.execute(
            f"SELECT m.rowid, m.title, m.body FROM memory m WHERE {where}{_CURRENT} "
            "AND NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.tenant_id = m.tenant_id "
            "AND v.row = m.rowid AND v.model_id = ? AND v.dim = ?) "
            "ORDER BY m.recorded_at DESC, m.rowid DESC LIMIT ?",
            (*(() if scope is None else (scope,)), model_id, dim, limit),
        ).fetchall()
        return [(int(rowid), str(title), str(body)) for rowid, title, body in rows]

    def put(self, tx: Tx, rowid: int, model_id: str, dim: int, vector: Any) -> None:
        tx.execute(
            "INSERT INTO memory_vectors (row, model_id, dim, vector) VALUES (?, ?, ?, ?::halfvec) "
            "ON CONFLICT (tenant_id, row) DO UPDATE SET model_id = excluded.model_id, dim = excluded.dim, "
            "vector = excluded.vector",
            (rowid, model_id, dim, literal(vector)),
        )

    def drop(self, tx: Tx, rowids: Sequence[int]) -> None:
        tx.execute("DELETE FROM memory_vectors WHERE row = ANY(?)", (list(rowids),))

    def cosines(
        self, tx: Tx, scope: str, model_id: str, dim: int, vector: Any, limit: int
    ) -> tuple[dict[str, float], bool | None]:
        out: dict[str, float] = {}
        for memory_id, cosine in nearest(tx, scope, model_id, dim, vector, limit):
            out[memory_id] = max(out.get(memory_id, -1.0), cosine)
        return out, None  # the nearest through the index: which heads lack a vector is not seen

    def coverage(self, tx: Tx, scopes: Sequence[str] | None, model_id: str, dim: int) -> tuple[int, int]:
        params: tuple[object, ...] = (model_id, dim) if scopes is None else (model_id, dim, list(scopes))
        live, embedded = tx.execute(coverage_sql(scopes is None), params).fetchone()
        return int(live), int(embedded)

    def nearest_rows(
        self, tx: Tx, where: str, params: Sequence[object], model_id: str, dim: int, vector: Any, limit: int
    ) -> list[tuple[int, float]]:
        # The tenant's rows through the shared HNSW index, with iterative scans: k rows that pass
        # the tenant, scope and version filters, not the index's first ef_search of all tenants.
        if limit < 1:
            return []
        _settings(tx, iterative=True)
        text = literal(vector)
        sql = nearest_sql(dim, indexed=dim in HNSW_DIMS, where=where)
        rows = tx.execute(sql, (text, text, model_id, *params, text, limit)).fetchall()
        return [(int(rowid), float(cosine)) for rowid, _memory_id, cosine in rows]

    def cosines_of(
        self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int, vector: Any
    ) -> dict[int, float]:
        if not rowids:
            return {}
        rows = tx.execute(
            "SELECT v.row, 1 - (v.vector <=> ?::halfvec) FROM memory_vectors v "
            "WHERE v.model_id = ? AND v.dim = ? AND v.row = ANY(?)",
            (literal(vector), model_id, dim, list(rowids)),
        ).fetchall()
        return {int(rowid): float(cosine) for rowid, cosine in rows}

    def alike(self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int) -> dict[tuple[int, int], float]:
        if len(rowids) < 2:
            return {}
        rows = tx.execute(ALIKE_SQL, (model_id, dim, list(rowids), list(rowids))).fetchall()
        return {(int(low), int(high)): float(cosine) for low, high, cosine in rows}


PG_VECTORS = PgVectors()
