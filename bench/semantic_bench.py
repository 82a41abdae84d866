"""How fast korg-recall embeds, how it converges in the background, and what hybrid costs at 100k.

    python bench/semantic_bench.py            # 20k mixed, 5k transcript-like, real transcripts, 100k (~20 min)
    python bench/semantic_bench.py --quick    # 5k mixed, 2k transcript-like, no 100k; prints only
    python bench/semantic_bench.py --sizes-100k 50000 --no-write

Every figure comes from fresh ``korg-recall`` processes, as users and the
bridge run them, with the offline model ``KORG_RECALL_MODEL_DIR`` names (CI's
int8 all-MiniLM-L6-v2; the default ``BAAI/bge-small-en-v1.5`` cannot be fetched
on the machine these figures come from):

1. **Embedding throughput**: ``korg-recall index --no-embed`` builds the index,
   then ``korg-recall index`` embeds every event in the foreground; events/s is
   over the embedding pass it reports, events per CPU second over its CPU time
   (two cores shared with other work make wall time move; CPU time barely
   does), peak RSS is the process's ``ru_maxrss``. On three histories: the
   mixed history of ``recall_bench.py``; *transcript-like* events (Claude Code
   sessions whose tool results are long: files of hundreds of lines, test logs
   with the failure deep inside); and the real Claude Code and
   Codex transcripts of ``../shared/peers`` when present.
2. **Background convergence at 100k**: ``korg-recall index --no-embed`` starts
   the background indexer; ``korg-recall stats`` is polled until every event
   has a vector, while ``recall`` queries run (auto mode: keyword until 90 %).
3. **Fresh-process latency at 100k with real vectors**: keyword, semantic and
   hybrid, model load included.
4. **Half-embedded index** (golden set): keyword-style hit@5 of hybrid against
   keyword mode, with the newest half embedded (where the background indexer
   is halfway) and with every other event embedded.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _common as common
import golden_filler
import recall_bench as rb

SECTION = "semantic"
PEERS = common.REPO_ROOT.parent / "shared" / "peers" / "transcripts"

TARGET_MIXED_PER_S = 400.0
TARGET_TRANSCRIPT_PER_S = 150.0
TARGET_RSS_MB = 500.0
TARGET_HYBRID_P50_MS = 1000.0
TARGET_HYBRID_P95_MS = 1500.0

POLL_S = 5.0
"""Between two looks at the coverage while the background indexer runs."""
CONVERGE_TIMEOUT_S = 3 * 3600.0
LATENCY_ROUNDS = 2
"""Times the query list runs per mode at 100k (48 samples each)."""


# --- histories ---------------------------------------------------------------------------------------


def _long_action(action: rb.Action, rng: random.Random, key: str) -> rb.Action:
    """The action with a long result (or a long reply), as real transcripts have them."""
    if action.kind == "reply":
        # Real replies average ~60 tokens (../shared/peers): the generator's sentence, then 0-2 paragraphs.
        spec = {"style": "prose", "before": 0, "after": rng.choice((0, 0, 1, 1, 1, 2))}
        return rb.Action("reply", text=golden_filler.expand(key, action.text, spec, 1))
    if action.kind != "tool":
        return action
    output = action.output
    if action.tool == "Read":
        lines = [line.split("\t", 1)[-1] for line in output.splitlines()] or ["pass"]
        count = rng.randint(120, 400)
        output = "\n".join(f"{n:>6}\t{lines[n % len(lines)]}" for n in range(1, count + 1))
    elif action.tool == "Bash":
        style = rng.choice(("pytest", "log", "gotest", "cargo", "npm"))
        spec = {"style": style, "before": rng.randint(60, 260), "after": rng.randint(5, 40)}
        output = golden_filler.expand(key, output, spec, 2)
    elif action.tool == "Grep":
        output = golden_filler.expand(
            key, output, {"style": "grep", "before": rng.randint(20, 70), "after": 5}, 3
        )
    return rb.Action(
        "tool",
        tool=action.tool,
        args=action.args,
        output=output,
        ok=action.ok,
        duration_ms=action.duration_ms,
    )


def transcript_corpus(root: Path, events: int, seed: int = rb.SEED + 31) -> int:
    """Write about ``events`` events of Claude Code transcripts with long tool results; files written."""
    rng = random.Random(seed)
    sessions = rb.Sessions(seed)
    base = datetime(2025, 9, 1, 8, 0, tzinfo=UTC)
    written = files = 0
    while written < events:
        length = min(events - written, max(8, min(400, int(rng.lognormvariate(4.5, 0.7)))))
        actions = [_long_action(a, rng, f"{files}-{i}") for i, a in enumerate(sessions.session(length))]
        sid = f"{rng.getrandbits(128):032x}"
        sid = f"{sid[:8]}-{sid[8:12]}-4{sid[13:16]}-a{sid[17:20]}-{sid[20:]}"
        folder = root / "claude" / "projects" / f"-home-dev-work-{sessions.project}"
        folder.mkdir(parents=True, exist_ok=True)
        start = base + timedelta(minutes=rng.randint(0, 200 * 24 * 60))
        lines = rb.claude_lines(actions, start, sid, f"/home/dev/work/{sessions.project}")
        (folder / f"{sid}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        written += length
        files += 1
    return files


def peers_copy(root: Path) -> bool:
    """The real transcripts of ../shared/peers, unpacked into ``root``; False when absent."""
    if not PEERS.is_dir():
        return False
    shutil.copytree(PEERS, root)
    for packed in root.rglob("*.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    return True


# --- measurements ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Throughput:
    label: str
    events: int
    report: dict[str, Any]
    seconds: float
    cpu_s: float
    peak_kib: int
    profile: dict[str, Any] = field(default_factory=dict)
    """Where one thread's embedding pass spends its time (see :func:`profile_pass`)."""


def profile_pass(index_path: Path) -> dict[str, Any]:
    """Run one embedding pass on one thread over a copy of an index without vectors (in a child)
    and say where the time goes: the model's share, tokens read, padding, distinct texts."""
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.semantic.embed import load_embedder
    from korg_bridge.recall.semantic.embedpass import embed_pending
    from korg_bridge.recall.semantic.encoder import OnnxEmbedder

    embedder = load_embedder(os.environ, threads=1)
    assert isinstance(embedder, OnnxEmbedder)
    spent = {"forward_s": 0.0, "padded": 0, "calls": 0}
    forward = embedder._forward

    def timed(input_ids: Any, mask: Any) -> Any:
        started = time.perf_counter()
        try:
            return forward(input_ids, mask)
        finally:
            spent["forward_s"] += time.perf_counter() - started
            spent["padded"] += int(input_ids.size)
            spent["calls"] += 1

    embedder._forward = timed  # type: ignore[method-assign]
    with Index(index_path) as index:
        report = embed_pending(index, embedder)
    return {
        "events": report.embedded,
        "texts": report.texts,
        "tokens": report.tokens,
        "padded": spent["padded"],
        "calls": spent["calls"],
        "model_share": spent["forward_s"] / report.duration_s if report.duration_s else 0.0,
        "tokens_per_cpu_s": report.tokens / report.cpu_s if report.cpu_s else 0.0,
        "cpu_s": report.cpu_s,
    }


def throughput(label: str, ledger: Path, workdir: Path, *, profiled: bool = False) -> Throughput:
    """Build the index without vectors, then time ``korg-recall index`` embedding everything."""
    recall = rb.Recall(workdir / f"index-{label}" / "index.sqlite", ledger)
    recall.env["KORG_RECALL_BACKGROUND"] = "0"
    built = json.loads(recall.must("index", "--no-embed", timeout=rb.INDEX_TIMEOUT_S).out)
    profile: dict[str, Any] = {}
    if profiled:
        print(f"[{label}] profiling one thread's pass ...", file=sys.stderr)
        copy = workdir / f"profile-{label}" / "index.sqlite"
        copy.parent.mkdir()
        shutil.copyfile(recall.env["KORG_RECALL_INDEX"], copy)
        done = subprocess.run(
            [sys.executable, __file__, "--_profile", str(copy)],
            capture_output=True,
            text=True,
            check=True,
            timeout=rb.INDEX_TIMEOUT_S,
            env=recall.env,
        )
        profile = json.loads(done.stdout)
        shutil.rmtree(copy.parent, ignore_errors=True)
    print(f"[{label}] embedding {built['events_added']:,} events ...", file=sys.stderr)
    child = recall.must("index", timeout=rb.INDEX_TIMEOUT_S)
    report = json.loads(child.out)["embedding"]
    shutil.rmtree(workdir / f"index-{label}", ignore_errors=True)
    return Throughput(
        label, int(built["events_added"]), report, child.seconds, child.cpu_s, child.peak_kib, profile
    )


@dataclass(slots=True)
class Scale:
    events: int
    converge_s: float = 0.0
    indexer: dict[str, Any] = field(default_factory=dict)
    during: list[tuple[float, str, float]] = field(default_factory=list)
    """(coverage, mode used, ms) of the recall queries run while the indexer converged."""
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    query_rss_kib: int = 0
    embedded_by: dict[str, int] = field(default_factory=dict)


def converge(events: int, workdir: Path) -> Scale:
    """100k-style run: background indexer from ``index --no-embed`` to full coverage, then latency."""
    result = Scale(events)
    root = workdir / f"ledgers-{events}"
    print(f"[{events:,}] generating the mixed history ...", file=sys.stderr)
    rb.generate_corpus(root, events)
    recall = rb.Recall(workdir / f"index-{events}" / "index.sqlite", root)
    recall.env["KORG_RECALL_BACKGROUND"] = "1"
    recall.must("index", "--no-embed", timeout=rb.INDEX_TIMEOUT_S)
    started = time.monotonic()
    print(f"[{events:,}] background indexer converging ...", file=sys.stderr)
    queries = iter(rb.LATENCY_QUERIES * 100)
    while True:
        described = json.loads(recall.must("stats").out)["embedding"]
        if described.get("coverage") == 1.0 and not described["indexer"].get("running"):
            break
        if time.monotonic() - started > CONVERGE_TIMEOUT_S:
            raise RuntimeError(f"the background indexer did not converge within {CONVERGE_TIMEOUT_S:g} s")
        child = recall.must("recall", "--query", next(queries), "--json")
        answer = json.loads(child.out)
        result.during.append((answer["embedding"]["coverage"], answer["mode"], child.seconds * 1000))
        time.sleep(POLL_S)  # the bench's own pacing between looks, not a wait for an event
    result.converge_s = time.monotonic() - started
    final = json.loads(recall.must("stats").out)["embedding"]
    result.indexer = final["indexer"]
    result.embedded_by = _embedded_by(recall)
    for mode in ("keyword", "semantic", "hybrid"):
        print(f"[{events:,}] fresh-process {mode} queries ...", file=sys.stderr)
        recall.must("recall", "--query", "warm up the page cache", "--mode", mode)
        for query in [*rb.LATENCY_QUERIES] * LATENCY_ROUNDS:
            child = recall.must("recall", "--query", query, "--mode", mode)
            result.latency_ms.setdefault(mode, []).append(child.seconds * 1000)
            result.cpu_ms.setdefault(mode, []).append(child.cpu_s * 1000)
            result.query_rss_kib = max(result.query_rss_kib, child.peak_kib)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(workdir / f"index-{events}", ignore_errors=True)
    return result


def _embedded_by(recall: rb.Recall) -> dict[str, int]:
    """meta.embedded_by of the index, read by a child (the bench never opens the index itself)."""
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from korg_bridge.recall.history.index import Index\n"
        "from korg_bridge.recall.semantic.embedpass import embedded_by\n"
        "with Index(Path(sys.argv[1])) as index:\n"
        "    print(json.dumps(index.read(embedded_by)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, recall.env["KORG_RECALL_INDEX"]],
        capture_output=True,
        text=True,
        check=True,
        timeout=rb.QUERY_TIMEOUT_S,
        env=recall.env,
    )
    answer: dict[str, int] = json.loads(done.stdout)
    return answer


HALVES = ("newest", "alternate")


def half_embed(index_path: Path, which: str) -> int:
    """Embed half of the index's events (run in a child): the newest half, or every other event."""
    import numpy as np

    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.semantic import vectors
    from korg_bridge.recall.semantic.embed import load_embedder
    from korg_bridge.recall.semantic.embedpass import event_texts

    embedder = load_embedder(os.environ)
    with Index(index_path) as index:
        ids = index.read(lambda conn: [row[0] for row in conn.execute("SELECT id FROM events ORDER BY id")])
        chosen = ids[len(ids) // 2 :] if which == "newest" else ids[::2]
        texts = index.read(lambda conn: event_texts(conn, chosen))
        matrix, owner = embedder.embed_windows([texts[i][1] for i in chosen], [texts[i][2] for i in chosen])
        with index.write() as conn:
            conn.execute("DELETE FROM vector_chunks")
            vectors.append(
                conn, embedder.model_id, embedder.dim, np.asarray(chosen, dtype=np.int64)[owner], matrix
            )
    return len(chosen)


@dataclass(slots=True)
class Halved:
    which: str
    embedded: int
    hit5: dict[tuple[str, str], float]
    """(mode, kind) -> hit@5 over both golden halves."""


def half_embedded(workdir: Path) -> list[Halved]:
    spec = json.loads((rb.GOLDEN / "queries.json").read_text(encoding="utf-8"))
    wanted = [item for item in spec["queries"] if item["kind"] in ("keyword", "deep")]
    out = []
    for which in HALVES:
        path = workdir / f"golden-{which}" / "index.sqlite"
        recall = rb.Recall(path, rb.GOLDEN / "ledger")
        recall.env["KORG_RECALL_BACKGROUND"] = "0"
        recall.must("index", "--no-embed")
        done = subprocess.run(
            [sys.executable, __file__, "--_half-embed", str(path), which],
            capture_output=True,
            text=True,
            check=True,
            timeout=rb.INDEX_TIMEOUT_S,
            env=recall.env,
        )
        hit5: dict[tuple[str, str], float] = {}
        for mode in ("keyword", "hybrid"):
            found: dict[str, list[int | None]] = {}
            for item in wanted:
                child = recall.must(
                    "recall", "--query", item["query"], "--mode", mode, "--top-n", "10", "--json"
                )
                keys = [(hit["session"], hit["seq"]) for hit in json.loads(child.out)["hits"]]
                target = (item["session"], item["seq"])
                found.setdefault(item["kind"], []).append(keys.index(target) + 1 if target in keys else None)
            for kind, ranks in found.items():
                hit5[(mode, kind)] = rb.rank_scores(ranks)[1]
        out.append(Halved(which, int(done.stdout.strip()), hit5))
    return out


# --- the report --------------------------------------------------------------------------------------


def throughput_table(results: Sequence[Throughput], report: rb.Report) -> str:
    headers = [
        "history",
        "events",
        "model read",
        "**events/s**",
        "events per CPU s",
        "CPU",
        "**peak RSS**",
        "target",
        "verdict",
    ]
    rows = []
    for r in results:
        rate = r.report["events_per_s"]
        per_cpu = round(r.report["embedded"] / r.report["cpu_s"]) if r.report["cpu_s"] else 0
        floor = {"mixed": TARGET_MIXED_PER_S, "transcript-like": TARGET_TRANSCRIPT_PER_S}.get(r.label)
        target = f"≥ {floor:g} events/s, ≤ {TARGET_RSS_MB:g} MB" if floor else f"≤ {TARGET_RSS_MB:g} MB"
        passed = r.peak_kib / 1024 <= TARGET_RSS_MB and (floor is None or rate >= floor)
        rows.append(
            [
                r.label,
                f"{r.events:,}",
                f"{r.report['texts_embedded']:,} distinct texts",
                f"**{rate:,.0f}** ({r.report['embed_s']:.0f} s)",
                f"{per_cpu:,.0f}",
                f"{r.report['cpu_s']:.0f} s",
                f"**{r.peak_kib / 1024:.0f} MiB**",
                target,
                report.check(passed),
            ]
        )
    return common.markdown_table(headers, rows)


def profile_table(results: Sequence[Throughput]) -> str:
    """Where one thread's embedding pass spends its time."""
    shown = [r for r in results if r.profile]
    headers = ["one thread's pass", *(r.label for r in shown)]
    rows = [
        [
            "time in the model (onnxruntime `run`)",
            *(f"{r.profile['model_share'] * 100:.0f} %" for r in shown),
        ],
        [
            "texts the model read (the rest: repeats, empty)",
            *(f"{r.profile['texts']:,} of {r.profile['events']:,} events" for r in shown),
        ],
        [
            "tokens read per event",
            *(f"{r.profile['tokens'] / max(1, r.profile['events']):.1f}" for r in shown),
        ],
        [
            "padding (padded / real tokens)",
            *(
                f"{r.profile['padded'] / max(1, r.profile['tokens']):.2f} ({r.profile['calls']:,} calls)"
                for r in shown
            ),
        ],
        ["tokens per CPU second", *(f"{r.profile['tokens_per_cpu_s']:,.0f}" for r in shown)],
    ]
    return common.markdown_table(headers, rows)


def scale_table(scale: Scale, report: rb.Report) -> str:
    headers = ["metric", f"{scale.events // 1000}k events", "target", "verdict"]
    rows: list[list[str]] = []
    per_s = scale.events / scale.converge_s if scale.converge_s else 0.0
    rows.append(
        [
            "**time to full coverage** (background indexer, from `index --no-embed`)",
            f"{scale.converge_s / 60:.1f} min ({per_s:,.0f} events/s, niced, queries running)",
            "-",
            "-",
        ]
    )
    rows.append(
        [
            "vectors embedded, by whom",
            ", ".join(f"{k}: {v:,}" for k, v in sorted(scale.embedded_by.items())),
            "indexer only",
            report.check(set(scale.embedded_by) == {"indexer"}),
        ]
    )
    if scale.during:
        keyword = [ms for _, mode, ms in scale.during if mode == "keyword"]
        hybrid = [ms for _, mode, ms in scale.during if mode == "hybrid"]
        rows.append(
            [
                "recall (auto) while converging, p50",
                f"keyword {common.median(keyword):.0f} ms ({len(keyword)})"
                + (f", hybrid {common.median(hybrid):.0f} ms ({len(hybrid)})" if hybrid else ""),
                "no query embeds events",
                "-",
            ]
        )
    for mode in ("keyword", "semantic", "hybrid"):
        samples = scale.latency_ms.get(mode, [])
        if not samples:
            continue
        p50, p95 = common.percentile(samples, 50), common.percentile(samples, 95)
        target, verdict = "-", "-"
        if mode == "hybrid":
            target = f"p50 ≤ {TARGET_HYBRID_P50_MS / 1000:g} s, p95 ≤ {TARGET_HYBRID_P95_MS / 1000:g} s"
            verdict = report.check(p50 <= TARGET_HYBRID_P50_MS and p95 <= TARGET_HYBRID_P95_MS)
        bold = "**" if mode == "hybrid" else ""
        rows.append(
            [
                f"{bold}{mode} query, fresh process, p50 / p95{bold}",
                f"{p50:.0f} / {p95:.0f} ms",
                target,
                verdict,
            ]
        )
        cpu = scale.cpu_ms.get(mode, [])
        rows.append([f"{mode} query, CPU per process, p50", f"{common.percentile(cpu, 50):.0f} ms", "-", "-"])
    rows.append(["peak RSS, query process", f"{scale.query_rss_kib / 1024:.0f} MiB", "-", "-"])
    return common.markdown_table(headers, rows)


def halved_table(halved: Sequence[Halved], report: rb.Report) -> str:
    headers = [
        "half embedded",
        "events embedded",
        "keyword-style hit@5: keyword / **hybrid**",
        "deep hit@5: keyword / hybrid",
        "target",
        "verdict",
    ]
    rows = []
    for h in halved:
        k, hy = h.hit5[("keyword", "keyword")], h.hit5[("hybrid", "keyword")]
        rows.append(
            [
                h.which,
                f"{h.embedded:,} of 448",
                f"{k:.2f} / **{hy:.2f}**",
                f"{h.hit5[('keyword', 'deep')]:.2f} / {h.hit5[('hybrid', 'deep')]:.2f}",
                "hybrid = keyword",
                report.check(hy >= k),
            ]
        )
    return common.markdown_table(headers, rows)


INTRO = """How fast `korg-recall` turns events into vectors, how the background indexer
converges, and what a semantic or hybrid query costs at 100k events with real
vectors, measured by `bench/semantic_bench.py` with fresh `korg-recall` processes.
Embedding: `korg-recall index --no-embed` builds the index, then `korg-recall
index` embeds every event in the foreground (events/s over the embedding pass it
reports; events per CPU second over its CPU time, which other work on the shared
two cores barely moves; peak RSS is the process's `ru_maxrss`). *Mixed* is the
history `recall_bench.py` generates; *transcript-like* is Claude Code sessions
whose tool results are long (files of 120-400 lines, test and build logs of
60-300 lines with the failure inside; replies of a few sentences, as real ones
average); *real transcripts* are the
Claude Code and Codex sessions of `../shared/peers` (528 events; skipped when
absent). All figures use int8 all-MiniLM-L6-v2 (`KORG_RECALL_MODEL_DIR`, built
from PyPI by `.ci/build_model_dir.py`); the default `BAAI/bge-small-en-v1.5` cannot
be fetched on this machine, so none of these figures is for it."""


def render(
    throughputs: Sequence[Throughput],
    scale: Scale | None,
    halved: Sequence[Halved],
    where: common.Machine,
    args: list[str],
    report: rb.Report,
) -> str:
    parts = [throughput_table(throughputs, report)]
    notes = []
    if any(r.profile for r in throughputs):
        notes.append(
            "**Where the time goes** (one embedding pass on one thread, in a child process, over a copy of "
            "the same index): nearly all of it is the model, at a few thousand tokens per CPU second "
            "whatever the batch (the int8 weights are expanded to float32 at load, and the matrix products "
            "run near this CPU's float32 peak), so throughput is tokens read per event. (The issue this "
            "work answers measured, through fastembed, ~60 events/s for the golden mix and ~12 for real "
            "Claude Code transcripts on these two cores.)"
        )
        notes.append(profile_table(throughputs))
    for r in throughputs:
        cores = r.report["cpu_s"] / r.report["embed_s"] if r.report["embed_s"] else 0.0
        per_cpu = round(r.report["embedded"] / r.report["cpu_s"]) if r.report["cpu_s"] else 0
        if r.label == "mixed" and cores < where.cores - 0.3:
            notes.append(
                f"The mixed pass had {cores:.1f} of the {where.cores} cores ({r.report['cpu_s']:.0f} CPU s in "
                f"{r.report['embed_s']:.0f} s: other work was running); at {per_cpu} events per CPU second, "
                f"{where.cores} free cores make about {per_cpu * where.cores} events/s."
            )
    notes.append(
        "Real transcripts embed more slowly per CPU second than the generated histories: their commands, "
        "prompts and replies are longer and repeat less. The model's per-token cost bounds this: reading "
        "fewer tokens is what korg-recall can do; beyond it lies a faster (integer-arithmetic) model, "
        "which is a different model."
    )
    if scale is not None:
        notes.append(
            f"**At {scale.events // 1000}k events** (the mixed history): the background indexer started by "
            "`korg-recall index --no-embed`, polled with `korg-recall stats`, a `recall` (auto) every few "
            "seconds meanwhile; then fresh-process queries (24 queries, twice, after one warm-up), model load "
            "included, with the real vectors the indexer stored."
        )
        notes.append(scale_table(scale, report))
    if halved:
        notes.append(
            "**Half-embedded index** (golden set, 448 events, both halves of its queries): keyword mode against "
            "hybrid on keyword-style and deep-in-event queries, with the newest half of the events embedded "
            "(where the background indexer is halfway) and with every other event embedded."
        )
        notes.append(halved_table(halved, report))
    return common.section_body(
        "Semantic recall (`bench/semantic_bench.py`)",
        INTRO,
        "\n\n".join(parts),
        where,
        common.rerun_command(__file__, args),
        "\n\n".join(notes),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small histories, no 100k run; prints only")
    parser.add_argument("--mixed", type=int, default=20_000, help="events of the mixed history")
    parser.add_argument(
        "--transcripts", type=int, default=5_000, help="events of the transcript-like history"
    )
    parser.add_argument(
        "--sizes-100k", dest="scale", type=int, default=100_000, help="events of the scale run (0: skip)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--_half-embed", dest="half_embed", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--_profile", dest="profile", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profile:
        print(json.dumps(profile_pass(Path(args.profile))))
        return 0
    if args.half_embed:
        print(half_embed(Path(args.half_embed[0]), args.half_embed[1]))
        return 0
    if not os.environ.get("KORG_RECALL_MODEL_DIR"):
        parser.error(
            "set KORG_RECALL_MODEL_DIR to the model directory (python .ci/build_model_dir.py DIR builds one)"
        )
    mixed, transcripts, scale_events = (
        (5_000, 2_000, 0) if args.quick else (args.mixed, args.transcripts, args.scale)
    )
    started = time.perf_counter()
    where = common.machine()
    report = rb.Report()
    rb.compile_bytecode()
    throughputs: list[Throughput] = []
    scale: Scale | None = None
    with tempfile.TemporaryDirectory(prefix="semantic-bench-") as tmp:
        workdir = Path(tmp)
        halved = half_embedded(workdir)
        rb.generate_corpus(workdir / "mixed", mixed)
        throughputs.append(throughput("mixed", workdir / "mixed", workdir, profiled=True))
        shutil.rmtree(workdir / "mixed")
        transcript_corpus(workdir / "transcripts", transcripts)
        throughputs.append(throughput("transcript-like", workdir / "transcripts", workdir, profiled=True))
        if peers_copy(workdir / "peers"):
            throughputs.append(throughput("real transcripts", workdir / "peers", workdir))
        if scale_events:
            scale = converge(scale_events, workdir)
    body = render(throughputs, scale, halved, where, _rerun_args(args), report)
    rb.print_rows(throughput_table(throughputs, rb.Report()))
    if scale is not None:
        rb.print_rows(scale_table(scale, rb.Report()))
    rb.print_rows(halved_table(halved, rb.Report()))
    print(f"{report.failed} target(s) missed; {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not args.quick and not args.no_write:
        path = common.write_section(SECTION, body)
        print(f"wrote the {SECTION} section of {path}", file=sys.stderr)
    return 1 if args.check and report.failed else 0


def _rerun_args(args: argparse.Namespace) -> list[str]:
    shown = ["--quick"] if args.quick else []
    if not args.quick:
        if args.mixed != 20_000:
            shown += ["--mixed", str(args.mixed)]
        if args.transcripts != 5_000:
            shown += ["--transcripts", str(args.transcripts)]
        if args.scale != 100_000:
            shown += ["--sizes-100k", str(args.scale)]
    return shown


if __name__ == "__main__":
    sys.exit(main())
