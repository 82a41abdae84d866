"""A resident engine against a fresh process per call, interleaved in one run (issue #22).

    python bench/engine_bench.py              # 20k events with vectors, 10k memories (~10 min)
    python bench/engine_bench.py --quick      # 3k events, 2k memories; prints only

Every call is a fresh ``korg-recall`` process, as the bridge makes it; the only difference
between the two arms is ``KORG_RECALL_ENGINE`` (``off``: the process does the work itself;
``on``: its front half hands the call to ``korg-recall engine``, started once for the run).
Arms alternate call by call, their order swapped every round, so load from the other
engineers on the machine falls on both alike. The history is ``recall_bench``'s mixed corpus
with every event embedded (``korg-recall index``); the store is ``memory_bench``'s 10k
memories (``spread`` layout), every one embedded; the model is ``KORG_RECALL_MODEL_DIR``'s.
Then the same calls through ``korg-bridge korg-recall`` (the SDK's client, tools/call), and
the engine's resident memory with the model loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _common as common
import anyio
import memory_bench as mb
import recall_bench as rb

SECTION = "engine"
TARGETS_MS = {
    "keyword recall": 40.0,
    "hybrid recall": 80.0,
    "remember": 50.0,
    "memories": 40.0,
    "context": 40.0,
}
"""The issue's p50 goals for a call answered by the engine."""
TARGET_RSS_MB = 350.0
ROUNDS = 30
TIMEOUT_S = 300.0
READY_S = 180.0


PYTHON = [sys.executable]
"""The interpreter the calls and the bridge run with: a user's install (:func:`user_install`)
unless ``--editable``."""


def korg_recall() -> list[str]:
    script = shutil.which("korg-recall", path=os.path.dirname(PYTHON[0]))
    return [script] if script else [PYTHON[0], "-m", "korg_bridge.recall.cli.app"]


def user_install(where: Path) -> Path:
    """korg-bridge installed as a user has it (a wheel, not this checkout's editable install), in a
    venv of its own that finds the dependencies in this one; its ``python``. A kept venv
    (``--workdir``) gets this checkout's wheel again: it measures the code it was run from.

    An editable install costs every process a finder import at start-up (about 9 ms, most of what
    the front half spends before it reaches the engine); a user's install has none."""
    import sysconfig

    python = where / "venv" / "bin" / "python"
    repo = Path(__file__).resolve().parents[1]
    wheels = where / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    print("engine bench: building a wheel of this checkout for a user's install ...", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(repo)],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if not python.exists():
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(where / "venv")],
            check=True,
            stdin=subprocess.DEVNULL,
        )
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        # A plain path, not a site dir: this venv's .pth files (the editable finder) are not run there.
        Path(site, "korg-bench-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(wheels.glob("korg_bridge-*.whl"))
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall", str(wheel)],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return python


def prepare(workdir: Path, events: int, memories: int) -> tuple[dict[str, str], Path]:
    """The history, the store, every vector; the environment of the calls and the project."""
    project = workdir / "project"
    project.mkdir(parents=True)
    ledgers = workdir / "ledgers"
    print(f"engine bench: {events:,} history events ...", file=sys.stderr)
    rb.generate_corpus(ledgers, events)
    env = mb._env(workdir, project)
    model = os.environ.get(mb.MODEL_DIR_ENV)
    if not model:
        raise SystemExit(
            "engine bench: set KORG_RECALL_MODEL_DIR to a local model (see .ci/build_model_dir.py)"
        )
    env.update(
        KORG_RECALL_MODEL_DIR=model,
        KORG_RECALL_LEDGER=str(ledgers),
        KORG_RECALL_INDEX=str(workdir / "cache" / "index.sqlite"),
        KORG_RECALL_BACKGROUND="0",
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # children with bytecode caching, as users have them
    print(f"engine bench: {memories:,} memories ...", file=sys.stderr)
    mb.MEMORIES = memories
    mb.build_store(
        workdir / "data" / "korg-recall" / "memory.sqlite", "project:" + os.path.realpath(project), "spread"
    )
    print("engine bench: indexing and embedding every event ...", file=sys.stderr)
    done = rb.spawn([*korg_recall(), "index"], {**env, "KORG_RECALL_ENGINE": "off"}, project, 3 * 3600)
    if done.code != 0:
        raise RuntimeError(f"korg-recall index failed: {done.err}")
    print("engine bench: embedding every memory ...", file=sys.stderr)
    from korg_bridge.recall.memory.backfill import run_memory

    if run_memory(env) != 0:
        raise RuntimeError("the memories could not be embedded")
    return env, project


def start_engine(env: dict[str, str], project: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [*korg_recall(), "engine", "--idle-exit", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=project,
    )
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], READY_S)
    line = os.read(proc.stderr.fileno(), 4096).decode() if ready else ""
    if "listening" not in line:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the engine did not start: {line!r}")
    print(f"engine bench: {line.strip()}", file=sys.stderr)
    return proc


ARMS = ("fresh", "engine")


def arm_order(n: int) -> tuple[str, ...]:
    """The arms in round ``n``'s order: swapped every round, so neither always goes first."""
    return ARMS if n % 2 == 0 else ARMS[::-1]


def arm_env(env: dict[str, str], arm: str) -> dict[str, str]:
    """The environment of an arm's calls: the only difference between the two."""
    return {**env, "KORG_RECALL_ENGINE": "off" if arm == "fresh" else "on"}


def calls(rounds: int) -> dict[str, Callable[[int, str], list[str]]]:
    """What each round runs. A run's notes carry a token of their own: a note an earlier run in a
    kept ``--workdir`` already wrote is answered ``exists`` without a write, some 15 ms cheaper than
    the write a ``remember`` is measured for."""
    queries = list(rb.LATENCY_QUERIES)
    run = os.urandom(3).hex()
    return {
        "keyword recall": lambda n, _arm: [
            "recall",
            "--query",
            queries[n % len(queries)],
            "--mode",
            "keyword",
        ],
        "hybrid recall": lambda n, _arm: ["recall", "--query", queries[n % len(queries)], "--mode", "hybrid"],
        "remember": lambda n, arm: [
            "remember",
            "--content",
            f"bench note {n} of the {arm} arm in run {run}: {mb.FACTS[n % len(mb.FACTS)].format(s='x', n=n, k='y')}",
            "--type",
            "project",
        ],
        "memories": lambda _n, _arm: ["memories"],
        "context": lambda _n, _arm: ["context"],
    }


def interleaved(env: dict[str, str], project: Path, rounds: int) -> dict[tuple[str, str], list[float]]:
    """(call, arm) -> wall milliseconds of each fresh process, the two arms alternating."""
    arms = {arm: arm_env(env, arm) for arm in ARMS}
    answered = json.loads(rb.spawn([*korg_recall(), "stats"], arms["engine"], project, TIMEOUT_S).out)[
        "engine"
    ]
    if not answered.get("answered"):
        raise RuntimeError(f"no engine answered: {answered}")
    samples: dict[tuple[str, str], list[float]] = {}
    plan = calls(rounds)
    for n in range(-2, rounds):  # two warm-up rounds, not kept
        for name, make in plan.items():
            for arm in arm_order(n):
                child = rb.spawn([*korg_recall(), *make(n + 10, arm)], arms[arm], project, TIMEOUT_S)
                if child.code != 0:
                    raise RuntimeError(f"{name} ({arm}) exited {child.code}: {child.err.strip()}")
                if n >= 0:
                    samples.setdefault((name, arm), []).append(child.seconds * 1000)
        print(f"engine bench: round {n + 1}/{rounds} done", file=sys.stderr)
    return samples


def _bridge_plan() -> dict[str, Callable[[int], tuple[str, dict[str, Any]]]]:
    queries = list(rb.LATENCY_QUERIES)
    return {
        "keyword recall": lambda n: (
            "korg-recall_recall",
            {"query": queries[n % len(queries)], "mode": "keyword"},
        ),
        "hybrid recall": lambda n: (
            "korg-recall_recall",
            {"query": queries[n % len(queries)], "mode": "hybrid"},
        ),
        "memories": lambda _n: ("korg-recall_memories", {}),
        "context": lambda _n: ("korg-recall_context", {}),
    }


async def _bridged(
    env: dict[str, str], project: Path, rounds: int, out: dict[tuple[str, str], list[float]]
) -> None:
    from contextlib import AsyncExitStack

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    plan = _bridge_plan()
    async with AsyncExitStack() as stack:
        clients = {}
        for arm in ARMS:
            params = StdioServerParameters(
                command=PYTHON[0],
                args=["-m", "korg_bridge", "korg-recall"],
                env=arm_env(env, arm),
                cwd=str(project),
            )
            errlog = stack.enter_context(tempfile.TemporaryFile("w+"))  # noqa: SIM115 -- the stack closes it
            clients[arm] = await stack.enter_async_context(
                Client(stdio_client(params, errlog=errlog), read_timeout_seconds=TIMEOUT_S)
            )
            await clients[arm].list_tools()  # the client's output-schema cache, before any timing
        for n in range(-2, rounds):  # two warm-up rounds, not kept
            for name, make in plan.items():
                tool, arguments = make(n)
                for arm in arm_order(n):
                    started = time.perf_counter()
                    result = await clients[arm].call_tool(tool, arguments)
                    if result.is_error:
                        raise RuntimeError(f"{tool} through the bridge ({arm}) failed: {result.content}")
                    if n >= 0:
                        out.setdefault((name, arm), []).append((time.perf_counter() - started) * 1000)


def through_bridge(env: dict[str, str], project: Path, rounds: int) -> dict[tuple[str, str], list[float]]:
    """The same reads through ``korg-bridge korg-recall`` tools/call: one bridge per arm, both
    serving at once, the arms alternating call by call as in :func:`interleaved`."""
    samples: dict[tuple[str, str], list[float]] = {}
    anyio.run(_bridged, env, project, rounds, samples)
    return samples


def rss_mb(pid: int) -> float:
    kib = common.proc_status_kib(pid, "VmRSS") or 0
    return kib / 1024


def table(samples: dict[tuple[str, str], list[float]], goals: bool) -> str:
    rows = []
    for name in dict.fromkeys(key[0] for key in samples):
        fresh, engine = samples[(name, "fresh")], samples[(name, "engine")]
        p50 = common.percentile(engine, 50)
        goal = TARGETS_MS.get(name)
        rows.append(
            [
                name,
                f"{common.percentile(fresh, 50):.0f} / {common.percentile(fresh, 95):.0f}",
                f"{p50:.0f} / {common.percentile(engine, 95):.0f}",
                f"{common.percentile(fresh, 50) / p50:.1f}x",
                *(
                    [f"≤ {goal:.0f}", common.verdict(p50 <= goal)]
                    if goals and goal
                    else [""] * (2 if goals else 0)
                ),
            ]
        )
    headers = [
        "call",
        "fresh p50 / p95 ms",
        "engine p50 / p95 ms",
        "speed-up",
        *(["goal p50", ""] if goals else []),
    ]
    return common.markdown_table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--quick", action="store_true", help="3k events, 2k memories, 10 rounds; prints only")
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    parser.add_argument(
        "--editable",
        action="store_true",
        help="run this checkout's editable install, not a user's install of it",
    )
    parser.add_argument(
        "--workdir", type=Path, help="keep the corpus, store and install here, and reuse them when present"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.memories, args.rounds, args.no_write = 3_000, 2_000, 10, True
    # A bench stopped from outside still stops its engine (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    where = common.machine()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        workdir = args.workdir.resolve() if args.workdir else Path(tmp)
        saved = workdir / "bench-env.json"
        sizes = {"events": args.events, "memories": args.memories}
        if saved.exists():
            kept = json.loads(saved.read_text())
            if kept.get("sizes", sizes) != sizes:
                raise SystemExit(
                    f"engine bench: {workdir} holds {kept['sizes']}; pass those, or another --workdir"
                )
            env, project = kept["env"], Path(kept["project"])
        else:
            env, project = prepare(workdir / "data", args.events, args.memories)
            saved.write_text(json.dumps({"env": env, "project": str(project), "sizes": sizes}))
        if not args.editable:
            PYTHON[0] = str(user_install(workdir / "install"))
            env = {**env, "PATH": f"{Path(PYTHON[0]).parent}{os.pathsep}{env.get('PATH', '')}"}
        engine = start_engine(env, project)
        try:
            direct = interleaved(env, project, args.rounds)
            bridged = through_bridge(env, project, args.rounds)
            rss = rss_mb(engine.pid)
        finally:
            engine.send_signal(signal.SIGTERM)
            engine.wait(60)
    load_after = os.getloadavg()
    body = common.section_body(
        "Resident engine (issue #22)",
        (
            f"Fresh `korg-recall` processes, {args.events:,} history events (every one embedded), "
            f"{args.memories:,} memories (every one embedded), model `{Path(env['KORG_RECALL_MODEL_DIR']).name}`; "
            f"{args.rounds} rounds, the two arms alternating call by call; "
            f"{'this checkout (editable install)' if args.editable else 'korg-bridge installed from a wheel, as a user has it'}. "
            "**Engine RSS with the model "
            f"loaded: {rss:.0f} MB** (goal ≤ {TARGET_RSS_MB:.0f} MB: {common.verdict(rss <= TARGET_RSS_MB)}). "
            f"Load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after: the machine is "
            "shared with other engineers' work, so both arms carry it."
        ),
        table(direct, goals=True)
        + "\n\nThrough `korg-bridge korg-recall` (tools/call round trip; one bridge per arm, both serving, "
        "the arms alternating call by call):\n\n" + table(bridged, goals=False),
        where,
        common.rerun_command(__file__, argv or []),
    )
    print(body)
    if not args.no_write:
        print(f"written to {common.write_section(SECTION, body)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
