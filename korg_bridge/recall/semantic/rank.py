"""Semantic and hybrid ranking: the query's embedding against the stored event vectors.

Only the query is embedded here; event vectors come from the index
(:mod:`korg_bridge.recall.semantic.vectors`), an event scoring by its best window.

* ``semantic`` ranks embedded events by cosine similarity and drops those
  below ``min_score`` (default 0.30). Breakdown: ``vector`` and ``total`` (the
  cosine); ``bm25`` and ``recency`` are None.
* ``hybrid`` fuses two rankings over the union of their top candidates
  (:data:`CANDIDATES` each, more for a large ``top_n``): keyword mode's own
  BM25 ranking (:mod:`korg_bridge.recall.history.query.keyword`) and the cosine ranking,
  with ``total = w_bm25·bm25 + w_vec·vector + w_rec·recency``:

  - ``bm25`` is ``r / (r + 60)`` of the raw FTS5 value ``r``
    (:data:`HYBRID_BM25_HALF_SCORE`; keyword mode uses 5): it depends on the
    event and the query only, lies in 0..1 like a cosine, and takes several
    rare matching terms to count for much, so a word shared by chance does
    not outweigh a close paraphrase.
  - ``vector`` is the cosine of the event's best window, floored at 0.
  - ``recency`` is ``exp(-age_days / tau_days)``; 0 without a timestamp.

  **An event without a vector is never penalised** (the background indexer
  may not have reached it): it is given the cosine found at its keyword rank
  in the vector ranking (``vector_imputed`` in its breakdown; ``vector`` is
  None). So the k-th keyword hit can be passed only by the k-1 events above
  it in keyword rank and the k-1 with a better cosine: on a half-embedded
  index, hybrid finds every keyword-style golden target keyword mode finds
  (without this, a third were lost to embedded neighbours).
  **An event holding every query term** keeps at least that cosine too,
  embedded or not: a long event whose words match (a test log, a long reply)
  has a diluted vector, and neighbours sharing a word and some meaning must
  not pass it (on the tune half, one deep-in-event target of four was lost
  so; a reworded query rarely has all its words in one event, and its
  figures did not move).

  Every candidate competes (``min_score`` is the semantic mode's floor), but
  one with neither a keyword match nor a positive cosine is dropped: recency
  alone never makes a hit.

Tried on the golden set's tune half and not kept: reciprocal-rank fusion
(reworded hit@5 0.56 against 0.81: a reworded query's keyword top hit is
noise, and RRF trusts rank 1 of either list alike) and query expansion from
the top keyword hits' vectors (0.70 and 0.63 for weights 0.3 and 0.6: the
same noise pulls the query away).

numpy is imported on the ranking path only, so the CLI can validate
:class:`Weights` in any mode without loading it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.history.index import Index
from korg_bridge.recall.history.query.fts import Filters, filter_sql, query_terms, quote_fts
from korg_bridge.recall.history.query.hits import Breakdown, Ranked
from korg_bridge.recall.history.query.keyword import full_ranking, ranking
from korg_bridge.recall.history.query.scores import keyword_score, recency
from korg_bridge.recall.semantic.model import Embedder
from korg_bridge.recall.semantic.modes import SEMANTIC_MODES

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = [
    "CANDIDATES",
    "DEFAULT_MIN_SCORE",
    "SEMANTIC_MODES",
    "Ranked",
    "SemanticRanker",
    "Weights",
    "explain",
    "parse_weights",
]

DEFAULT_MIN_SCORE = 0.30
CANDIDATES = 100
"""Top BM25 hits and top vector hits each fed to hybrid scoring (4 x top_n when larger)."""
SEMANTIC_CANDIDATES = 1000
"""Most semantic-mode hits ranked: far more than collapsing repeated events can use up."""


HYBRID_BM25_HALF_SCORE = 60.0
"""The raw BM25 value that counts as 0.5 inside a hybrid total.

Keyword mode maps ``r`` to ``r / (r + 5)``, so one common word already scores
about 0.5; inside a hybrid total that lets any event sharing a word with the
query outrank the paraphrase the vector side found. In hybrid, BM25 counts as
strong evidence only when several rare terms match. Checked on the golden
set's tune half (bench/golden, MiniLM int8): 20-200 tried, 60 at or near the
best reworded hit@5 and MRR with keyword-style queries at 1.00 throughout."""


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


# --- SQL (built apart from running it) ---------------------------------------------------------


def _placeholders(count: int) -> str:
    return ", ".join("?" * count)


def candidates_sql(filters: Filters) -> tuple[str, list[Any]] | None:
    """Select the ids of the events ``filters`` allow; None when they allow every event."""
    where, params = filter_sql(filters)
    if not where:
        return None
    return f"SELECT e.id FROM events e WHERE {where}", params


LISTED_MAX = 8
"""Rowids a ``MATCH`` is asked about one by one (``rowid IN (…)``); more are found in one pass over
the matching events between the least and the greatest. FTS5 restarts its query for every listed
rowid -- 0.04-0.35 ms each over 20k events, by how common the words are -- where one pass costs
about 2 µs per matching event: for hybrid's hundred candidates the pass was 2-10 times faster
(``bench/engine_bench.py``'s queries)."""


def _of_rows(select: str, count: int) -> str:
    """``select`` (over ``events_fts``, first parameter the ``MATCH``) restricted to ``count`` given
    rowids (params: the rowids), or for more than :data:`LISTED_MAX` to the span between the least
    and the greatest (params: those two; the caller keeps the rows asked about)."""
    if count <= LISTED_MAX:
        return f"{select}\nWHERE events_fts MATCH ? AND rowid IN ({_placeholders(count)})"
    return f"{select}\nWHERE events_fts MATCH ? AND rowid BETWEEN ? AND ?"


def _rows_params(ids: Sequence[int]) -> list[int]:
    """The parameters :func:`_of_rows` takes after the ``MATCH`` for ``ids``."""
    return list(ids) if len(ids) <= LISTED_MAX else [min(ids), max(ids)]


def complete_sql(terms: Sequence[str], count: int) -> tuple[str, str]:
    """``(sql, match)``: which of ``count`` rowids hold every one of ``terms`` (an FTS5 AND of
    quoted phrases, so no term can change the expression's meaning); see :func:`_of_rows`."""
    match = " AND ".join('"' + term.replace('"', '""') + '"' for term in terms)
    return _of_rows("SELECT rowid FROM events_fts", count), match


def bm25_of_sql(count: int) -> str:
    """FTS5 ``bm25()`` of ``count`` given rowids for one ``MATCH`` expression (the first parameter);
    see :func:`_of_rows`."""
    return _of_rows("SELECT rowid, bm25(events_fts) FROM events_fts", count)


def details_of_sql(count: int) -> str:
    """Timestamp (epoch) of ``count`` events."""
    return f"SELECT id, ts FROM events WHERE id IN ({_placeholders(count)})"


# --- ranking ---------------------------------------------------------------------------------


def _top(values: NDArray[numpy.float32], count: int) -> NDArray[numpy.intp]:
    """Positions of the ``count`` largest values, largest first."""
    import numpy as np

    if len(values) > count:
        part = np.argpartition(-values, count)[:count]
        return part[np.argsort(-values[part], kind="stable")]
    return np.argsort(-values, kind="stable")


def _bm25_of(index: Index, match: str, ids: Sequence[int]) -> dict[int, float]:
    """Raw FTS5 ``bm25()`` values of some events for ``match`` (absent: no term matches)."""
    if not match or not ids:
        return {}
    wanted = set(ids)
    sql, params = bm25_of_sql(len(wanted)), [match, *_rows_params(list(wanted))]
    rows = index.read(lambda conn: conn.execute(sql, params).fetchall())
    return {int(event_id): float(value) for event_id, value in rows if event_id in wanted}


def _complete(index: Index, query: str, ids: Sequence[int]) -> set[int]:
    """The events of ``ids`` that hold every term of ``query``."""
    terms = query_terms(query)
    if not terms or not ids:
        return set()
    wanted = set(ids)
    sql, match = complete_sql(terms, len(wanted))
    params = [match, *_rows_params(list(wanted))]
    return {int(row[0]) for row in index.read(lambda conn: conn.execute(sql, params).fetchall())} & wanted


def _times(index: Index, ids: Sequence[int]) -> dict[int, float | None]:
    if not ids:
        return {}
    rows = index.read(lambda conn: conn.execute(details_of_sql(len(ids)), list(ids)).fetchall())
    return {int(event_id): ts for event_id, ts in rows}


def _allowed(
    index: Index, filters: Filters, ids: NDArray[numpy.int64], sims: NDArray[numpy.float32]
) -> tuple[NDArray[numpy.int64], NDArray[numpy.float32]]:
    import numpy as np

    allowed_sql = candidates_sql(filters)
    if allowed_sql is None or not len(ids):
        return ids, sims
    sql, params = allowed_sql
    allowed = index.read(lambda conn: [row[0] for row in conn.execute(sql, params)])
    keep = np.isin(ids, np.asarray(allowed, dtype=np.int64))
    return ids[keep], sims[keep]


def _semantic(ids: NDArray[numpy.int64], sims: NDArray[numpy.float32], min_score: float) -> list[Ranked]:
    above = sims >= min_score
    ids, sims = ids[above], sims[above]
    ranked = []
    for position in _top(sims, SEMANTIC_CANDIDATES):
        cosine = round(float(sims[position]), 4)
        breakdown: Breakdown = {"bm25": None, "vector": cosine, "recency": None, "total": cosine}
        ranked.append(Ranked(int(ids[position]), cosine, breakdown))
    return ranked


def _keyword_side(index: Index, query: str, filters: Filters, count: int) -> list[tuple[int, float]]:
    """Keyword mode's own top ``count`` ``(id, bm25)``, best first."""
    match = quote_fts(query)
    if not match:
        return []
    terms = query_terms(query)

    def top(conn: Any) -> list[tuple[int, float]]:
        ranked, windowed = ranking(conn, match, terms, filters, first=count)
        found = list(itertools.islice(ranked, count))
        if len(found) < count and windowed:
            found = list(itertools.islice(full_ranking(conn, match, filters, first=count), count))
        return [(int(event_id), float(value)) for event_id, value in found]

    result: list[tuple[int, float]] = index.read(top)
    return result


def _hybrid(
    index: Index,
    query: str,
    ids: NDArray[numpy.int64],
    sims: NDArray[numpy.float32],
    filters: Filters,
    weights: Weights,
    top_n: int,
    now: float,
) -> list[Ranked]:
    import numpy as np

    count = max(CANDIDATES, 4 * top_n)
    keyword = _keyword_side(index, query, filters, count)
    keyword_rank = {event_id: position + 1 for position, (event_id, _) in enumerate(keyword)}
    raw_bm25 = dict(keyword)
    best = _top(sims, count)
    vector_top = [int(ids[position]) for position in best]
    top_cosines = [max(0.0, float(sims[position])) for position in best]
    candidates = list(dict.fromkeys([event_id for event_id, _ in keyword] + vector_top))
    # The exact cosine of every candidate that has a vector (a keyword hit may lie outside the top).
    cosines: dict[int, float] = {}
    if len(ids):
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]
        slots = np.minimum(np.searchsorted(sorted_ids, np.asarray(candidates, dtype=np.int64)), len(ids) - 1)
        for event_id, slot in zip(candidates, slots.tolist(), strict=True):
            if sorted_ids[slot] == event_id:
                cosines[event_id] = float(sims[order[slot]])
    complete = _complete(index, query, list(keyword_rank))
    missing_bm25 = [event_id for event_id in candidates if event_id not in raw_bm25]
    raw_bm25.update(_bm25_of(index, quote_fts(query), missing_bm25))
    times = _times(index, candidates)
    ranked = []
    for event_id in candidates:
        if event_id not in times:  # deleted meanwhile
            continue
        cosine = cosines.get(event_id)
        fresh = recency(times[event_id], now, weights.tau_days)
        bm25 = keyword_score(raw_bm25[event_id], HYBRID_BM25_HALF_SCORE) if event_id in raw_bm25 else 0.0
        if bm25 <= 0 and (cosine is None or cosine <= 0):
            continue  # recency alone never makes a hit
        if cosine is None:
            # Not embedded yet: ranked by its keyword evidence alone, never penalised. It is given the
            # cosine found at its keyword rank in the vector ranking, so at most 2(k - 1) events can
            # pass the k-th keyword hit: those above it in keyword rank, and those with a better cosine.
            rank_k = keyword_rank.get(event_id)
            vector = top_cosines[rank_k - 1] if rank_k is not None and rank_k <= len(top_cosines) else 0.0
        else:
            vector = max(0.0, cosine)
            if event_id in complete:
                # It holds every query term: its semantic evidence counts as at least its keyword rank's.
                rank_k = keyword_rank[event_id]
                vector = max(vector, top_cosines[rank_k - 1] if rank_k <= len(top_cosines) else 0.0)
        total = weights.bm25 * bm25 + weights.vector * vector + weights.recency * fresh
        breakdown: Breakdown = {
            "bm25": round(bm25, 4),
            "vector": None if cosine is None else round(vector, 4),
            "recency": round(fresh, 4),
            "total": round(total, 4),
        }
        if cosine is None:
            breakdown["vector_imputed"] = round(vector, 4)
        ranked.append(Ranked(event_id, round(total, 4), breakdown))
    ranked.sort(key=lambda item: (-item.score, keyword_rank.get(item.event_id, 10**9), -item.event_id))
    return ranked


@dataclass(frozen=True, slots=True)
class SemanticRanker:
    """The :class:`~korg_bridge.recall.history.query.hits.Ranker` of the embedding modes: the
    caller that loaded a model builds one, and history's search asks it for semantic and
    hybrid rankings without importing this layer."""

    embedder: Embedder
    weights: Weights = field(default_factory=Weights)
    now: float | None = None
    """The clock of hybrid's recency (seconds since the epoch); None: the time of the call."""

    def rank(
        self, index: Index, query: str, *, mode: str, filters: Filters, min_score: float, top_n: int
    ) -> list[Ranked]:
        """Rank events for ``query`` in ``mode`` (``semantic`` or ``hybrid``), best first.

        Returns more candidates than ``top_n``: the caller collapses repeats.

        Raises:
            UsageError: ``mode`` is not semantic or hybrid.
            KorgError: the index cannot be read.
        """
        if mode not in SEMANTIC_MODES:
            raise UsageError(f"unknown ranking mode {mode!r}: use one of {', '.join(SEMANTIC_MODES)}.")
        from korg_bridge.recall.semantic.vectors import similarities

        embedder = self.embedder
        query_vector = embedder.embed([query])[0]
        ids, sims = _allowed(
            index, filters, *similarities(index, embedder.model_id, embedder.dim, query_vector)
        )
        if mode == "semantic":
            return _semantic(ids, sims, min_score)
        when = time.time() if self.now is None else self.now
        return _hybrid(index, query, ids, sims, filters, self.weights, top_n, when)


def explain(
    index: Index,
    query: str,
    event_ids: Sequence[int],
    *,
    embedder: Embedder | None,
    weights: Weights,
    now: float | None = None,
) -> dict[int, Breakdown]:
    """The breakdown of each event of ``event_ids`` for ``query`` (what ``show --query`` prints).

    ``bm25`` is hybrid's keyword score, ``vector`` the cosine of the event's best
    stored window (None when it has no vector yet, or without an embedder),
    ``recency`` as in hybrid; ``total`` is the event's hybrid score when it is
    among the hybrid candidates, else the weighted mean of its parts.

    Raises:
        KorgError: the index cannot be read.
    """
    ids = list(dict.fromkeys(event_ids))
    times = _times(index, ids)
    present = [event_id for event_id in ids if event_id in times]
    bm25 = {
        event_id: keyword_score(value, HYBRID_BM25_HALF_SCORE)
        for event_id, value in _bm25_of(index, quote_fts(query), present).items()
    }
    cosines: dict[int, float] = {}
    hybrid: dict[int, float] = {}
    if embedder is not None and present and query.strip():
        from korg_bridge.recall.semantic.vectors import vectors_of

        query_vector = embedder.embed([query])[0]
        for event_id, rows in vectors_of(index, embedder.model_id, embedder.dim, present).items():
            cosines[event_id] = float((rows @ query_vector).max())
        ranked = SemanticRanker(embedder, weights, now).rank(
            index, query, mode="hybrid", filters=Filters(sources=None), min_score=0.0, top_n=1
        )
        hybrid = {item.event_id: item.score for item in ranked}
    when = time.time() if now is None else now
    out: dict[int, Breakdown] = {}
    total_weight = weights.bm25 + weights.vector + weights.recency
    for event_id in present:
        fresh = recency(times[event_id], when, weights.tau_days)
        cosine = cosines.get(event_id)
        keyword = bm25.get(event_id, 0.0)
        mean = (
            weights.bm25 * keyword + weights.vector * max(0.0, cosine or 0.0) + weights.recency * fresh
        ) / total_weight
        out[event_id] = {
            "bm25": round(keyword, 4),
            "vector": None if cosine is None else round(max(0.0, cosine), 4),
            "recency": round(fresh, 4),
            "total": round(hybrid.get(event_id, mean), 4),
        }
    return out
