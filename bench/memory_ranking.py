"""The memory ranking suite of ``bench/memory_bench.py``: memories found by what they mean.

``bench/golden/memories.json`` holds 158 memories a team's agent would keep
(preferences, project facts, commands, people, decisions) and questions about them:
two per memory in other words (``paraphrase``), one in the memory's own words
(``keyword``), some that ask for work a preference should shape without naming it
(``preference``), and facts that changed, written twice as separate memories weeks
apart (``update``: the newer one is the target). They were written before any
weight was chosen, and split by memory into a ``tune`` and a ``held-out`` half.

Every memory is written through the real ``remember`` (the write policy, and with a
model its semantic check, which stores the vector with the version), each on its own
day over ten months, in one store (the user's scope and the project's, as a recall
sees them). Each question is then asked through ``search_memories`` in each mode;
a question is a hit@k when its target is among the first k memories.

:func:`tune` looks at the tune half only: it is how the weights were chosen.

Stdlib and korg_bridge only (numpy comes with the model).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import _common as common
import memory_suites as suites

from korg_bridge.recall.memory.backend import Store
from korg_bridge.recall.memory.operations import remember
from korg_bridge.recall.memory.search import MEMORY_WEIGHTS, Meaning, search_memories

SUITE = common.REPO_ROOT / "bench" / "golden" / "memories.json"
DAY = 86_400.0
MODES = ("keyword", "semantic", "hybrid")
KINDS = ("paraphrase", "keyword", "preference", "update")
HALVES = ("tune", "held-out")
TOP_K = 5
SEMANTIC_FLOOR = 0.30
"""``min_score`` as a recall call has it by default: the semantic mode's cosine floor."""


@dataclass(frozen=True, slots=True)
class Question:
    kind: str
    query: str
    target: str
    half: str


@dataclass(slots=True)
class Suite:
    memories: list[dict[str, Any]]
    updates: list[dict[str, Any]]
    questions: list[Question]


def load(path: Path = SUITE) -> Suite:
    data = json.loads(path.read_text(encoding="utf-8"))
    return Suite(data["memories"], data["updates"], [Question(**q) for q in data["questions"]])


@dataclass(slots=True)
class Written:
    """The store after writing the suite: which lineage each memory key landed on."""

    store: Store
    scopes: list[str]
    ids: dict[str, str]
    """Memory key (an update's: its newer statement) -> lineage id."""
    old_ids: dict[str, str]
    """An update's key -> the lineage of its older statement."""
    now: float


def _context(env: Mapping[str, str], project: Path, now: float) -> Any:
    return suites._context(env, project, now)


@contextlib.contextmanager
def written(env: Mapping[str, str], suite: Suite, store_url: str | None = None) -> Iterator[Written]:
    """A fresh store (or tenant) holding the suite, each memory written on its own day."""
    rng = random.Random(20261220)
    plan: list[tuple[float, str, str, str, str]] = []  # (when, key, role, type, text)
    for memory in suite.memories:
        plan.append(
            (
                suites.START + rng.uniform(0, 300) * DAY,
                memory["key"],
                "memory",
                memory["type"],
                memory["text"],
            )
        )
    for update in suite.updates:
        first = suites.START + rng.uniform(0, 240) * DAY
        plan.append((first, update["key"], "old", update["type"], update["old"]))
        plan.append((first + rng.uniform(20, 60) * DAY, update["key"], "new", update["type"], update["new"]))
    plan.sort()
    with tempfile.TemporaryDirectory(prefix="memory-ranking-") as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        with suites.opened(root, env, store_url) as (store, run_env):
            ids: dict[str, str] = {}
            old_ids: dict[str, str] = {}
            for when, key, role, kind, text in plan:
                scope = "user" if kind == "user" else "project"
                result = remember(
                    store, _context(run_env, project, when), {"content": text, "type": kind, "scope": scope}
                )
                (old_ids if role == "old" else ids)[key] = str(result["id"])
            ctx = _context(run_env, project, plan[-1][0])
            yield Written(store, list(ctx.visible_scopes), ids, old_ids, plan[-1][0] + 3 * DAY)


@dataclass(slots=True)
class Tally:
    asked: int = 0
    at1: int = 0
    at_k: int = 0
    old_first: int = 0
    """Update questions whose older statement ranked above the newer one (or alone)."""

    def add(self, rank: int | None, old_rank: int | None = None) -> None:
        self.asked += 1
        self.at1 += rank == 0
        self.at_k += rank is not None and rank < TOP_K
        self.old_first += old_rank is not None and (rank is None or old_rank < rank)

    def rate(self, at: int = TOP_K) -> float:
        return (self.at1 if at == 1 else self.at_k) / self.asked if self.asked else 0.0


@dataclass(slots=True)
class Scores:
    """Tallies by (mode, kind, half); misses by (mode, half) for the tune half's inspection."""

    tallies: dict[tuple[str, str, str], Tally] = field(default_factory=dict)
    misses: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def tally(self, mode: str, kind: str, half: str) -> Tally:
        return self.tallies.setdefault((mode, kind, half), Tally())


def meaning_for(mode: str, vector: Any, embedder: Any, weights: Mapping[str, float]) -> Meaning | None:
    if mode == "keyword":
        return None
    return Meaning(
        mode, vector, embedder.model_id, embedder.dim, bm25=weights["bm25"], weight_vector=weights["vector"],
        weight_recency=weights["recency"], tau_days=weights["tau_days"],
        min_score=SEMANTIC_FLOOR if mode == "semantic" else 0.0,
    )  # fmt: skip


def ask(
    done: Written,
    suite: Suite,
    embedder: Any | None,
    *,
    modes: Sequence[str] = MODES,
    halves: Sequence[str] = HALVES,
    weights: Mapping[str, float] = MEMORY_WEIGHTS,
) -> Scores:
    """Every question of ``halves`` in every mode of ``modes`` (the semantic ones need ``embedder``)."""
    questions = [q for q in suite.questions if q.half in halves]
    vectors: list[Any] = [None] * len(questions)
    if embedder is not None:
        vectors = list(embedder.embed([q.query for q in questions]))
    scores = Scores()
    by_id = {lineage: key for key, lineage in done.ids.items()}
    with done.store.reading() as conn:
        for mode in modes:
            if mode != "keyword" and embedder is None:
                continue
            for question, vector in zip(questions, vectors, strict=True):
                hits = search_memories(
                    conn, question.query, scopes=done.scopes, top_n=10, now=done.now,
                    meaning=meaning_for(mode, vector, embedder, weights),
                )  # fmt: skip
                found = [hit.version.id for hit in hits]
                target, old = done.ids[question.target], done.old_ids.get(question.target)
                rank = found.index(target) if target in found else None
                old_rank = found.index(old) if old is not None and old in found else None
                scores.tally(mode, question.kind, question.half).add(rank, old_rank)
                if rank != 0:
                    top = by_id.get(found[0], found[0]) if found else None
                    scores.misses.setdefault((mode, question.half), []).append(
                        f"{question.kind}: {question.query!r} -> rank {rank} (top: {top}; want {question.target})"
                    )
    return scores


def run(
    env: Mapping[str, str], embedder: Any | None, store_url: str | None = None, halves: Sequence[str] = HALVES
) -> Scores:
    """Write the suite and ask its questions (``halves``) in every mode the model allows."""
    suite = load()
    with written(env, suite, store_url) as done:
        return ask(done, suite, embedder, halves=halves)


# --- choosing the weights: the tune half only --------------------------------------------------

GRID: dict[str, Sequence[Any]] = {
    "half": (2.0, 5.0, 10.0, 20.0),
    "bm25": (0.3, 0.45, 0.6),
    "recency": (0.0, 0.1),
    "tau_days": (30.0, 90.0, 365.0),
}


def tune(env: Mapping[str, str], embedder: Any) -> list[tuple[tuple[float, ...], dict[str, Any]]]:
    """Hybrid on the tune half for every point of :data:`GRID`: (paraphrase hit@5, keyword hit@5,
    paraphrase hit@1, update hit@1) per point, best first. The held-out half is never asked."""
    import korg_bridge.recall.memory.search as search

    suite = load()
    results: list[tuple[tuple[float, ...], dict[str, Any]]] = []
    with written(env, suite) as done:
        keyword = ask(done, suite, None, modes=("keyword",), halves=("tune",))
        floor = keyword.tally("keyword", "keyword", "tune").rate()
        saved = search.HYBRID_HALF_SCORE
        try:
            for half, bm25, recency, tau in itertools.product(*GRID.values()):
                if recency == 0.0 and tau != GRID["tau_days"][0]:
                    continue
                search.HYBRID_HALF_SCORE = half
                weights = {
                    "bm25": bm25,
                    "vector": round(1 - bm25 - recency, 4),
                    "recency": recency,
                    "tau_days": tau,
                }
                scores = ask(done, suite, embedder, modes=("hybrid",), halves=("tune",), weights=weights)
                t = scores.tally
                key = (
                    t("hybrid", "paraphrase", "tune").rate(),
                    t("hybrid", "keyword", "tune").rate(),
                    t("hybrid", "paraphrase", "tune").rate(1),
                    t("hybrid", "update", "tune").rate(1),
                )
                results.append((key, {"half": half, **weights, "keyword_floor": floor}))
        finally:
            search.HYBRID_HALF_SCORE = saved
    results.sort(key=lambda item: item[0], reverse=True)
    return results


def table(scores: Scores, label: str = "") -> str:
    """hit@1 / hit@5 per mode, kind and half, as a Markdown table."""
    rows: list[list[str]] = []
    for kind, half in itertools.product(KINDS, HALVES):
        cells = []
        asked = 0
        for mode in MODES:
            found = scores.tallies.get((mode, kind, half))
            if found is None:
                cells.append("-")
                continue
            asked = found.asked
            cells.append(f"{found.rate(1):.2f} / {found.rate():.2f}")
        if asked:
            rows.append([f"{label}{kind}", half, str(asked), *cells])
    return common.markdown_table(["questions", "half", "n", *(f"{m} hit@1 / hit@5" for m in MODES)], rows)


def with_weights(meaning: Meaning, weights: Mapping[str, float]) -> Meaning:
    return replace(
        meaning, bm25=weights["bm25"], weight_vector=weights["vector"], weight_recency=weights["recency"],
        tau_days=weights["tau_days"],
    )  # fmt: skip


# --- the generated knowledge-update suite, ranked by meaning -----------------------------------


def updates_by_meaning(seed: int, env: Mapping[str, str], embedder: Any) -> suites.UpdateScore:
    """``memory_suites.run_updates`` with every question asked in hybrid mode: its facts written
    through ``remember`` and ``revise`` with the model present (each version keeps its vector)."""
    rng = random.Random(seed + 2)
    score = suites.UpdateScore()
    with tempfile.TemporaryDirectory(prefix="memory-updates-") as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        facts = suites.update_facts(seed)
        with suites.opened(root, env, None) as (store, run_env):
            last = suites.write_facts(store, run_env, project, facts, seed)
            now = last + 3 * DAY
            scope = _context(run_env, project, suites.START).project
            asked: list[tuple[str, str, suites.Fact, str, float | None]] = []
            for fact in facts:
                asks = suites.UPDATE_FAMILIES[fact.family]["ask"]
                for template in asks:
                    asked.append(("now", template.format(e=fact.entity), fact, fact.texts[-1], None))
                for number in range(len(fact.values) - 1):
                    at = rng.uniform(fact.times[number], fact.times[number + 1])
                    asked.append(
                        ("as_of", rng.choice(asks).format(e=fact.entity), fact, fact.texts[number], at)
                    )
            vectors = embedder.embed([question for _, question, _, _, _ in asked])
            with store.reading() as conn:
                for (kind, question, fact, want, at), vector in zip(asked, vectors, strict=True):
                    meaning = meaning_for("hybrid", vector, embedder, MEMORY_WEIGHTS)
                    suites._ask(
                        conn,
                        score,
                        kind,
                        question,
                        fact,
                        want,
                        scopes=[scope],
                        as_of=at,
                        now=now,
                        meaning=meaning,
                    )
    return score
