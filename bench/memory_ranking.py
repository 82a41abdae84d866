"""The memory ranking suite: memories found by what they mean (``bench/memory_bench.py --ranking``).

    python bench/memory_ranking.py             # ~5 min with the model; records docs/benchmarks.md
    python bench/memory_ranking.py --no-write  # print only
    python bench/memory_ranking.py --tune      # the weight grid on the tune half (what chose them)
    python bench/memory_ranking.py --tune-half # the quality table of the tune half only; prints only

Needs ``KORG_RECALL_MODEL_DIR`` (the packaged MiniLM int8 the tests use); without it only
the keyword column is measured.

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
a question is a hit@k when its target is among the first k memories. A reference column,
``cosine``, ranks every memory by the bare cosine of its stored vector with the question's
(no floor, no keyword part, no tie or link rule): what the model alone does, for the meaning
modes to be held against.

:func:`tune` looks at the tune half only: it is how the weights were chosen.

Stdlib and korg_bridge only (numpy comes with the model).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import _common as common
import memory_suites as suites

from korg_bridge.recall.memory.backend.protocols import Store
from korg_bridge.recall.memory.operations import remember
from korg_bridge.recall.memory.scoring import HISTORY_MIN_SCORE, semantic_floor
from korg_bridge.recall.memory.search import MEMORY_WEIGHTS, Meaning, search_memories

SUITE = common.REPO_ROOT / "bench" / "golden" / "memories.json"
DAY = 86_400.0
MODES = ("keyword", "semantic", "hybrid")
REFERENCE = "cosine"
"""The bare cosine over every memory's stored vector: a reference, not a mode of the product."""
KINDS = ("paraphrase", "keyword", "preference", "update")
HALVES = ("tune", "held-out")
TOP_K = 5
SEMANTIC_FLOOR = semantic_floor(HISTORY_MIN_SCORE)
"""The semantic mode's cosine floor for memories when a recall call leaves ``min_score`` at its
default (:func:`~korg_bridge.recall.memory.scoring.semantic_floor`)."""


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
    path: Path
    """The SQLite store's file (for fresh processes), or the project folder's parent for a team store."""
    project: Path
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
            where = root / "store" / "memory.sqlite"
            yield Written(
                store, list(ctx.visible_scopes), where, project, ids, old_ids, plan[-1][0] + 3 * DAY
            )


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
    """Every question of ``halves`` in every mode of ``modes`` (the semantic ones and the
    :data:`REFERENCE` need ``embedder``)."""
    questions = [q for q in suite.questions if q.half in halves]
    vectors: list[Any] = [None] * len(questions)
    if embedder is not None:
        vectors = list(embedder.embed([q.query for q in questions]))
    scores = Scores()
    by_id = {lineage: key for key, lineage in done.ids.items()}
    with done.store.reading() as conn:
        every = _every_vector(conn, embedder) if embedder is not None and REFERENCE in modes else None
        for mode in modes:
            if mode != "keyword" and embedder is None:
                continue
            for question, vector in zip(questions, vectors, strict=True):
                if mode == REFERENCE:
                    assert every is not None
                    found = _closest(every, vector)
                else:
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


def _every_vector(conn: Any, embedder: Any) -> tuple[list[str], Any]:
    """Each current memory's id and its stored vector (the one its write computed), as a matrix."""
    import numpy as np

    rows = conn.execute(
        "SELECT m.id, v.vector FROM memory m JOIN memory_vectors v ON v.row = m.rowid "
        "WHERE m.superseded_by IS NULL AND v.model_id = ? AND v.dim = ?",
        (embedder.model_id, embedder.dim),
    ).fetchall()
    matrix = np.frombuffer(b"".join(bytes(blob) for _, blob in rows), dtype=np.float32)
    return [str(memory_id) for memory_id, _ in rows], matrix.reshape(len(rows), embedder.dim)


def _closest(every: tuple[list[str], Any], vector: Any, count: int = 10) -> list[str]:
    import numpy as np

    ids, matrix = every
    order = np.argsort(-(matrix @ vector), kind="stable")[:count]
    return [ids[i] for i in order.tolist()]


def run(
    env: Mapping[str, str], embedder: Any | None, store_url: str | None = None, halves: Sequence[str] = HALVES
) -> Scores:
    """Write the suite and ask its questions (``halves``) in every mode the model allows."""
    suite = load()
    with written(env, suite, store_url) as done:
        modes = MODES if store_url else (*MODES, REFERENCE)  # the reference reads SQLite's blobs
        return ask(done, suite, embedder, halves=halves, modes=modes)


# --- choosing the weights: the tune half only --------------------------------------------------

GRID: dict[str, Sequence[Any]] = {
    "half": (30.0, 60.0, 120.0),
    "bm25": (0.05, 0.1, 0.15, 0.2, 0.3),
    "recency": (0.0, 0.1),
    "tau_days": (30.0, 90.0, 365.0),
}


def tune(env: Mapping[str, str], embedder: Any) -> list[tuple[tuple[float, ...], dict[str, Any]]]:
    """Hybrid on the tune half for every point of :data:`GRID`: (paraphrase hit@5, keyword hit@5,
    paraphrase hit@1, update hit@1) per point, best first. The held-out half is never asked."""
    import korg_bridge.recall.memory.scoring as scoring

    suite = load()
    results: list[tuple[tuple[float, ...], dict[str, Any]]] = []
    with written(env, suite) as done:
        keyword = ask(done, suite, embedder, modes=("keyword", "semantic", REFERENCE), halves=("tune",))
        floor = keyword.tally("keyword", "keyword", "tune").rate()
        for mode in ("keyword", "semantic", REFERENCE):  # what hybrid is held against
            t = keyword.tally(mode, "paraphrase", "tune")
            print(f"{mode}: paraphrase hit@1 {t.rate(1):.2f} hit@5 {t.rate():.2f} (tune)", file=sys.stderr)
        saved = scoring.HYBRID_HALF_SCORE
        try:
            for half, bm25, recency, tau in itertools.product(*GRID.values()):
                if recency == 0.0 and tau != GRID["tau_days"][0]:
                    continue
                scoring.HYBRID_HALF_SCORE = half
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
            scoring.HYBRID_HALF_SCORE = saved
    results.sort(key=lambda item: item[0], reverse=True)
    return results


def table(scores: Scores, label: str = "") -> str:
    """hit@1 / hit@5 per mode (and the bare cosine), kind and half, as a Markdown table."""
    rows: list[list[str]] = []
    columns = (*MODES, REFERENCE)
    for kind, half in itertools.product(KINDS, HALVES):
        cells = []
        asked = 0
        for mode in columns:
            found = scores.tallies.get((mode, kind, half))
            if found is None:
                cells.append("-")
                continue
            asked = found.asked
            cells.append(f"{found.rate(1):.2f} / {found.rate():.2f}")
        if asked:
            rows.append([f"{label}{kind}", half, str(asked), *cells])
    return common.markdown_table(["questions", "half", "n", *(f"{m} hit@1 / hit@5" for m in columns)], rows)


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


# --- what it costs: fresh processes, and embedding behind an import --------------------------------

SAMPLES = 20
IMPORTED = 1_000
LATENCY_QUERIES = (
    "when do we ship to prod?", "which tool should fetch node modules", "who reviews billing code",
    "how do I check the server code still works", "where do crash reports end up", "make db seed",
)  # fmt: skip


@dataclass(slots=True)
class Costs:
    rows: dict[str, Any] = field(default_factory=dict)
    """label -> memory_bench.Timing"""
    import_s: float = 0.0
    import_cpu_s: float = 0.0
    fill_s: float = 0.0
    fill_cpu_s: float = 0.0
    filled: int = 0


def _fresh_env(done: Written, home: Path, directory: str | None) -> dict[str, str]:
    import memory_bench

    env = memory_bench._env(home, done.project)
    env.update(KORG_RECALL_STORE=str(done.path), KORG_RECALL_BACKGROUND="0", KORG_RECALL_MIRROR="0")
    if directory:
        env["KORG_RECALL_MODEL_DIR"] = directory
    return env


def measure_costs(done: Written, home: Path, directory: str) -> Costs:
    """Fresh ``recall --kinds memory`` processes by keyword and by meaning on the suite's store; then
    :data:`IMPORTED` memories imported (no embedding while importing) and embedded by the background
    indexer's pass (in process, timed); then the same recalls over the larger store."""
    import memory_bench

    costs = Costs()
    env = _fresh_env(done, home, directory)
    runner = memory_bench.Runner(env, done.project)

    def recalls(label: str) -> None:
        for mode in ("keyword", "hybrid"):
            calls = [["recall", "--query", q, "--kinds", "memory", "--mode", mode] for q in LATENCY_QUERIES]
            costs.rows[f"{label}, {mode}"] = runner.time((calls * (SAMPLES // len(calls) + 2))[: SAMPLES + 2])

    recalls(f"{len(done.ids) + len(done.old_ids)} memories")
    rng = random.Random(20261221)
    entries = [{"id": str(n), "memory": memory_bench._text(rng, n)} for n in range(IMPORTED)]
    source = home / "imported.json"
    source.write_text(json.dumps({"results": entries}), encoding="utf-8")
    wall, cpu, _ = runner.run("import", str(source))
    costs.import_s, costs.import_cpu_s = wall / 1000, cpu / 1000
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
    from korg_bridge.recall.memory.backfill import run_memory
    from korg_bridge.recall.memory.embedding import coverage

    started, cpu_started = time.perf_counter(), time.process_time()
    if run_memory(env) != 0:
        raise RuntimeError("the memory indexer failed")
    costs.fill_s, costs.fill_cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    with SqliteStore(done.path) as store, store.reading() as tx:
        found = coverage(tx, env)
    if found is None or found.missing:
        raise RuntimeError(f"memories left without a vector: {found}")
    costs.filled = found.live
    recalls(f"{found.live:,} memories")
    return costs


def cost_table(costs: Costs) -> str:
    rows = [
        [f"`recall --kinds memory`, {label}", f"{t.p(50):.0f} / {t.p(95):.0f} ms",
         f"{t.p(50, True):.0f} / {t.p(95, True):.0f} ms", str(len(t.wall_ms))]
        for label, t in costs.rows.items()
    ]  # fmt: skip
    return common.markdown_table(["fresh process", "wall p50 / p95", "CPU p50 / p95", "n"], rows)


# --- the section ----------------------------------------------------------------------------------

SECTION = "memory_ranking"
INTRO = """Memories found by meaning: the ranking suite of `bench/memory_ranking.py`
(`bench/golden/memories.json`). 158 memories a team's agent keeps -- preferences, project facts,
commands, people, decisions -- each written through the real `remember` (with the model present,
so each keeps the vector its semantic check computed) on its own day over ten months, in the user's
and the project's scopes, plus 20 facts that changed, written twice as separate memories weeks
apart. Questions: two per memory in other words (`paraphrase`: written to avoid the memory's
words), one in its own words (`keyword`, as an agent types search terms), 19 that ask for work a
preference should shape without naming it (`preference`, LongMemEval's single-session-preference
kind) and two per changed fact asking for its current value (`update`, LongMemEval's
knowledge-update kind: hit@1 means the newer statement came first). They were written, and
committed, before any weight was chosen; LongMemEval's own data was not used (its kinds were
imitated here). The suite is split by memory (the first byte of the SHA-256 of its key) into a
tune half and a held-out half: weights were chosen on the tune half alone (`--tune`), then the
held-out half was asked once, in this run's configuration. Model: the packaged all-MiniLM-L6-v2
int8, the one the tests obtain. `semantic` uses the floor memories take when a recall leaves
`min_score` at its default (0.15); `hybrid` the memory weights (`bm25` 0.1 with half-score 60,
`vector` 0.9, `recency` 0, a cosine of 0.15 needed by a memory holding no query word). `cosine`
is a reference, not a mode: every memory ranked by the bare cosine of its stored vector with the
question's (no floor, no keyword part, no tie or link rule), what the model alone does."""


BEFORE = """Before the fixes of the ranking pipeline against the bare cosine (docs/memory.md, "Scores, by
mode"; measured 2026-12-02 on the code of commit e1301fe, the same suite and model), paraphrase
hit@1 / hit@5: tune half keyword 0.06 / 0.14, semantic 0.32 / 0.62, hybrid 0.32 / 0.69; held-out
half keyword 0.05 / 0.15, semantic 0.46 / 0.62, hybrid 0.45 / 0.72 (keyword-style questions: hybrid
1.00 / 1.00 tune, 0.98 / 1.00 held-out). Every choice of the fixes -- floor, decay, ties, links,
weights -- was made on the tune half; the held-out rows above were then asked once."""


def render(
    scores: Scores, updates: dict[tuple[int, str], Any], costs: Costs | None, where: Any, args: list[str]
) -> str:
    notes = [
        BEFORE,
        "Generated knowledge-update suite (`bench/memory_suites.py`, the memory section's: 62 facts written "
        "by `remember`, keys, `supersedes` and `revise`, questions in other words), asked by keyword and by "
        "hybrid, each on a store of its own written the same way, with the model present (rate: among the fact's own versions the newest first; top: also above "
        "every other memory):",
        common.markdown_table(
            ["seed", "mode", "newest first", "top hit", "`as_of`", "`as_of` top hit"],
            [
                [
                    str(seed),
                    mode,
                    f"{u.right['now']}/{u.asked['now']}",
                    f"{u.top1['now']}/{u.asked['now']}",
                    f"{u.right['as_of']}/{u.asked['as_of']}",
                    f"{u.top1['as_of']}/{u.asked['as_of']}",
                ]
                for (seed, mode), u in updates.items()
            ],
        ),
    ]
    if costs is not None:
        notes.append(
            f"What it costs (fresh processes, SQLite store, `KORG_RECALL_BACKGROUND=0`; hybrid loads the "
            f"model, about 0.3 s of it, and embeds the query). Then {IMPORTED:,} memories imported in one "
            f"fresh `korg-recall import` process: {costs.import_s:.1f} s wall, {costs.import_cpu_s:.1f} s CPU, "
            f"none of it embedding (the import only starts the background indexer); the indexer's pass "
            f"(`python -m korg_bridge.recall.memory.backfill`, here in process) embedded them in "
            f"{costs.fill_s:.1f} s wall, {costs.fill_cpu_s:.1f} s CPU, in slices of 64 per transaction."
        )
        notes.append(cost_table(costs))
    return common.section_body(
        "Memory ranking (`bench/memory_ranking.py`)", INTRO, table(scores), where,
        common.rerun_command(__file__, args), "\n\n".join(notes),
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument("--tune", action="store_true", help="the weight grid on the tune half; prints only")
    parser.add_argument("--no-costs", action="store_true", help="the quality tables only (about a minute)")
    parser.add_argument(
        "--tune-half",
        action="store_true",
        help="the quality table of the tune half only (never the held-out); prints only",
    )
    args = parser.parse_args(argv)
    directory = os.environ.get("KORG_RECALL_MODEL_DIR", "").strip() or None
    embedder = None
    if directory:
        from korg_bridge.recall.semantic.embed import load_embedder

        embedder = load_embedder({"KORG_RECALL_MODEL_DIR": directory})
    with tempfile.TemporaryDirectory(prefix="memory-ranking-bench-") as tmp:
        home = Path(tmp)
        env = {"HOME": str(home), "KORG_RECALL_MIRROR": "0", "KORG_RECALL_ACTOR": "agent"}
        if directory:
            env["KORG_RECALL_MODEL_DIR"] = directory
        if args.tune:
            if embedder is None:
                parser.error("--tune needs KORG_RECALL_MODEL_DIR")
            for key, point in tune(env, embedder)[:20]:
                print(key, point)
            return 0
        if args.tune_half:
            print(table(run(env, embedder, halves=("tune",))))
            return 0
        where = common.machine()
        suite = load()
        costs = None
        with written(env, suite) as done:
            print("ranking: asking the questions ...", file=sys.stderr)
            scores = ask(done, suite, embedder, modes=(*MODES, REFERENCE))
            if directory and not args.no_costs:
                print("ranking: fresh processes and the background pass ...", file=sys.stderr)
                (home / "fresh").mkdir()
                costs = measure_costs(done, home / "fresh", directory)
        updates: dict[tuple[int, str], Any] = {}
        import memory_bench

        for seed in (memory_bench.TUNE_SEED, memory_bench.HELD_OUT_SEED):
            print(f"ranking: knowledge updates, seed {seed} ...", file=sys.stderr)
            updates[(seed, "keyword")] = suites.run_updates(seed, env)
            if embedder is not None:
                updates[(seed, "hybrid")] = updates_by_meaning(seed, env, embedder)
    body = render(scores, updates, costs, where, [])
    print(body)
    if not args.no_write:
        print(f"wrote the {SECTION} section of {common.write_section(SECTION, body)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
