"""What the bridge costs on top of running the binary yourself.

    python bench/bridge_overhead.py            # full run (~1 min), records docs/benchmarks.md
    python bench/bridge_overhead.py --quick    # smaller run, prints only

Four figures, each against the issue's target:

1. **Overhead per call**: a ``tools/call`` round trip through a real bridge
   process (SDK ``Client`` over stdio, as an MCP host would talk to it) minus a
   direct exec of the same argv with the same spawn method (``anyio`` with
   stdin from /dev/null, captured pipes and a new session, as the bridge does).
   The two are interleaved in random order after a warm-up, so drift in the
   machine's load hits both alike.
2. **Throughput**: 16 concurrent calls of a 200 ms sleeper through a bridge
   started with ``--max-concurrency 16``; wall time until all 16 answered.
3. **Peak RSS** of the bridge process (``VmHWM``) after those runs.
4. **Startup**: spawn, handshake and the first ``tools/list`` answer.

Two further costs, reported as figures (the issue sets them no target):

5. **Audit on vs off**: the same ``noop`` round trip through two bridges, one
   started with ``--audit FILE``, interleaved; the difference is one
   fsync'd, lock-serialized korg-ledger@v1 append per call. The ledger must
   then verify intact and hold one event per call.
6. **Progress forwarding**: ``bench-trivial.lines`` (2,000 lines at once) and
   ``extras.ticker`` (100 lines over about a second) called with and without a
   ``progress_callback``; the difference, and how many notifications arrived
   against the rate limit's bound (20/s x duration + 1).

Extra rows attribute the overhead: a cheap ``tools/list`` round trip (transport and
JSON-RPC only, no tool), the bridge's own process runner called in-process,
and CPU seconds per call in the bridge process and in this (client) process.
The client shares this process with the measuring loop, so its CPU is part of
the measured round trip but not of the bridge.

The fixture is ``fixture_bins/bench-trivial``, a POSIX shell script, so the
direct-exec baseline is about a millisecond and the difference is the bridge.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common as common
import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

sys.path.insert(0, str(common.REPO_ROOT))  # run from a checkout without installing
from korg_bridge.bridge.process import run_process
from korg_bridge.bridge.progress import MAX_RATE
from korg_bridge.ledger.chain import verify_file

SECTION = "bridge_overhead"
FIXTURE = common.REPO_ROOT / "fixture_bins" / "bench-trivial"
TICKER_FIXTURE = common.REPO_ROOT / "fixture_bins" / "extras"
MARKER_ENV = "KORG_BRIDGE_BENCH_ID"
"""A per-bridge random value in the bridge's environment: how we find its pid
in /proc, since the SDK client does not expose the process it spawned."""

TARGET_OVERHEAD_MS = 3.0
TARGET_THROUGHPUT_S = 0.6
TARGET_RSS_MIB = 120.0
CONCURRENT_CALLS = 16
SLEEP_MS = 200
BURST_LINES = 2000
"""Lines ``bench-trivial.lines`` prints at once: far more than one notification's worth."""
TICKER_LINES = 100
TICKER_INTERVAL_MS = 10
"""``extras.ticker`` prints ``TICKER_LINES`` lines this far apart: about a second of output."""

Action = Callable[[], Coroutine[Any, Any, None]]
"""One measured operation (a bridged call, a direct exec, ...)."""

PHASE_TIMEOUT = 90.0
"""Seconds any one phase may take before the benchmark gives up instead of hanging."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How many samples each phase takes."""

    calls: int
    warmup: int
    throughput_runs: int
    startups: int
    burst_calls: int
    """Calls per arm (with / without progress) of the instant 2,000-line stream."""
    ticker_calls: int
    """Calls per arm of the one-second ticker."""


FULL = Plan(calls=200, warmup=20, throughput_runs=5, startups=10, burst_calls=40, ticker_calls=8)
QUICK = Plan(calls=40, warmup=5, throughput_runs=2, startups=3, burst_calls=10, ticker_calls=2)


@dataclass(slots=True)
class Bridge:
    """A running bridge: the SDK client talking to it, its pid, its tool names."""

    client: Client
    pid: int
    tools: dict[str, str]
    """command_id → served tool name."""


def bridge_params(token: str, *extra: str, binaries: tuple[Path, ...] = (FIXTURE,)) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "korg_bridge", *map(str, binaries), *extra],
        env={MARKER_ENV: token},
        cwd=str(common.REPO_ROOT),
    )


def find_bridge_pid(token: str) -> int:
    """The bridge process carrying ``token`` (its fixture children inherit the
    marker too, so the argv must also say ``-m korg_bridge``).

    Raises:
        RuntimeError: not exactly one such process.
    """
    pids = [
        pid
        for pid in common.pids_with_env(MARKER_ENV, token)
        if (common.proc_cmdline(pid) or [])[1:3] == ["-m", "korg_bridge"]
    ]
    if len(pids) != 1:
        raise RuntimeError(f"expected one bridge process with {MARKER_ENV}={token}, found {pids}")
    return pids[0]


@asynccontextmanager
async def open_bridge(*extra: str, binaries: tuple[Path, ...] = (FIXTURE,)) -> AsyncIterator[Bridge]:
    token = uuid.uuid4().hex
    async with Client(bridge_params(token, *extra, binaries=binaries)) as client:
        listing = await client.list_tools()
        tools = {tool.title or tool.name: tool.name for tool in listing.tools}
        yield Bridge(client, find_bridge_pid(token), tools)


def result_text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


class ProgressCounter:
    """A ``progress_callback`` that counts the notifications of one call and keeps the last value."""

    def __init__(self) -> None:
        self.notifications = 0
        self.last: float | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.notifications += 1
        self.last = progress


async def call(
    bridge: Bridge,
    command_id: str,
    arguments: dict[str, Any],
    expect: str,
    progress: ProgressCounter | None = None,
) -> None:
    """One tools/call that must succeed with ``expect`` in its text; with ``progress``,
    the client asks for progress notifications and counts them.

    Raises:
        RuntimeError: the call failed or answered something else.
    """
    result = await bridge.client.call_tool(bridge.tools[command_id], arguments, progress_callback=progress)
    text = result_text(result)
    if result.is_error or expect not in text:
        raise RuntimeError(f"{command_id} through the bridge answered {text!r} (is_error={result.is_error})")


async def probe(bridge: Bridge) -> None:
    """The cheapest request that still reaches the bridge: ``tools/list`` past
    the client's cache (``ping`` is gone from the 2026-07-28 protocol the SDK
    negotiates). Its round trip is the transport and JSON-RPC share of a call."""
    await bridge.client.list_tools(cache_mode="bypass")


async def direct_exec(argv: list[str]) -> None:
    """The baseline: the spawn the bridge does, without the bridge.

    Raises:
        subprocess.CalledProcessError: the fixture failed.
    """
    await anyio.run_process(argv, stdin=subprocess.DEVNULL, start_new_session=True, check=True)


async def bridge_runner(argv: list[str]) -> None:
    """The bridge's own process runner, called in this process: its cost over
    :func:`direct_exec` is the part of the overhead that lives in process.py.

    Raises:
        RuntimeError: the fixture failed.
    """
    result = await run_process(argv, timeout=30.0)
    if result.returncode != 0:
        raise RuntimeError(f"{argv} exited {result.returncode}: {result.stderr!r}")


@dataclass(slots=True)
class Samples:
    """Latencies in seconds per arm, plus CPU accounting."""

    wall: dict[str, list[float]] = field(default_factory=dict)
    client_cpu: dict[str, float] = field(default_factory=dict)
    """Seconds of this process's CPU spent inside the arm's calls."""
    bridge_cpu: dict[str, float] = field(default_factory=dict)
    """Seconds of the bridge process's CPU over the phase that ran the arm."""

    def ms(self, arm: str, q: float) -> float:
        return common.percentile(self.wall[arm], q) * 1000


async def timed(samples: Samples, arm: str, action: Action) -> None:
    cpu0, t0 = time.process_time(), time.perf_counter()
    await action()
    t1, cpu1 = time.perf_counter(), time.process_time()
    samples.wall.setdefault(arm, []).append(t1 - t0)
    samples.client_cpu[arm] = samples.client_cpu.get(arm, 0.0) + (cpu1 - cpu0)


async def measure_overhead(plan: Plan, samples: Samples) -> int:
    """Phase 1: interleaved bridged calls, direct execs and in-process runs, then
    tools/list probes. Returns the bridge's VmHWM (KiB)."""
    argv = [str(FIXTURE), "noop"]
    async with open_bridge() as bridge:
        arms: dict[str, Action] = {
            "bridge": lambda: call(bridge, "bench-trivial.noop", {}, "ok"),
            "direct": lambda: direct_exec(argv),
            "runner": lambda: bridge_runner(argv),
        }
        for _ in range(plan.warmup):
            for action in arms.values():
                await action()
            await probe(bridge)
        cpu0 = common.proc_cpu_seconds(bridge.pid) or 0.0
        order = list(arms)
        for _ in range(plan.calls):
            random.shuffle(order)
            for arm in order:
                await timed(samples, arm, arms[arm])
        samples.bridge_cpu["bridge"] = (common.proc_cpu_seconds(bridge.pid) or 0.0) - cpu0

        cpu0 = common.proc_cpu_seconds(bridge.pid) or 0.0
        for _ in range(plan.calls):
            await timed(samples, "list", lambda: probe(bridge))
        samples.bridge_cpu["list"] = (common.proc_cpu_seconds(bridge.pid) or 0.0) - cpu0
        return common.proc_status_kib(bridge.pid, "VmHWM") or 0


async def concurrent(n: int, action: Action) -> float:
    """Wall seconds for ``n`` concurrent runs of ``action``."""
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(action)
    return time.perf_counter() - t0


async def measure_throughput(plan: Plan) -> tuple[list[float], list[float], int, int]:
    """Phase 2: returns (bridge wall times, direct wall times, VmHWM KiB, RSS after startup KiB)."""
    argv = [str(FIXTURE), "sleep", "--ms", str(SLEEP_MS)]
    bridged: list[float] = []
    direct: list[float] = []
    async with open_bridge("--max-concurrency", str(CONCURRENT_CALLS)) as bridge:
        idle_rss = common.proc_status_kib(bridge.pid, "VmRSS") or 0
        await call(bridge, "bench-trivial.sleep", {"ms": 1}, "slept")  # warm the call path
        for _ in range(plan.throughput_runs):
            bridged.append(
                await concurrent(
                    CONCURRENT_CALLS,
                    lambda: call(bridge, "bench-trivial.sleep", {"ms": SLEEP_MS}, "slept"),
                )
            )
            direct.append(await concurrent(CONCURRENT_CALLS, lambda: direct_exec(argv)))
        return bridged, direct, common.proc_status_kib(bridge.pid, "VmHWM") or 0, idle_rss


def filesystem_type(path: Path) -> str:
    """The filesystem holding ``path`` (``ext4``, ``tmpfs``, ...): an fsync on tmpfs
    is free, so the audit figure means little without it."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return "unknown filesystem"
    resolved = str(path.resolve())
    best, kind = "", "unknown filesystem"
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = resolved == mount or resolved.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best):
            best, kind = mount, fields[2]
    return kind


@dataclass(slots=True)
class AuditFigures:
    """The audit phase: what the audit ledger looked like after the calls that wrote it."""

    calls: int
    events: int
    intact: bool
    first_error: str | None
    filesystem: str


async def measure_audit(plan: Plan, samples: Samples, audit_dir: str | None) -> AuditFigures:
    """Phase 4 of the run: interleaved ``noop`` calls through a bridge without and one with ``--audit``.

    Both bridges run side by side, so the only difference between the arms is
    the append (redaction, hashing, file lock, write, fsync) each audited call
    waits for before it answers.
    """
    with tempfile.TemporaryDirectory(prefix="korg-bench-audit-", dir=audit_dir) as tmp:
        ledger = Path(tmp) / "audit.jsonl"
        async with open_bridge() as off, open_bridge("--audit", str(ledger)) as on:
            arms: dict[str, Action] = {
                "audit-off": lambda: call(off, "bench-trivial.noop", {}, "ok"),
                "audit-on": lambda: call(on, "bench-trivial.noop", {}, "ok"),
            }
            for _ in range(plan.warmup):
                for action in arms.values():
                    await action()
            cpu0 = {
                arm: common.proc_cpu_seconds(b.pid) or 0.0
                for arm, b in (("audit-off", off), ("audit-on", on))
            }
            order = list(arms)
            for _ in range(plan.calls):
                random.shuffle(order)
                for arm in order:
                    await timed(samples, arm, arms[arm])
            for arm, b in (("audit-off", off), ("audit-on", on)):
                samples.bridge_cpu[arm] = (common.proc_cpu_seconds(b.pid) or 0.0) - cpu0[arm]
        verdict = verify_file(ledger)
        return AuditFigures(
            calls=plan.warmup + plan.calls,
            events=verdict.events,
            intact=verdict.intact,
            first_error=verdict.errors[0] if verdict.errors else None,
            filesystem=filesystem_type(Path(tmp)),
        )


@dataclass(slots=True)
class ProgressFigures:
    """The progress phase, per workload: notifications per call with progress, and each call's bound."""

    notifications: list[int] = field(default_factory=list)
    bounds: list[int] = field(default_factory=list)
    """``MAX_RATE`` x the call's round trip + 1: the most the rate limit lets through."""
    complete: int = 0
    """Calls whose last notification counted every line."""


async def measure_progress(plan: Plan, samples: Samples) -> dict[str, ProgressFigures]:
    """Phase 5 of the run: chatty streams with and without a progress callback, interleaved.

    Keys of the result (and arms in ``samples``, with ``+progress`` appended):
    ``burst`` for ``bench-trivial.lines`` (instant output, fast /bin/sh start),
    ``ticker`` for ``extras.ticker`` (output spread over about a second).
    """
    workloads = {
        "burst": (
            "bench-trivial.lines",
            {"count": BURST_LINES},
            f"line {BURST_LINES}",
            BURST_LINES,
            plan.burst_calls,
        ),
        "ticker": (
            "extras.ticker",
            {"lines": TICKER_LINES, "interval_ms": TICKER_INTERVAL_MS},
            f"tick {TICKER_LINES}",
            TICKER_LINES,
            plan.ticker_calls,
        ),
    }
    figures = {name: ProgressFigures() for name in workloads}
    async with open_bridge(binaries=(FIXTURE, TICKER_FIXTURE)) as bridge:
        for name, (command_id, arguments, expect, lines, rounds) in workloads.items():
            fig = figures[name]

            async def plain(
                command_id: str = command_id, arguments: dict[str, Any] = arguments, expect: str = expect
            ) -> None:
                await call(bridge, command_id, arguments, expect)

            async def with_progress(
                command_id: str = command_id,
                arguments: dict[str, Any] = arguments,
                expect: str = expect,
                lines: int = lines,
                fig: ProgressFigures = fig,
                arm: str = f"{name}+progress",
            ) -> None:
                counter = ProgressCounter()
                t0 = time.perf_counter()
                await call(bridge, command_id, arguments, expect, counter)
                elapsed = time.perf_counter() - t0
                fig.notifications.append(counter.notifications)
                fig.bounds.append(math.floor(MAX_RATE * elapsed) + 1)
                fig.complete += int(counter.last == lines)

            await plain()  # warm this callable's path once; the ticker's python start is the slow part
            arms: dict[str, Action] = {name: plain, f"{name}+progress": with_progress}
            order = list(arms)
            for _ in range(rounds):
                random.shuffle(order)
                for arm in order:
                    await timed(samples, arm, arms[arm])
    return figures


async def measure_startup(plan: Plan) -> tuple[list[float], list[float]]:
    """Phase 4: spawn → handshake → first tools/list answer; and, for scale, how
    long ``python -m korg_bridge --version`` (interpreter plus imports) takes."""
    startup: list[float] = []
    imports: list[float] = []
    version_argv = [sys.executable, "-m", "korg_bridge", "--version"]
    for _ in range(plan.startups):
        t0 = time.perf_counter()
        async with Client(bridge_params(uuid.uuid4().hex)) as client:
            listing = await client.list_tools()
            startup.append(time.perf_counter() - t0)
        if not listing.tools:
            raise RuntimeError("the bridge listed no tools for bench-trivial")
        t0 = time.perf_counter()
        # The environment the SDK gives the bridge, so both start alike.
        await anyio.run_process(version_argv, cwd=common.REPO_ROOT, env=get_default_environment(), check=True)
        imports.append(time.perf_counter() - t0)
    return startup, imports


@dataclass(slots=True)
class Report:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    failed: int = 0
    overhead_ms: float = 0.0
    transport_ms: float = 0.0
    burst_progress_ms: float = 0.0
    """Paired cost of progress on the instant stream: the note explains it when it is large."""

    def add(self, metric: str, value: str, target: str = "-", passed: bool | None = None) -> None:
        self.rows.append((metric, value, target, common.verdict(passed)))
        if passed is False:
            self.failed += 1


def build_report(
    plan: Plan,
    samples: Samples,
    throughput: tuple[list[float], list[float], int, int],
    startup: tuple[list[float], list[float]],
    overhead_hwm_kib: int,
    audit: AuditFigures,
    progress: dict[str, ProgressFigures],
) -> Report:
    n = plan.calls
    overhead_median = samples.ms("bridge", 50) - samples.ms("direct", 50)
    report = Report(overhead_ms=overhead_median, transport_ms=samples.ms("list", 50))
    overhead_p95 = samples.ms("bridge", 95) - samples.ms("direct", 95)
    report.add(
        "tools/call round trip, median / p95",
        f"{samples.ms('bridge', 50):.2f} / {samples.ms('bridge', 95):.2f} ms",
    )
    report.add(
        "direct exec of the same argv, median / p95",
        f"{samples.ms('direct', 50):.2f} / {samples.ms('direct', 95):.2f} ms",
    )
    report.add(
        "**overhead per call, median**",
        f"{overhead_median:.2f} ms",
        f"≤ {TARGET_OVERHEAD_MS:g} ms",
        overhead_median <= TARGET_OVERHEAD_MS,
    )
    report.add("overhead per call, p95", f"{overhead_p95:.2f} ms")
    # Rounds interleave the arms, so each round's pair saw the same background load.
    paired = [b - d for b, d in zip(samples.wall["bridge"], samples.wall["direct"], strict=True)]
    report.add("overhead, median of per-round differences", f"{common.median(paired) * 1000:.2f} ms")
    bridged, direct, hwm_kib, idle_kib = throughput
    worst = max(bridged)
    report.add(
        f"**{CONCURRENT_CALLS} concurrent {SLEEP_MS} ms calls, wall (worst of {len(bridged)})**",
        f"{worst:.3f} s (median {common.median(bridged):.3f} s)",
        f"≤ {TARGET_THROUGHPUT_S:g} s",
        worst <= TARGET_THROUGHPUT_S,
    )
    report.add(
        f"{CONCURRENT_CALLS} concurrent direct execs, wall (median)",
        f"{common.median(direct):.3f} s",
    )
    peak_mib = max(hwm_kib, overhead_hwm_kib) / 1024
    report.add(
        "**bridge peak RSS (VmHWM)**", f"{peak_mib:.1f} MiB", f"≤ {TARGET_RSS_MIB:g} MB", peak_mib <= 120
    )
    report.add("bridge RSS after startup (VmRSS)", f"{idle_kib / 1024:.1f} MiB")
    starts, imports = startup
    report.add(
        f"startup to first tools/list, median of {len(starts)}",
        f"{common.median(starts) * 1000:.0f} ms (max {max(starts) * 1000:.0f} ms)",
    )
    report.add(
        "interpreter + imports alone (`python -m korg_bridge --version`), median",
        f"{common.median(imports) * 1000:.0f} ms",
    )
    # Attribution.
    report.add("tools/list round trip (transport only), median", f"{samples.ms('list', 50):.2f} ms")
    report.add(
        "bridge's process runner in-process, median",
        f"{samples.ms('runner', 50):.2f} ms ({samples.ms('runner', 50) - samples.ms('direct', 50):+.2f} ms vs direct)",
    )
    report.add("bridge CPU per tools/call", f"{samples.bridge_cpu['bridge'] / n * 1000:.2f} ms")
    report.add("bridge CPU per tools/list", f"{samples.bridge_cpu['list'] / n * 1000:.2f} ms")
    report.add("client (SDK) CPU per tools/call", f"{samples.client_cpu['bridge'] / n * 1000:.2f} ms")
    report.add("client (SDK) CPU per tools/list", f"{samples.client_cpu['list'] / n * 1000:.2f} ms")
    report.add(
        "CPU to spawn and reap one child (direct arm; the bridge pays it too)",
        f"{samples.client_cpu['direct'] / n * 1000:.2f} ms",
    )
    add_audit_rows(report, plan, samples, audit)
    add_progress_rows(report, plan, samples, progress)
    return report


def paired_ms(samples: Samples, base: str, other: str) -> float:
    """Median of per-round ``other - base`` differences, in ms (the arms were interleaved)."""
    return common.median([o - b for b, o in zip(samples.wall[base], samples.wall[other], strict=True)]) * 1000


def add_audit_rows(report: Report, plan: Plan, samples: Samples, audit: AuditFigures) -> None:
    n = plan.calls
    for arm, label in (("audit-off", "audit off"), ("audit-on", "audit on (`--audit FILE`)")):
        report.add(
            f"tools/call round trip, {label}, median / p95",
            f"{samples.ms(arm, 50):.2f} / {samples.ms(arm, 95):.2f} ms",
        )
    report.add(
        "audit cost per call (on - off), median / p95",
        f"{samples.ms('audit-on', 50) - samples.ms('audit-off', 50):+.2f} / "
        f"{samples.ms('audit-on', 95) - samples.ms('audit-off', 95):+.2f} ms",
    )
    report.add(
        "audit cost, median of per-round differences",
        f"{paired_ms(samples, 'audit-off', 'audit-on'):+.2f} ms",
    )
    report.add(
        "bridge CPU per tools/call, audit off / on",
        f"{samples.bridge_cpu['audit-off'] / n * 1000:.2f} / {samples.bridge_cpu['audit-on'] / n * 1000:.2f} ms",
    )
    state = "intact" if audit.intact else f"NOT intact ({audit.first_error})"
    count = "one per call" if audit.events == audit.calls else f"expected {audit.calls}"
    report.add(
        f"audit ledger after {audit.calls} calls (`verify_file`)",
        f"{state}; {audit.events} events, {count}; on {audit.filesystem}",
    )


def add_progress_rows(
    report: Report, plan: Plan, samples: Samples, progress: dict[str, ProgressFigures]
) -> None:
    labels = {
        "burst": f"`bench-trivial.lines` ({BURST_LINES:,} lines at once)",
        "ticker": f"`extras.ticker` ({TICKER_LINES} lines, {TICKER_INTERVAL_MS} ms apart)",
    }
    for name, label in labels.items():
        fig = progress[name]
        with_arm = f"{name}+progress"
        if name == "burst":
            report.burst_progress_ms = paired_ms(samples, name, with_arm)
        calls = len(fig.notifications)
        report.add(
            f"{label}: round trip without / with progress, median of {calls}",
            f"{samples.ms(name, 50):.2f} / {samples.ms(with_arm, 50):.2f} ms",
        )
        report.add(
            f"{label}: progress cost (with - without), median / paired",
            f"{samples.ms(with_arm, 50) - samples.ms(name, 50):+.2f} / {paired_ms(samples, name, with_arm):+.2f} ms",
        )
        within = sum(got <= bound for got, bound in zip(fig.notifications, fig.bounds, strict=True))
        report.add(
            f"{label}: notifications per call, median (range)",
            f"{common.median([float(x) for x in fig.notifications]):g} "
            f"({min(fig.notifications)}-{max(fig.notifications)})",
        )
        report.add(
            f"{label}: calls within {MAX_RATE:g}/s x round trip + 1 / final notification counts every line",
            f"{within}/{calls} (bound {min(fig.bounds)}-{max(fig.bounds)}) / {fig.complete}/{calls}",
        )


INTRO = f"""What the bridge adds on top of running the binary yourself, measured with
`bench/bridge_overhead.py` against `fixture_bins/bench-trivial` (a POSIX shell
script, so a direct exec costs about a millisecond). A "tools/call round trip"
goes through a real `python -m korg_bridge` process, spoken to by the MCP SDK's
`Client` over stdio; "direct exec" runs the same argv with the same spawn method
(anyio, stdin /dev/null, captured pipes, new session). Both are interleaved in
random order after a warm-up; overhead is the difference of their medians (p95s).
Throughput is the worst of several runs of {CONCURRENT_CALLS} concurrent
`bench-trivial.sleep --ms {SLEEP_MS}` calls through a bridge started with
`--max-concurrency {CONCURRENT_CALLS}`. Bold rows carry the issue's targets; the
rest attribute the time: the SDK client runs in the measuring process, so its
CPU is inside the round trip but is not the bridge's.

The audit rows run the same `noop` call through two bridges side by side, one
started with `--audit FILE` (a korg-ledger@v1 append per call: file lock,
write, fsync, before the call answers), interleaved; the ledger is then checked
with `korg_bridge.ledger.chain.verify_file`. The progress rows call a stream callable
with and without a `progress_callback` (interleaved): `bench-trivial.lines`
prints {BURST_LINES:,} lines at once, `extras.ticker` (a Python fixture) prints
{TICKER_LINES} lines {TICKER_INTERVAL_MS} ms apart; the bridge forwards stdout lines
as progress at most {MAX_RATE:g} times a second. These rows have no target."""


def render(report: Report, plan: Plan, where: common.Machine, args: list[str]) -> str:
    table = common.markdown_table(["metric", "value", "target", "verdict"], report.rows)
    notes = (
        f"Samples: {plan.calls} per arm after {plan.warmup} warm-up rounds. "
        f"Reading the attribution rows: of the {report.overhead_ms:.2f} ms median overhead, a bare "
        f"`tools/list` round trip (stdio, JSON-RPC, pydantic, on both sides) takes "
        f"{report.transport_ms:.2f} ms; the bridge's CPU per call includes the "
        "spawn-and-reap cost that the direct arm pays in the client instead. Tail "
        "latencies (p95) follow the machine's background load, shown above."
    )
    interval_ms = 1000 / MAX_RATE
    if report.burst_progress_ms > interval_ms / 2:
        notes += (
            f"\n\nReading the progress rows: the {report.burst_progress_ms:.0f} ms that progress adds to "
            f"the instant stream is waiting, not work. After each notification the forwarder sleeps out "
            f"the rate-limit interval ({interval_ms:.0f} ms) before it sends the next, and the call's "
            "result waits for the final notification (the full line count), so a call with progress "
            "answers up to one interval after its output ends: nearly the whole interval on the "
            "instant stream, whose output ends just after the first notification, and a part of it "
            "on the ticker, depending on where its last line falls in the interval."
        )
    return common.section_body(
        "Bridge overhead (`bench/bridge_overhead.py`)",
        INTRO,
        table,
        where,
        common.rerun_command(__file__, args),
        notes,
    )


def print_table(report: Report) -> None:
    width = max(len(r[0]) for r in report.rows)
    vwidth = max(len(r[1]) for r in report.rows)
    for metric, value, target, verdict in report.rows:
        tail = f"  {target:<10} {verdict}" if verdict != "-" else ""
        print(f"{metric.replace('**', ''):<{width}}  {value:<{vwidth}}{tail}")


async def run(plan: Plan, audit_dir: str | None) -> Report:
    samples = Samples()
    with anyio.fail_after(PHASE_TIMEOUT):
        print(f"[1/5] {plan.calls} interleaved bridge calls / direct execs ...", file=sys.stderr)
        hwm = await measure_overhead(plan, samples)
    with anyio.fail_after(PHASE_TIMEOUT):
        print(f"[2/5] {plan.throughput_runs} x {CONCURRENT_CALLS} concurrent sleeps ...", file=sys.stderr)
        throughput = await measure_throughput(plan)
    with anyio.fail_after(PHASE_TIMEOUT):
        print(f"[3/5] {plan.startups} startups ...", file=sys.stderr)
        startup = await measure_startup(plan)
    with anyio.fail_after(PHASE_TIMEOUT):
        print(f"[4/5] {plan.calls} interleaved calls, audit off / on ...", file=sys.stderr)
        audit = await measure_audit(plan, samples, audit_dir)
    with anyio.fail_after(PHASE_TIMEOUT):
        print(
            f"[5/5] {plan.burst_calls} + {plan.ticker_calls} stream calls per arm, progress off / on ...",
            file=sys.stderr,
        )
        progress = await measure_progress(plan, samples)
    return build_report(plan, samples, throughput, startup, hwm, audit, progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer samples; prints only unless --write")
    parser.add_argument("--write", action="store_true", help="with --quick: record the figures anyway")
    parser.add_argument("--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--audit-dir",
        metavar="DIR",
        help="where the audit phase writes its ledger (default: the temp folder; fsync cost depends on its disk)",
    )
    args = parser.parse_args(argv)
    for fixture in (FIXTURE, TICKER_FIXTURE):
        if not fixture.is_file():
            parser.error(f"fixture missing: {fixture}")
    if args.audit_dir is not None and not os.path.isdir(args.audit_dir):
        parser.error(f"--audit-dir {args.audit_dir} is not a folder")
    plan = QUICK if args.quick else FULL
    started = time.perf_counter()
    where = common.machine()  # before the runs, so its load average is the background's
    report = anyio.run(run, plan, args.audit_dir)
    print_table(report)
    print(f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    write = (args.write or not args.quick) and not args.no_write
    if write:
        shown = (["--quick"] if args.quick else []) + (
            ["--audit-dir", args.audit_dir] if args.audit_dir else []
        )
        path = common.write_section(SECTION, render(report, plan, where, shown))
        print(f"wrote the {SECTION} section of {path}", file=sys.stderr)
    return 1 if args.check and report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
