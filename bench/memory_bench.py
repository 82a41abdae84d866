"""How fast the memory store answers, and how well it keeps facts apart and up to date.

    python bench/memory_bench.py             # ~5 min; records docs/benchmarks.md
    python bench/memory_bench.py --no-write  # print only
    python bench/memory_bench.py --quality   # the two suites only (~1 min), print only
    python bench/memory_bench.py --check     # exit 1 when a target is missed
    python bench/memory_bench.py --context-only  # the session-start brief's row only (~3 min)
    python bench/memory_bench.py --imports-only  # the import rows only (~3 min)
    python bench/memory_bench.py --safety    # the written corpora only (~1 min); records their section
    python bench/memory_bench.py --quality --store-url postgresql://…  # the suites on a team store
    python bench/memory_bench.py --ranking   # memories by meaning: bench/memory_ranking.py (its own section)

1. **Latency**, each a fresh ``korg-recall`` process as the bridge runs it per
   tool call, keyword only (no embedding model in the environment): ``remember``
   and ``memories`` with 10k memories in the store (7k in the project, 3k for
   the user: all visible to a call), and ``recall`` with those 10k memories and
   100k history events (the corpus of ``bench/recall_bench.py``, indexed first);
   ``context`` (the session-start brief) with the same store and history.
   The 10k memories are written in process through the store's row API (10k
   processes would take an hour) and their mirror files settled before timing,
   as on a machine in use. Wall and CPU time per process (``wait4``): the
   machine is shared, and CPU time is what the code costs.
2. **Imports**: a mem0 export of 1,000, 10,000 and 50,000 memories imported into a
   fresh store by a fresh process, while another writes with ``remember`` back to
   back: the import's wall and CPU time, how long it held the write lock (its
   ``--debug`` line), and how long the other writer's calls took.
3. **Knowledge updates** and **dedup**: the generated suites of
   ``bench/memory_suites.py``, on the real write policy and retrieval. Each is
   run on the seed its thresholds were tuned on and on a held-out seed that was
   not looked at while tuning.
3. **Safety** (``--safety``, a section of its own): the written corpora of
   ``tests/data`` -- 246 contradicting pairs against 218 paraphrases through
   ``remember``, and 70 reworded injected instructions against 139 ordinary facts
   through the write path's check -- each per half (tuning, held out).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common as common
import memory_suites as suites
import recall_bench

from korg_bridge.recall.memory.backend.sqlite.store import Store
from korg_bridge.recall.memory.mirror import files as mirror
from korg_bridge.recall.memory.normalize import content_hash, title_of
from korg_bridge.recall.memory.records import Version, iso, new_id
from korg_bridge.recall.memory.rows import insert_version

SECTION = "memory"
TUNE_SEED = 20261211
SEEN_SEEDS = (20261212, 20261213)
"""Earlier held-out seeds, each looked at once before a later change was tuned on TUNE_SEED: they are
reported, but they are no longer held out (20261212 before the as_of and value-link changes,
20261213 before lineages ranked by their best-matching version)."""
HELD_OUT_SEED = 20261214
MEMORIES = 10_000
EVENTS = 100_000
SAMPLES = 40
"""Fresh processes timed per write or listing row (after two warm-ups)."""
TARGET_WRITE_MS = 150.0
TARGET_RECALL_MS = 200.0
TARGET_RATE = 0.95
TIMEOUT_S = 120.0
MODEL_DIR_ENV = "KORG_RECALL_MODEL_DIR"

SUBJECTS = (
    "billing-api", "auth-service", "search-indexer", "checkout", "notifications", "ledger-sync", "postgres",
    "redis", "the CI pipeline", "the staging cluster", "the rate limiter", "the webhook worker", "the cron jobs",
    "the docker compose setup", "the prometheus metrics", "the feature flags", "the session store", "the audit log",
)  # fmt: skip
FACTS = (
    "{s} needs `make db` before the integration tests run.",
    "{s} times out after {n} seconds under load; raise the pool size first.",
    "Deploy {s} with the blue-green script, never by hand.",
    "{s} logs go to Loki with the label app={k}.",
    "The flaky tests of {s} are quarantined in tests/flaky_{k}.py.",
    "{s} migrations must stay backwards compatible for {n} days.",
    "Ana reviews every change to {s}; ping her before merging.",
    "{s} uses cursor pagination with pages of {n} rows.",
    "Exponential backoff for {s} starts at {n} ms and caps at 30 s.",
    "The {s} dashboard has a panel for deadlocks and slow queries.",
    "Secrets for {s} come from Vault path secret/{k}.",
    "The user prefers small pull requests for {s}, at most {n} lines.",
)  # fmt: skip
TYPES = ("project", "project", "project", "feedback", "reference", "note", "user")


@dataclass(slots=True)
class Timing:
    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)

    def p(self, q: float, cpu: bool = False) -> float:
        return common.percentile(self.cpu_ms if cpu else self.wall_ms, q)


# --- the 10k store ---------------------------------------------------------------------------------


def _text(rng: random.Random, number: int) -> str:
    subject = rng.choice(SUBJECTS)
    text = rng.choice(FACTS).format(s=subject, n=rng.randint(2, 900), k=f"{subject.split()[-1]}{number}")
    return text[0].upper() + text[1:]


LAYOUTS: dict[str, tuple[tuple[str, int], ...]] = {
    "spread": (("project", 2_000), ("user", 1_000), ("others", 7_000)),
    "crowded": (("project", 7_000), ("user", 3_000)),
}
"""Where the 10k memories live. ``spread``: the calling project holds 2,000 (the per-scope soft
cap), the user 1,000, fourteen other projects 500 each -- a call sees 3,000. ``crowded``: all
10,000 in the two scopes a call sees, 3.5 times the soft cap (the worst case)."""


def build_store(path: Path, project_scope: str, layout: str, seed: int = TUNE_SEED) -> float:
    """Write :data:`MEMORIES` memories in one transaction (verbatim rows, a year of history, a
    tenth of them with a second version), then settle their mirror files; return the seconds."""
    rng = random.Random(seed)
    started = time.perf_counter()
    now = time.time()
    scopes: list[str] = []
    for kind, count in LAYOUTS[layout]:
        if kind == "others":
            scopes += [f"project:/home/dev/work/other-{n % 14}" for n in range(count)]
        else:
            scopes += [project_scope if kind == "project" else "user"] * count
    rng.shuffle(scopes)
    with Store(path) as store:
        with store.write() as conn:
            for number, scope in enumerate(scopes):
                body = _text(rng, number)
                at = now - rng.uniform(0, 365) * 86_400
                version = Version(
                    id=new_id(), version=1, scope=scope, type=rng.choice(TYPES), title=title_of(body), body=body,
                    content_hash=content_hash(body), actor="agent", recorded_at=iso(at), tags=[body.split()[0].lower()],
                    provenance=[{"actor": "agent", "at": iso(at), "source": None}],
                )  # fmt: skip
                if rng.random() < 0.1:
                    later = iso(at + 86_400)
                    version.superseded_by, version.superseded_at = 2, later
                    insert_version(conn, version)
                    revised = _text(rng, number)
                    version = dataclasses.replace(
                        version, rowid=None, version=2, body=revised, title=title_of(revised),
                        content_hash=content_hash(revised), recorded_at=later, superseded_by=None, superseded_at=None,
                    )  # fmt: skip
                insert_version(conn, version)
        while store.conn.execute("SELECT 1 FROM mirror_dirty LIMIT 1").fetchone() is not None:
            mirror.reconcile(store)
    return time.perf_counter() - started


# --- fresh processes ------------------------------------------------------------------------------


class Runner:
    """``korg-recall`` as a fresh process per call, with its own rusage (CPU time beside wall time)."""

    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        script = shutil.which("korg-recall", path=os.path.dirname(sys.executable))
        self.argv = [script] if script else [sys.executable, "-m", "korg_bridge.recall.cli.app"]
        self.env, self.cwd = dict(env), cwd

    def run(self, *args: str) -> tuple[float, float, str]:
        child = recall_bench.spawn([*self.argv, *args], self.env, self.cwd, TIMEOUT_S)
        if child.code != 0:
            raise RuntimeError(f"korg-recall {' '.join(args)} failed: {child.err.strip()}")
        return child.seconds * 1000, child.cpu_s * 1000, child.out

    def time(self, calls: Sequence[Sequence[str]], warmups: int = 2) -> Timing:
        timing = Timing()
        for args in calls[:warmups]:
            self.run(*args)
        for args in calls[warmups:]:
            wall, cpu, _ = self.run(*args)
            timing.wall_ms.append(wall)
            timing.cpu_ms.append(cpu)
        return timing


@dataclass(slots=True)
class Latency:
    build_s: float = 0.0
    store_mib: float = 0.0
    index_s: float = 0.0
    rows: dict[str, Timing] = field(default_factory=dict)
    context: tuple[Timing, Timing, Timing] | None = None
    imports: list[ImportRow] = field(default_factory=list)


def _env(workdir: Path, project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KORG_", "CLAUDE_", "CODEX_"))}
    env.update(
        HOME=str(workdir / "home"), XDG_DATA_HOME=str(workdir / "data"), XDG_CACHE_HOME=str(workdir / "cache"),
        KORG_RECALL_PROJECT=str(project), KORG_RECALL_ACTOR="agent",
    )  # fmt: skip
    return env


def _writes(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    return [
        [
            "remember",
            "--content",
            _text(rng, MEMORIES + n) + f" (note {n})",
            "--type",
            "project",
            "--scope",
            "project",
        ]
        for n in range(count)
    ]


def measure_latency(workdir: Path) -> Latency:
    result = Latency()
    for layout in LAYOUTS:
        where = workdir / layout
        project = where / "project"
        project.mkdir(parents=True)
        store = where / "data" / "korg-recall" / "memory.sqlite"
        print(f"latency: writing {MEMORIES} memories ({layout}) ...", file=sys.stderr)
        seconds = build_store(store, "project:" + os.path.realpath(project), layout)
        if layout == "spread":
            result.build_s, result.store_mib = seconds, store.stat().st_size / 1024 / 1024
        runner = Runner(_env(where, project), project)
        suffix = "" if layout == "spread" else f" ({layout})"
        print(f"latency: remember, memories ({layout}) ...", file=sys.stderr)
        result.rows["remember" + suffix] = runner.time(_writes(SAMPLES + 2, TUNE_SEED + 5))
        result.rows["memories" + suffix] = runner.time([["memories"]] * (SAMPLES + 2))
        if layout != "spread":
            continue
        print(f"latency: generating and indexing {EVENTS} history events ...", file=sys.stderr)
        corpus = where / "corpus"
        recall_bench.generate_corpus(corpus, EVENTS)
        env = _env(where, project)
        env.update(KORG_RECALL_LEDGER=str(corpus), KORG_RECALL_INDEX=str(where / "cache" / "index.sqlite"))
        runner = Runner(env, project)
        started = time.perf_counter()
        runner.run("index")
        result.index_s = time.perf_counter() - started
        queries = list(recall_bench.LATENCY_QUERIES)
        for label, extra in (
            ("recall", []), ("recall --kinds memory", ["--kinds", "memory"]), ("recall --kinds history", ["--kinds", "history"]),
        ):  # fmt: skip
            calls = [["recall", "--query", q, "--mode", "keyword", *extra] for q in queries[:2] + queries * 2]
            print(f"latency: {label} ...", file=sys.stderr)
            result.rows[label] = runner.time(calls)
    return result


CONTEXT_PROJECT = "/home/dev/work/billing-api"
"""The brief's project: one of the history corpus's, so the last session is found and read."""
CONTEXT_TOPICS = 20
"""Topic files in the project's Claude Code memory folder: each call stats them (settled)."""


def measure_context(
    workdir: Path, corpus: Path | None = None, index: Path | None = None
) -> tuple[Timing, float]:
    """``korg-recall context`` in a fresh process: 10k memories (spread: 3,000 visible), 100k history
    events indexed, a Claude Code memory folder of :data:`CONTEXT_TOPICS` topic files; keyword only.
    Returns the timings with the history only in the index, with the project's own Claude Code
    transcripts (three sessions) settled, and with one of them grown before each call; and the
    seconds indexing took."""
    where = workdir / "context"
    project = where / "project"
    project.mkdir(parents=True)
    store = where / "data" / "korg-recall" / "memory.sqlite"
    print(f"context: writing {MEMORIES} memories ...", file=sys.stderr)
    build_store(store, f"project:{CONTEXT_PROJECT}", "spread")
    env = _env(where, project)
    env["KORG_RECALL_PROJECT"] = CONTEXT_PROJECT
    claude = Path(env["HOME"]) / ".claude" / "projects" / CONTEXT_PROJECT.replace("/", "-") / "memory"
    claude.mkdir(parents=True)
    for n in range(CONTEXT_TOPICS):
        (claude / f"project_topic_{n}.md").write_text(
            f"---\nname: Topic {n}\ndescription: Fact number {n} about billing\ntype: project\n---\nBody {n}.\n"
        )
    indexed = 0.0
    if corpus is None or index is None:
        corpus = where / "corpus"
        print(f"context: generating and indexing {EVENTS} history events ...", file=sys.stderr)
        recall_bench.generate_corpus(corpus, EVENTS)
        index = where / "cache" / "index.sqlite"
    env.update(KORG_RECALL_LEDGER=str(corpus), KORG_RECALL_INDEX=str(index))
    runner = Runner(env, project)
    started = time.perf_counter()
    runner.run("index")
    indexed = time.perf_counter() - started
    _, _, out = runner.run("context")
    if "Where the last session left off:" not in out:
        raise RuntimeError(f"the brief lacks the last session:\n{out}")
    _, _, listed = runner.run("memories", "--tag", "Topic")  # Claude Code's topic files were taken in
    if '"total": 0' in listed and "claude-auto-memory" not in runner.run("memories", "--stats")[2]:
        raise RuntimeError("Claude Code's memory folder was not read")
    print("latency: context ...", file=sys.stderr)
    plain = runner.time([["context"]] * (SAMPLES + 2))
    # A Claude Code user's case: the project's own transcript folder, refreshed by every brief.
    sessions = claude.parent
    for number in range(3):
        lines = [
            {"type": kind, "sessionId": f"s{number}", "cwd": CONTEXT_PROJECT, "timestamp": f"2026-11-0{number + 1}T10:00:0{turn}Z",
             "message": {"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]}}
            for turn, (kind, text) in enumerate((("user", f"prompt {number}"), ("assistant", f"reply {number}")))
        ]  # fmt: skip
        (sessions / f"s{number}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    settled = runner.time([["context"]] * (SAMPLES + 2))
    grown = Timing()  # the usual session start: the last session's transcript grew since the last brief
    for number in range(SAMPLES + 2):
        turn = [
            {"type": kind, "sessionId": "s2", "cwd": CONTEXT_PROJECT, "timestamp": f"2026-11-03T11:{number // 60:02d}:{number % 60:02d}Z",
             "message": {"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]}}
            for kind, text in (("user", f"next step {number}"), ("assistant", f"done {number}"))
        ]  # fmt: skip
        with open(sessions / "s2.jsonl", "a", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(line) + "\n" for line in turn))
        wall, cpu, _ = runner.run("context")
        if number >= 2:
            grown.wall_ms.append(wall)
            grown.cpu_ms.append(cpu)
    return plain, settled, grown, indexed


def context_block(plain: Timing, settled: Timing, grown: Timing) -> str:
    """The brief's rows, kept between their own markers inside the memory section."""
    rows = []
    for label, timing, target in (
        ("**`context`** (session-start brief)", plain, TARGET_RECALL_MS),
        ("`context`, the project's Claude Code sessions as indexed", settled, None),
        ("`context`, the last session grown since (refreshed)", grown, None),
    ):
        passed = None if target is None else timing.p(95, cpu=True) <= target
        rows.append([
            label, f"{timing.p(50):.0f} / {timing.p(95):.0f} ms",
            f"{timing.p(50, True):.0f} / {timing.p(95, True):.0f} ms", f"{len(timing.wall_ms)}",
            f"p95 ≤ {target:.0f} ms" if target else "-", common.verdict(passed),
        ])  # fmt: skip
    table = common.markdown_table(
        ["fresh process", "wall p50 / p95", "CPU p50 / p95", "n", "target", "verdict"], rows
    )
    return (
        "The session-start brief (`korg-recall context`, default budget 1,500 tokens), keyword only: the "
        "same 10,000 memories (spread: 3,000 visible; the project is one of the history corpus's), the "
        "100,000 history events indexed, and a Claude Code memory folder of "
        f"{CONTEXT_TOPICS} topic files for the project. Each call scans the mirror and that folder "
        "(settled: a `stat` per file), reads three groups of memories, refreshes the project's Claude Code "
        "transcript folders, and finds the last session's prompt and reply in the index. The first row has "
        "no such folder (the history is in the index only); the second gives the project three Claude Code "
        "sessions of its own, indexed as they are (a `stat` per file against the index, then read without "
        "the indexing machinery); the third appends a turn to one of them before each call, as at a real "
        "session start, so each brief refreshes the index through it. The target (the issue's: 10,000 "
        "memories and 100,000 events) is on the first row; the other two carry none and show what a Claude "
        "Code user's brief costs: about 40 ms more when the last session grew, for importing the indexing "
        "machinery (~20 ms) and the refresh's read and write of the new lines -- its p95 has been measured "
        "above 200 ms CPU on this shared machine.\n\n"
        + table
        + "\n\n**Rerun (this block only):** `python bench/memory_bench.py --context-only`"
    )


def write_context_block(block: str) -> Path:
    """Put the brief's row into the memory section of docs/benchmarks.md, leaving the rest as it is."""
    return write_block("memory_context", block)


# --- imports -----------------------------------------------------------------------------------------

IMPORT_SIZES = (1_000, 10_000, 50_000)
TARGET_IMPORT_10K_S = 30.0
"""The issue's: 10,000 mem0 memories imported in at most 30 s (they took 304 s)."""
TARGET_WRITER_WAIT_S = 2.0
"""The issue's: while an import runs, another writer waits at most a second or two at a time."""
IMPORT_TIMEOUT_S = 1800.0


@dataclass(slots=True)
class ImportRow:
    store: str
    memories: int
    wall_s: float
    cpu_s: float
    rss_mib: float
    planned_s: float
    locked_s: float
    locked_cpu_s: float
    """CPU of the importing process while it held the write lock (SQLite's work is in it; a team
    store's server work is not)."""
    created: int
    writes: list[float] = field(default_factory=list)
    """Wall seconds of each ``remember`` that ran while the import did."""
    failed_writes: int = 0
    baseline_s: float = 0.0
    """A ``remember``'s median wall time in the same store with no import running."""
    load: float = 0.0
    """The machine's 1-minute load average when the import ended (other engineers' work included)."""

    @property
    def waited_s(self) -> float:
        """The longest a ``remember`` took beyond its median alone, while the import ran."""
        return max(0.0, max(self.writes, default=0.0) - self.baseline_s)


def mem0_export(path: Path, count: int, seed: int = TUNE_SEED) -> None:
    """A mem0 JSON export of ``count`` memories written like the latency store's (the same
    generator: twelve kinds of fact about eighteen subjects, numbers and names varying)."""
    rng = random.Random(seed)
    entries = [
        {
            "id": f"00000000-0000-4000-8000-{n:012d}",
            "memory": _text(rng, n),
            "hash": f"{n:032x}",
            "metadata": {"source": "bench", "n": n},
            "categories": [rng.choice(("work", "ops", "people"))],
            "created_at": "2025-07-26T10:35:09.662945-07:00",
            "updated_at": None,
            "user_id": "bench",
        }
        for n in range(count)
    ]
    path.write_text(json.dumps({"results": entries}), encoding="utf-8")


_HELD = re.compile(
    r"planned in ([0-9.]+) s \(([0-9.]+) s CPU\), written in ([0-9.]+) s, the write lock held ([0-9.]+) s "
    r"\(([0-9.]+) s CPU\)"
)


def measure_import(workdir: Path, count: int, team: Mapping[str, str] | None = None) -> ImportRow:
    """One import of ``count`` mem0 memories into a fresh store -- a SQLite file, or a tenant of
    its own on the team store ``team`` names -- with a ``remember`` loop running beside it."""
    label = "team store" if team else "SQLite file"
    where = workdir / f"import-{count}-{'team' if team else 'sqlite'}"
    project = where / "project"
    project.mkdir(parents=True)
    source = where / "mem0.json"
    mem0_export(source, count)
    env = _env(where, project)
    if team:
        env.update(team, KORG_RECALL_TENANT=f"import-{count}")
    runner = Runner(env, project)
    baseline = runner.time(_writes(SAMPLES // 4 + 2, TUNE_SEED + 9))
    stop = threading.Event()
    writes: list[float] = []
    failures = [0]

    def writer() -> None:
        for args in _writes(100_000, TUNE_SEED + 11):
            if stop.is_set():
                return
            child = recall_bench.spawn([*runner.argv, *args], runner.env, runner.cwd, TIMEOUT_S)
            if stop.is_set():
                return  # it may have run past the import's end: not counted
            writes.append(child.seconds)
            failures[0] += child.code != 0

    thread = threading.Thread(target=writer)
    print(f"imports: {count} memories into a {label} ...", file=sys.stderr)
    thread.start()
    try:
        child = recall_bench.spawn(
            [*runner.argv, "--debug", "import", str(source), "--scope", "project"],
            runner.env,
            project,
            IMPORT_TIMEOUT_S,
        )
    finally:
        stop.set()
        thread.join(timeout=TIMEOUT_S)
    if child.code != 0:
        raise RuntimeError(f"import of {count} failed: {child.err.strip()[-500:]}")
    found = _HELD.search(child.err)
    if found is None:
        raise RuntimeError(f"the import's --debug line is missing: {child.err[-500:]}")
    report = json.loads(child.out)
    return ImportRow(
        label, count, child.seconds, child.cpu_s, child.peak_kib / 1024, float(found.group(1)), float(found.group(4)),
        float(found.group(5)), int(report["created"]), writes, failures[0], baseline.p(50) / 1000, os.getloadavg()[0],
    )  # fmt: skip


def measure_imports(
    workdir: Path, sizes: Sequence[int] = IMPORT_SIZES, *, team: bool = True
) -> list[ImportRow]:
    """The import rows on a SQLite file, then (``team``, where the embedded server runs) on a team store."""
    rows = [measure_import(workdir, count) for count in sizes]
    if not team:
        return rows
    sys.path.insert(0, str(common.REPO_ROOT))  # the tests package: its embedded PostgreSQL
    from tests.helpers.postgres import EmbeddedServer, Unavailable, create_database, create_roles

    try:
        server = EmbeddedServer.start(fsync=True, settings=("shared_buffers=256MB",))
    except Unavailable as exc:
        print(f"imports: no team store rows ({exc})", file=sys.stderr)
        return rows
    try:
        url = create_database(create_roles(server), "korg")
        rows += [measure_import(workdir, count, {"KORG_RECALL_STORE": url}) for count in sizes]
    finally:
        server.stop()
    return rows


def import_block(rows: Sequence[ImportRow]) -> tuple[str, list[bool]]:
    """The import rows, kept between their own markers inside the memory section. The verdicts are on
    CPU time, as the latency rows': on this shared machine a process mostly waits for a core."""
    table: list[list[str]] = []
    verdicts: list[bool] = []
    for row in rows:
        sqlite = row.store == "SQLite file"
        # What another writer waits for: on SQLite the import's work while it holds the lock; on a
        # team store that includes the server's work, which only the wall time shows.
        in_turn = row.locked_cpu_s if sqlite else row.locked_s
        passed_wait = row.failed_writes == 0 and in_turn <= TARGET_WRITER_WAIT_S
        passed_time = row.cpu_s <= TARGET_IMPORT_10K_S if row.memories == 10_000 else None
        verdicts.append(passed_wait)
        if passed_time is not None:
            verdicts.append(passed_time)
        targets = [f"lock ≤ {TARGET_WRITER_WAIT_S:.0f} s" + (" CPU" if sqlite else "")]
        if passed_time is not None:
            targets.insert(0, f"≤ {TARGET_IMPORT_10K_S:.0f} s CPU")
        table.append([
            row.store, f"**{row.memories:,}**" if passed_time is not None else f"{row.memories:,}",
            f"{row.wall_s:.1f} s / **{row.cpu_s:.1f} s**", f"{row.rss_mib:.0f} MiB", f"{row.planned_s:.1f} s",
            f"{row.locked_s:.2f} s / **{row.locked_cpu_s:.2f} s**", f"{row.created:,}",
            f"{len(row.writes)}, {row.failed_writes} failed", f"{row.baseline_s:.2f} / {max(row.writes, default=0.0):.2f} s",
            f"{row.load:.1f}", ", ".join(targets), common.verdict(passed_wait and passed_time is not False),
        ])  # fmt: skip
    rendered = common.markdown_table(
        ["store", "mem0 memories", "import wall / CPU", "peak RSS", "planned in", "write lock held: wall / CPU",
         "created", "`remember` calls meanwhile", "`remember` wall: alone p50 / longest meanwhile",
         "load at the end", "target", "verdict"],
        table,
    )  # fmt: skip
    text = (
        "Imports: `korg-recall import` of a mem0 JSON export (`--scope project`) into a fresh store -- a "
        "SQLite file, then a tenant of its own on the team store (PostgreSQL, embedded, fsync on) -- while "
        "another process calls `remember` in the same store back to back (its calls' wall time beside its "
        "median alone). The memories are written like the latency store's, so about a third repeat another's "
        "text (`exists`) and most have similar ones (links): the dedup work is real. The import plans against "
        "a snapshot without the write lock -- each memory's candidates come from an in-memory index in which "
        "words held by more than 64 memories nominate none, so a memory costs the same whatever the store's "
        'size and the import is linear -- then writes in one transaction; "write lock held" is the part of '
        "it other writers wait for (its `--debug` line): on the SQLite file the whole transaction, on the "
        "team store only its checks and end, its new rows being written before it takes the tenant's lock. "
        "The verdicts are on CPU time where the importing process does the work (the SQLite rows): the "
        "machine is shared with other engineers' builds (see the load column), and under that load wall "
        "times stretch three- to fivefold -- the longest `remember` wait tracks the wall time the lock was "
        "held, not its CPU."
        "\n\n" + rendered + "\n\n**Rerun (this block only):** `python bench/memory_bench.py --imports-only`"
    )
    return text, verdicts


def write_block(name: str, block: str) -> Path:
    """Put one block of rows into the memory section of docs/benchmarks.md, leaving the rest as it is."""
    path = common.BENCHMARKS_MD
    document = path.read_text(encoding="utf-8")
    start, end = common._markers(SECTION)
    i, j = document.find(start), document.find(end)
    if i < 0 or j < i:
        raise ValueError(f"docs/benchmarks.md has no {SECTION} section; run the full benchmark first.")
    body = document[i + len(start) : j]
    updated = common.replace_section(body.strip("\n"), name, block)
    return common.write_section(SECTION, updated)


# --- the quality suites -----------------------------------------------------------------------------


def _quality_env(workdir: Path) -> dict[str, str]:
    return {"HOME": str(workdir), "KORG_RECALL_MIRROR": "0", "KORG_RECALL_ACTOR": "agent"}


def model_dir() -> str | None:
    found = os.environ.get(MODEL_DIR_ENV, "").strip()
    return found if found and Path(found, "model.onnx").exists() else None


def semantic_decider(directory: str) -> Any:
    """The dedup suite's second write decided with the model's cosine, as ``remember`` does when a
    model is present (the model loaded once instead of once per write)."""
    import numpy as np

    from korg_bridge.recall.memory.drafts import make_draft
    from korg_bridge.recall.memory.embedding import embed_text
    from korg_bridge.recall.memory.operations import remember
    from korg_bridge.recall.memory.write_policy import decide
    from korg_bridge.recall.semantic.embed import load_embedder

    embedder = load_embedder({MODEL_DIR_ENV: directory, "HOME": os.environ.get("HOME", "/tmp")})

    def decide_with(store: Store, ctx: Any, scope: str, first: str, second: str) -> str:
        made = remember(store, ctx, {"content": first, "type": "project", "scope": scope})
        draft, _ = make_draft({"content": second, "type": "project"}, scope, allow_secrets=False)
        with store.reading() as tx:
            old = tx.execute("SELECT title, body FROM memory WHERE id = ?", (made["id"],)).fetchone()
        vectors = embedder.embed([embed_text(draft.title, draft.body), embed_text(old[0], old[1])])
        with store.reading() as conn:
            return decide(conn, draft, {str(made["id"]): float(np.dot(vectors[0], vectors[1]))}).status

    return decide_with


@dataclass(slots=True)
class Quality:
    updates: dict[int, suites.UpdateScore] = field(default_factory=dict)
    dedup: dict[tuple[int, str], suites.DedupScore] = field(default_factory=dict)


def measure_quality(workdir: Path, store_url: str | None = None) -> Quality:
    """The suites on each seed: in SQLite stores, or (``store_url``) in tenants of a team store."""
    quality = Quality()
    env = _quality_env(workdir)
    directory = model_dir()
    decider = semantic_decider(directory) if directory else None
    for seed in (TUNE_SEED, *SEEN_SEEDS, HELD_OUT_SEED):
        print(f"quality: seed {seed} ...", file=sys.stderr)
        quality.updates[seed] = suites.run_updates(seed, env, store_url=store_url)
        quality.dedup[(seed, "keyword")] = suites.run_dedup(seed, env, store_url=store_url)
        if decider is not None:
            quality.dedup[(seed, "model")] = suites.run_dedup(seed, env, decider, store_url=store_url)
    return quality


# --- the written safety corpora ------------------------------------------------------------------------

SAFETY_SECTION = "memory_safety"
TARGET_DETECTION = 0.95
TARGET_FALSE_POSITIVES = 0.03


@dataclass(slots=True)
class Safety:
    dedup: dict[tuple[str, str], suites.DedupScore] = field(default_factory=dict)
    """(half, similarity) → score."""
    injections: dict[str, suites.InjectionScore] = field(default_factory=dict)


def measure_safety(workdir: Path, store_url: str | None = None) -> Safety:
    """Both corpora, each half: dedup with keywords (and with the model's cosine when one is
    installed), injected instructions through the write path's check."""
    safety = Safety()
    env = _quality_env(workdir)
    directory = model_dir()
    decider = semantic_decider(directory) if directory else None
    for split in suites.SPLITS:
        print(f"safety: {split} half ...", file=sys.stderr)
        pairs = suites.corpus_pairs(split)
        safety.dedup[(split, "keyword")] = suites.run_dedup(0, env, store_url=store_url, pairs=pairs)
        if decider is not None:
            safety.dedup[(split, "model")] = suites.run_dedup(
                0, env, decider, store_url=store_url, pairs=pairs
            )
        safety.injections[split] = suites.score_injections(split)
    return safety


def safety_tables(safety: Safety, report: list[bool]) -> str:
    rows: list[list[str]] = []
    for (split, how), score in safety.dedup.items():
        passed = score.contradictions_merged == 0 and score.precision >= TARGET_RATE
        if split == "held-out":
            report.append(passed)
        rows.append([
            split, how, f"{score.merges}", f"**{score.precision:.3f}**", f"**{score.contradictions_merged}**/{score.contradictions}",
            f"{score.paraphrases_merged}/{score.paraphrases} ({score.recall:.2f})", "0 contradiction merges",
            common.verdict(passed),
        ])  # fmt: skip
    dedup = common.markdown_table(
        [
            "half",
            "similarity",
            "merges",
            "precision",
            "contradictions merged",
            "paraphrases merged (recall)",
            "target",
            "verdict",
        ],
        rows,
    )
    rows = []
    for split, found in safety.injections.items():
        passed = found.detection >= TARGET_DETECTION and found.false_positives <= TARGET_FALSE_POSITIVES
        if split == "held-out":
            report.append(passed)
        rows.append([
            split, f"{found.detected}/{found.instructions}", f"**{_pct(found.detection)}**", f"{found.flagged}/{found.facts}",
            f"**{_pct(found.false_positives)}**", f"≥ {_pct(TARGET_DETECTION)} / ≤ {_pct(TARGET_FALSE_POSITIVES)}",
            common.verdict(passed),
        ])  # fmt: skip
    injections = common.markdown_table(
        [
            "half",
            "instructions flagged",
            "detection",
            "facts flagged",
            "false positives",
            "target",
            "verdict",
        ],
        rows,
    )
    kinds: dict[str, list[int]] = {}
    for (split, how), score in safety.dedup.items():
        if split == "held-out" and how == "keyword":
            kinds = score.by_kind
    detail = ", ".join(f"{kind} {merged}/{pairs}" for kind, (pairs, merged) in sorted(kinds.items()))
    wrong = [item for found in safety.injections.values() for item in found.wrong]
    return f"{dedup}\n\nMerged pairs by kind (held-out half, keyword): {detail}.\n\n{injections}\n\n" + (
        "Missed or flagged by mistake: " + "; ".join(wrong) + "."
        if wrong
        else "Nothing missed or flagged by mistake."
    )


SAFETY_INTRO = """What the write policy merges and what it trusts, on the corpora written for it in
`tests/data` (by hand, before the code changed; each entry of a kind alternates between a tuning
half, looked at while the guard and the checks changed, and a held-out half). **Dedup**
(`contradictions.json`): each pair written with `remember` into a scope of its own; 246
contradicting pairs -- swapped roles or order (42), negations (38), numbers (35), names (35),
relations and antonyms (34), tense (28), quantities and who (20), dates (14) -- must never merge;
218 paraphrases -- reordered, passive, inflected, surface changes, synonyms, contractions,
elaborated -- should, and their recall is reported (a missed merge costs a line, a wrong one hides a
fact). The "model" rows decide the second write with the local embedding model's cosine as well,
as `remember` does when one is installed. **Injected instructions** (`injections.json`): 70
agent-written instructions in ordinary sentences -- requests to reveal credential files, keys, the
environment or the prompt (22), orders for every turn to come (20), imperatives addressed to the
assistant by name (16), links posing as where a secret is (12) -- against 139 ordinary memories
(preferences, working rules, facts; many naming passwords, tokens, prompts, languages or links),
through the check every write runs, as an agent's write (a person's own order about replies is
their preference and is not flagged)."""

SAFETY_HISTORY = """Before these changes, with keywords: contradictions merged 36/124 (tuning) and
37/122 (held out); paraphrases merged 66/111 and 69/107; instructions flagged 0/35 and 2/35, facts
flagged 0/70 and 1/69 (a memory naming the support bot's "system prompt"). The held-out halves
were measured as totals while the code changed (dedup 0/122 with keywords and 2/122 with the
model; instructions 34/35). Then the test holding every contradicting pair to a named difference
showed the two held-out pairs the guard saw none in ("We use / used MySQL", "the 1st / 15th of each
month"): the tense check skipped four-letter verbs and ordinals were not numbers. Both were fixed
for every text, not for those pairs -- but the dedup held-out half has been looked at since. The
injection held-out half's misses were not looked at before this run."""


def render_safety(safety: Safety, where: common.Machine, args: list[str]) -> tuple[str, int]:
    report: list[bool] = []
    tables = safety_tables(safety, report)
    body = common.section_body(
        "Memory safety: contradictions and injected instructions (`bench/memory_bench.py --safety`)",
        SAFETY_INTRO, tables, where, common.rerun_command(__file__, ["--safety", *args]), SAFETY_HISTORY,
    )  # fmt: skip
    return body, sum(not passed for passed in report)


def _safety_only(no_write: bool, check: bool, store_url: str | None) -> int:
    started = time.perf_counter()
    where = common.machine()
    with tempfile.TemporaryDirectory(prefix="memory-safety-") as tmp:
        safety = measure_safety(Path(tmp), store_url)
    body, failed = render_safety(safety, where, [])
    print(body)
    print(f"{failed} target(s) missed; {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not no_write and store_url is None:
        print(
            f"wrote the {SAFETY_SECTION} section of {common.write_section(SAFETY_SECTION, body)}",
            file=sys.stderr,
        )
    return 1 if check and failed else 0


# --- report -------------------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def latency_table(latency: Latency, report: list[bool]) -> str:
    rows: list[list[str]] = []
    for label, timing in latency.rows.items():
        target = (
            TARGET_RECALL_MS
            if label == "recall"
            else TARGET_WRITE_MS
            if label in ("remember", "memories")
            else None
        )
        passed = None if target is None else timing.p(95, cpu=True) <= target
        if passed is not None:
            report.append(passed)
        name = f"**`{label}`**" if target is not None else f"`{label}`"
        rows.append([
            name, f"{timing.p(50):.0f} / {timing.p(95):.0f} ms", f"{timing.p(50, True):.0f} / {timing.p(95, True):.0f} ms",
            f"{len(timing.wall_ms)}", f"p95 ≤ {target:.0f} ms" if target else "-", common.verdict(passed),
        ])  # fmt: skip
    return common.markdown_table(
        ["fresh process", "wall p50 / p95", "CPU p50 / p95", "n", "target", "verdict"], rows
    )


def _which(seed: int) -> str:
    return "tuning" if seed == TUNE_SEED else "seen once" if seed in SEEN_SEEDS else "held out"


def quality_tables(quality: Quality, report: list[bool]) -> str:
    rows: list[list[str]] = []
    for seed, score in quality.updates.items():
        which = _which(seed)
        for kind, label in (("now", "newest version first"), ("as_of", "`as_of`: the version valid then")):
            passed = score.rate(kind) >= TARGET_RATE
            if seed == HELD_OUT_SEED:
                report.append(passed)
            rows.append([
                f"{seed} ({which})", label, f"{score.right[kind]}/{score.asked[kind]}", f"**{_pct(score.rate(kind))}**",
                _pct(score.rate(kind, top=True)), "≥ 95 %", common.verdict(passed),
            ])  # fmt: skip
    updates = common.markdown_table(
        [
            "seed",
            "question",
            "right",
            "rate (among the fact's versions)",
            "top hit overall",
            "target",
            "verdict",
        ],
        rows,
    )
    rows = []
    for (seed, how), score in quality.dedup.items():
        which = _which(seed)
        passed = score.precision >= TARGET_RATE and score.contradictions_merged == 0
        if seed == HELD_OUT_SEED:
            report.append(passed)
        rows.append([
            f"{seed} ({which})", how, f"{score.merges}", f"**{score.precision:.3f}**",
            f"**{score.contradictions_merged}**/{score.contradictions}",
            f"{score.paraphrases_merged}/{score.paraphrases} ({score.recall:.2f})", "precision ≥ 0.95, 0 contradiction merges",
            common.verdict(passed),
        ])  # fmt: skip
    dedup = common.markdown_table(
        [
            "seed",
            "similarity",
            "merges",
            "precision",
            "contradictions merged",
            "paraphrases merged (recall)",
            "target",
            "verdict",
        ],
        rows,
    )
    kinds: dict[str, list[int]] = {}
    for (seed, how), score in quality.dedup.items():
        if seed == HELD_OUT_SEED and how == "keyword":
            kinds = score.by_kind
    detail = ", ".join(f"{kind} {merged}/{pairs}" for kind, (pairs, merged) in sorted(kinds.items()))
    return f"{updates}\n\n{dedup}\n\nMerged pairs by kind (held-out seed, keyword): {detail}."


VARIABILITY = (
    " On this shared machine the tails move with the other work: `remember` keeps its target with "
    "little room and not in every run -- the run just before this one, on the same code but for a "
    "shortcut since undone, measured 155 ms CPU p95 (p50 120 ms) while the load average rose from 1.4 "
    "to 2.7; `memories` and `recall` kept theirs in both runs."
)
"""Observed in the run before the recorded one (kept by hand: one run cannot know it)."""

INTRO = """What the memory store costs and how well it keeps facts, measured by
`bench/memory_bench.py`. Latency: each figure is a fresh `korg-recall` process, as the
bridge runs one per tool call, with no embedding model in the environment (keyword
checks only), against a store of 10,000 memories (a year of history, a tenth with a second
version; written in process through the store's row API, their mirror files settled first).
In the bold rows the calling project holds 2,000 of them (the per-scope soft cap), the user
1,000 and fourteen other projects the rest, so a call sees 3,000; the "crowded" rows put all
10,000 in the two scopes a call sees (3.5 times the soft cap). `recall` also searches 100,000
history events (the corpus of `bench/recall_bench.py`, indexed beforehand) with `--mode
keyword`, over the 24 queries of that benchmark, twice. The verdicts are on CPU time: the
machine is shared with other work, and waiting for a core (or for a disk flush: every write
fsyncs the store, its mirror file and the operation log) is not the code's cost."""

QUALITY_INTRO = """Quality, on the generated suites of `bench/memory_suites.py`, through the real write policy
and retrieval. **Knowledge updates**: 62 facts (a service's port, a dependency's version, a
person's role, a deadline, the team's tool), each with two to four values written weeks apart
in different words and by different paths (plain `remember`, `remember` with a `key`,
`supersedes`, `revise`), among other memories about the same subjects; questions use other
words again. "Rate" counts a question right when, among the fact's own versions in the top 10
hits, the first is the newest (or, with `as_of` a moment between two values, the one valid
then); "top hit overall" also requires that no other memory ranks above it. **Dedup**: pairs
written one after the other into a scope of their own: paraphrases (reordered, inflected,
elaborated; some with a synonym) should merge, contradictions (a different number, date,
version, negation, named entity -- capitalised, or a lower-case tool, repo or service name --
or swapped sides) must never merge. The "model" row decides the second write with the cosine of
the local embedding model as well, as `remember` does when one is installed. Thresholds and
ranking were tuned on seed 20261211 only. Seed 20261212 was the first held-out seed: its figures
were looked at once (newest-first 94.6 %, below the target, with the ranking of that moment), then
two general changes were made on the tuning seed alone (an `as_of` answer orders its linked
lineages as they stood then; the value-link overlap went from 0.2 to 0.15), so it is shown but
no longer held out. Seed 20261213, generated after those changes, was then the held-out seed; after
it was looked at, one more change was made on the tuning seed alone (a lineage ranks by the best
match among all its versions and shows its head, so a revision worded differently keeps what the
fact is about: top hit overall on the tuning seed went from 80.7 % to 88.6 %). Seed 20261214 was
generated after that change and not looked at before this run: its rows carry the verdicts."""


def render(
    latency: Latency | None, quality: Quality, where: common.Machine, args: list[str]
) -> tuple[str, int]:
    report: list[bool] = []
    parts: list[str] = []
    if latency is not None:
        parts.append(latency_table(latency, report))
        if latency.context is not None:
            report.append(latency.context[0].p(95, cpu=True) <= TARGET_RECALL_MS)
            start, end = common._markers("memory_context")
            parts.append(f"{start}\n{context_block(*latency.context)}\n{end}")
        if latency.imports:
            block, verdicts = import_block(latency.imports)
            report.extend(verdicts)
            start, end = common._markers("memory_import")
            parts.append(f"{start}\n{block}\n{end}")
    tables = quality_tables(quality, report)
    notes = [QUALITY_INTRO, tables]
    if latency is not None:
        notes.insert(
            0,
            f"Setup: the 10k memories took {latency.build_s:.0f} s to write and settle (store "
            f"{latency.store_mib:.0f} MiB); indexing the 100k events took {latency.index_s:.0f} s. "
            "Where the time goes: about 70 ms of every call is the interpreter and korg-recall's "
            "imports (`korg-recall --version` alone); `remember` adds the redactor's patterns (~20 ms), "
            "the mirror scan of its scope (one `stat` per file: ~10 ms per 3,000 files here), the "
            "policy's queries and three fsyncs (wall time, not CPU). The crowded rows carry no target: "
            "with all 10,000 memories in the scopes a call sees the scan and the listing grow with them "
            "(a scope past the 2,000 soft cap is one `remember` reports as needing review)." + VARIABILITY,
        )
    body = common.section_body(
        "Memory (`bench/memory_bench.py`)", INTRO, "\n\n".join(parts) or "(latency not run)", where,
        common.rerun_command(__file__, args), "\n\n".join(notes),
    )  # fmt: skip
    return body, sum(not passed for passed in report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument("--quality", action="store_true", help="the quality suites only; prints only")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--context-only",
        action="store_true",
        help="only the session-start brief's row (~3 min); replaces that row in docs/benchmarks.md",
    )
    parser.add_argument(
        "--imports-only",
        action="store_true",
        help="only the import rows (~3 min); replaces them in docs/benchmarks.md",
    )
    parser.add_argument(
        "--store-url",
        help="with --quality: run the suites on this PostgreSQL team store (the application role's URL), a "
        "tenant per run; bench/team_bench.py runs them on an embedded server and records both backends",
    )
    parser.add_argument(
        "--safety",
        action="store_true",
        help="only the written corpora of tests/data (~1 min); records their own section of docs/benchmarks.md",
    )
    parser.add_argument(
        "--ranking",
        action="store_true",
        help="the memory ranking suite (bench/memory_ranking.py: keyword, semantic and hybrid on "
        "bench/golden/memories.json, with KORG_RECALL_MODEL_DIR); records its own section",
    )
    args = parser.parse_args(argv)
    if args.ranking:
        import memory_ranking

        return memory_ranking.main(["--no-write"] if args.no_write else [])
    if args.store_url and not (args.quality or args.safety):
        parser.error("--store-url goes with --quality or --safety (the latency rows are the SQLite store's)")
    if args.context_only:
        return _context_only(args.no_write, args.check)
    if args.imports_only:
        return _imports_only(args.no_write, args.check)
    if args.safety:
        return _safety_only(args.no_write, args.check, args.store_url)
    started = time.perf_counter()
    where = common.machine()
    recall_bench.compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
        workdir = Path(tmp)
        saved = os.environ.pop(MODEL_DIR_ENV, None)  # latency is keyword only
        try:
            latency = None if args.quality else measure_latency(workdir / "latency")
            if latency is not None:  # the spread layout's corpus and index, reused
                spread = workdir / "latency" / "spread"
                plain, settled, grown, _ = measure_context(
                    workdir / "latency", spread / "corpus", spread / "cache" / "index.sqlite"
                )
                latency.context = (plain, settled, grown)
                latency.imports = measure_imports(workdir / "imports")
        finally:
            if saved is not None:
                os.environ[MODEL_DIR_ENV] = saved
        (workdir / "quality").mkdir()
        quality = measure_quality(workdir / "quality", args.store_url)
    body, failed = render(latency, quality, where, [])
    print(body)
    print(f"{failed} target(s) missed; {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not args.no_write and not args.quality:
        path = common.write_section(SECTION, body)
        print(f"wrote the {SECTION} section of {path}", file=sys.stderr)
    return 1 if args.check and failed else 0


def _context_only(no_write: bool, check: bool) -> int:
    recall_bench.compile_bytecode()
    saved = os.environ.pop(MODEL_DIR_ENV, None)
    try:
        with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
            timing, settled, grown, indexed = measure_context(Path(tmp))
    finally:
        if saved is not None:
            os.environ[MODEL_DIR_ENV] = saved
    block = context_block(timing, settled, grown)
    print(block)
    print(f"(indexing the 100k events took {indexed:.0f} s)", file=sys.stderr)
    if not no_write:
        print(f"wrote the context row into {write_context_block(block)}", file=sys.stderr)
    return 1 if check and timing.p(95, cpu=True) > TARGET_RECALL_MS else 0


def _imports_only(no_write: bool, check: bool) -> int:
    recall_bench.compile_bytecode()
    where = common.machine()
    saved = os.environ.pop(MODEL_DIR_ENV, None)  # imports use the keyword check only anyway
    try:
        with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
            rows = measure_imports(Path(tmp))
    finally:
        if saved is not None:
            os.environ[MODEL_DIR_ENV] = saved
    block, verdicts = import_block(rows)
    load = f"{where.load:.1f}" if where.load is not None else "unknown"
    block += (
        f"\n\nMeasured {where.date} on {where.cores} cores ({where.cpu}), load average {load} at the start: "
        "other engineers' work shared the machine, so the wall times are noisy: under heavier load they "
        "stretch to several times the CPU times, the lock's wall time with them."
    )
    print(block)
    if not no_write:
        print(f"wrote the import rows into {write_block('memory_import', block)}", file=sys.stderr)
    return 1 if check and not all(verdicts) else 0


if __name__ == "__main__":
    raise SystemExit(main())
