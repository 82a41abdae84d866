"""Semantic and hybrid ranking: the query's embedding against the stored event vectors.

Only the query is embedded here; event vectors come from the index
(:mod:`korg_bridge.recall.vectors`). Two modes:

* ``semantic`` ranks by cosine similarity and drops events below
  ``min_score`` (default 0.30). Breakdown: ``vector`` and ``total`` (the
  cosine); ``bm25`` and ``recency`` are None, they take no part.
* ``hybrid`` scores the union of the top BM25 and the top vector candidates
  (:data:`CANDIDATES` each, more for a large ``top_n``) with
  ``total = w_bm25·bm25 + w_vec·vector + w_rec·recency``:

  - ``bm25`` is ``r / (r + 60)`` of the raw FTS5 value ``r``
    (:data:`HYBRID_BM25_HALF_SCORE`; keyword mode uses 5): it depends on the
    event and the query only, not on the other candidates, and lies in 0..1
    like a cosine, but it takes several rare matching terms to count for much,
    so a word shared by chance does not outweigh a close paraphrase. It is
    computed for every candidate, including those found by the vector side.
  - ``vector`` is the cosine, floored at 0; None (counted as 0) for an event
    not embedded yet, which still competes through BM25 and recency.
  - ``recency`` is ``exp(-age_days / tau_days)``; 0 for an event without a
    timestamp, 1 for one dated in the future.

  Every candidate competes (``min_score`` is the semantic mode's floor: a
  weaker model's paraphrase cosines sit below 0.30 and would be lost), but
  one with neither a keyword match nor a positive cosine is dropped: recency
  alone never makes a hit.

numpy is imported on the ranking path only, so the CLI can validate
:class:`Weights` in any mode without loading it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.embed import Embedder
from korg_bridge.recall.fts import Filters, filter_sql, keyword_sql, quote_fts
from korg_bridge.recall.index import Index
from korg_bridge.recall.modes import SEMANTIC_MODES
from korg_bridge.recall.search import KEYWORD_HALF_SCORE

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = [
    "CANDIDATES",
    "DEFAULT_MIN_SCORE",
    "SEMANTIC_MODES",
    "Breakdown",
    "Ranked",
    "Weights",
    "explain",
    "parse_weights",
    "rank",
]

DEFAULT_MIN_SCORE = 0.30
CANDIDATES = 100
"""Top BM25 hits and top vector hits each fed to hybrid scoring (4 x top_n when larger)."""
SEMANTIC_CANDIDATES = 1000
"""Most semantic-mode hits ranked: far more than collapsing repeated events can use up."""
SECONDS_PER_DAY = 86400.0

Breakdown = dict[str, float | None]
"""``{"bm25", "vector", "recency", "total"}``; None for a part that takes no part in the score."""


@dataclass(frozen=True, slots=True)
class Weights:
    """Hybrid weights and the recency time constant, all overridable per call."""

    bm25: float = 0.45
    vector: float = 0.45
    recency: float = 0.10
    tau_days: float = 30.0

    def to_dict(self) -> dict[str, float]:
        """JSON-ready."""
        return asdict(self)


def parse_weights(raw: Mapping[str, Any] | None) -> Weights:
    """Return the defaults overridden by ``raw`` (keys bm25, vector, recency, tau_days).

    Raises:
        UsageError: an unknown key, a value that is not a finite number, a
            negative weight, ``tau_days`` not above 0, or every weight 0.
    """
    if raw is None:
        return Weights()
    if not isinstance(raw, Mapping):
        raise UsageError('weights must be an object such as {"bm25": 0.5, "vector": 0.5}.')
    known = Weights.__dataclass_fields__
    unknown = [key for key in raw if key not in known]
    if unknown:
        raise UsageError(
            f"unknown weight(s) {', '.join(map(repr, unknown))}: use bm25, vector, recency, tau_days."
        )
    values: dict[str, float] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise UsageError(f"weight {key!r} must be a finite number, got {value!r}.")
        if value < 0 or (key == "tau_days" and value == 0):
            bound = "above 0" if key == "tau_days" else "0 or more"
            raise UsageError(f"weight {key!r} must be {bound}, got {value!r}.")
        values[key] = float(value)
    weights = Weights(**values)
    if weights.bm25 == weights.vector == weights.recency == 0:
        raise UsageError("at least one of the weights bm25, vector, recency must be above 0.")
    return weights


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked event, before collapsing and snippets."""

    event_id: int
    score: float
    breakdown: Breakdown


HYBRID_BM25_HALF_SCORE = 60.0
"""The raw BM25 value that counts as 0.5 inside a hybrid total.

Keyword mode maps ``r`` to ``r / (r + 5)``, so one common word already scores
about 0.5; inside a hybrid total that lets any event sharing a word with the
query outrank the paraphrase the vector side found. In hybrid, BM25 counts as
strong evidence only when several rare terms match. Chosen on the golden set
(bench/golden, MiniLM int8, events embedded as prose) by two-fold agreement:
split by target, each half's reworded MRR is best from 60 up (0.67 / 0.77,
against 0.50 / 0.49 at 5), and keyword-style queries stay at hit@5 1.00 for
every value tried; 60 is the smallest value both halves agree on, keeping BM25
as much weight as they allow."""


def keyword_score(rank: float, half: float = KEYWORD_HALF_SCORE) -> float:
    """The score for an FTS5 ``bm25()`` value (lower is better): ``r / (r + half)``."""
    raw = max(0.0, -rank)
    return raw / (raw + half)


def recency(ts: float | None, now: float, tau_days: float) -> float:
    """``exp(-age_days / tau_days)``; 0 without a timestamp."""
    if ts is None:
        return 0.0
    age_days = max(0.0, now - ts) / SECONDS_PER_DAY
    return math.exp(-age_days / tau_days)


# --- SQL (built apart from running it) ---------------------------------------------------------


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def candidates_sql(filters: Filters) -> tuple[str, list[Any]] | None:
    """Select the ids of the events ``filters`` allow; None when they allow every event."""
    where, params = filter_sql(filters)
    if not where:
        return None
    return f"SELECT e.id FROM events e WHERE {where}", params


def hybrid_keyword_sql(
    match: str, filters: Filters, candidates: Sequence[int], *, limit: int
) -> tuple[str, list[Any]]:
    """Rows ``(id, bm25)``: every ``candidates`` event that matches, then the best ``limit`` others.

    Sorting the candidates first costs nothing extra: FTS5 scores every match
    for ``ORDER BY rank`` anyway. Without candidates it is
    :func:`~korg_bridge.recall.fts.keyword_sql`.
    """
    if not candidates:
        return keyword_sql(match, filters, limit=limit)
    where, params = filter_sql(filters)
    marks = _placeholders(len(candidates))
    if not where:
        sql = (
            "SELECT rowid, bm25(events_fts) AS rank\n"
            "FROM events_fts\n"
            "WHERE events_fts MATCH ?\n"
            f"ORDER BY rowid IN ({marks}) DESC, rank\n"
            "LIMIT ?"
        )
        return sql, [match, *candidates, limit + len(candidates)]
    sql = (
        "SELECT e.id, bm25(events_fts) AS rank\n"
        "FROM events_fts JOIN events e ON e.id = events_fts.rowid\n"
        f"WHERE events_fts MATCH ? AND {where}\n"
        f"ORDER BY e.id IN ({marks}) DESC, rank\n"
        "LIMIT ?"
    )
    return sql, [match, *params, *candidates, limit + len(candidates)]


def bm25_of_sql(count: int) -> str:
    """FTS5 ``bm25()`` of ``count`` given rowids for one ``MATCH`` expression (the first parameter)."""
    return (
        "SELECT rowid, bm25(events_fts) FROM events_fts\n"
        f"WHERE events_fts MATCH ? AND rowid IN ({_placeholders(count)})"
    )


def details_of_sql(count: int) -> str:
    """Timestamp (epoch) and text of ``count`` events."""
    return f"SELECT id, ts, text FROM events WHERE id IN ({_placeholders(count)})"


# --- ranking ---------------------------------------------------------------------------------


def _top(values: NDArray[numpy.float32], count: int) -> NDArray[numpy.intp]:
    """Positions of the ``count`` largest values, largest first."""
    import numpy as np

    if len(values) > count:
        part = np.argpartition(-values, count)[:count]
        return part[np.argsort(-values[part], kind="stable")]
    return np.argsort(-values, kind="stable")


def _bm25_of(index: Index, match: str, ids: Sequence[int]) -> dict[int, float]:
    if not match or not ids:
        return {}
    rows = index.read(lambda conn: conn.execute(bm25_of_sql(len(ids)), [match, *ids]).fetchall())
    return {int(event_id): keyword_score(value, HYBRID_BM25_HALF_SCORE) for event_id, value in rows}


def _details(index: Index, ids: Sequence[int]) -> dict[int, tuple[float | None, str]]:
    if not ids:
        return {}
    rows = index.read(lambda conn: conn.execute(details_of_sql(len(ids)), list(ids)).fetchall())
    return {int(event_id): (ts, text) for event_id, ts, text in rows}


def _combine(bm25: float, cosine: float | None, ts: float | None, weights: Weights, now: float) -> Breakdown:
    vector = None if cosine is None else max(0.0, cosine)
    fresh = recency(ts, now, weights.tau_days)
    total = weights.bm25 * bm25 + weights.vector * (vector or 0.0) + weights.recency * fresh
    return {
        "bm25": round(bm25, 4),
        "vector": None if vector is None else round(vector, 4),
        "recency": round(fresh, 4),
        "total": round(total, 4),
    }


def rank(
    index: Index,
    query: str,
    *,
    mode: str,
    embedder: Embedder,
    filters: Filters,
    min_score: float,
    weights: Weights,
    top_n: int,
    now: float | None = None,
) -> list[Ranked]:
    """Rank events for ``query`` in ``mode`` (``semantic`` or ``hybrid``), best first.

    Returns more candidates than ``top_n``: the caller collapses repeats.

    Raises:
        UsageError: ``mode`` is not semantic or hybrid.
        KorgError: the index cannot be read.
    """
    import numpy as np

    if mode not in SEMANTIC_MODES:
        raise UsageError(f"unknown ranking mode {mode!r}: use one of {', '.join(SEMANTIC_MODES)}.")
    from korg_bridge.recall.vectors import similarities

    query_vector = embedder.embed([query])[0]
    ids, sims = similarities(index, embedder.model_id, embedder.dim, query_vector)
    allowed_sql = candidates_sql(filters)
    if allowed_sql is not None and len(ids):
        sql, params = allowed_sql
        allowed = index.read(lambda conn: [row[0] for row in conn.execute(sql, params)])
        keep = np.isin(ids, np.asarray(allowed, dtype=np.int64))
        ids, sims = ids[keep], sims[keep]

    if mode == "semantic":
        above = sims >= min_score
        ids, sims = ids[above], sims[above]
        order = _top(sims, SEMANTIC_CANDIDATES)
        ranked = []
        for position in order:
            cosine = round(float(sims[position]), 4)
            breakdown: Breakdown = {"bm25": None, "vector": cosine, "recency": None, "total": cosine}
            ranked.append(Ranked(int(ids[position]), cosine, breakdown))
        return ranked

    count = max(CANDIDATES, 4 * top_n)
    cosines = {int(ids[position]): float(sims[position]) for position in _top(sims, count)}
    match = quote_fts(query)
    bm25: dict[int, float] = {}
    if match:
        # One FTS5 pass gives both the top BM25 hits and the BM25 of every vector candidate:
        # asking for the candidates in a second query would cost a second pass over the matches.
        sql, params = hybrid_keyword_sql(match, filters, list(cosines), limit=count)
        rows = index.read(lambda conn: conn.execute(sql, params).fetchall())
        rows.sort(key=lambda row: row[1])
        top = {int(event_id) for event_id, _ in rows[:count]}
        bm25 = {
            int(event_id): keyword_score(value, HYBRID_BM25_HALF_SCORE)
            for event_id, value in rows
            if event_id in top or event_id in cosines
        }
    keyword_only = np.asarray([event_id for event_id in bm25 if event_id not in cosines], dtype=np.int64)
    if len(keyword_only) and len(ids):
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        slots = np.minimum(np.searchsorted(sorted_ids, keyword_only), len(sorted_ids) - 1)
        for event_id, slot in zip(keyword_only.tolist(), slots.tolist(), strict=True):
            if sorted_ids[slot] == event_id:
                cosines[event_id] = float(sims[order[slot]])
    when = time.time() if now is None else now
    details = _details(index, sorted(set(bm25) | set(cosines)))
    ranked = []
    for event_id, (ts, _text) in details.items():
        similarity = cosines.get(event_id)
        keyword = bm25.get(event_id, 0.0)
        if keyword <= 0 and (similarity is None or similarity <= 0):
            continue
        breakdown = _combine(keyword, similarity, ts, weights, when)
        ranked.append(Ranked(event_id, breakdown["total"] or 0.0, breakdown))
    ranked.sort(key=lambda item: (-item.score, -item.event_id))
    return ranked


def explain(
    index: Index,
    query: str,
    event_ids: Sequence[int],
    *,
    embedder: Embedder | None,
    weights: Weights,
    now: float | None = None,
) -> dict[int, Breakdown]:
    """The hybrid breakdown of each event of ``event_ids`` for ``query`` (what ``show --query`` prints).

    The cosine comes from embedding the events' text now, as indexing does
    (a handful of events; no need to find their stored chunk); without an
    embedder it is None and counts as 0.

    Raises:
        KorgError: the index cannot be read.
    """
    ids = list(dict.fromkeys(event_ids))
    details = _details(index, ids)
    present = [event_id for event_id in ids if event_id in details]
    bm25 = _bm25_of(index, quote_fts(query), present)
    cosines: dict[int, float] = {}
    if embedder is not None and present and query.strip():
        import numpy as np

        from korg_bridge.recall.vectors import embed_texts

        texts = index.read(lambda conn: embed_texts(conn, present))
        matrix = embedder.embed([query, *(texts[event_id][1] for event_id in present)])
        values = matrix[1:] @ matrix[0]
        cosines = {
            event_id: float(value) for event_id, value in zip(present, np.atleast_1d(values), strict=True)
        }
    when = time.time() if now is None else now
    return {
        event_id: _combine(
            bm25.get(event_id, 0.0), cosines.get(event_id), details[event_id][0], weights, when
        )
        for event_id in present
    }
