"""How fast ``korg-recall serve`` answers with a realistic store: 10,000 memories and 100,000
history events.

    python bench/console_bench.py             # ~3 min; records docs/benchmarks.md
    python bench/console_bench.py --no-write  # print only
    python bench/console_bench.py --check     # exit 1 when a target is missed

What is measured, against one ``korg-recall serve`` child process on a loopback port (the store
and index built first: the memory benchmark's 10k store, ``spread`` layout, and the recall
benchmark's 100k-event corpus, indexed with ``korg-recall index --no-embed``; no embedding model):

1. **Server time per route**: every GET route of the REST API and every page linked from the
   console's home page, :data:`SAMPLES` requests each after a warm-up, timed at the client over a
   kept-alive connection (so an upper bound of the server's time: it includes the loopback round
   trip, ~0.2 ms); and ``remember`` and ``revise`` as a person's writes. Target: p95 <= 100 ms.
2. **The memories page's weight**: its HTML and every asset it references (stylesheets, scripts,
   images, icons), bytes and requests. Targets: <= 150 KB, <= 10 requests.
3. **Live**: a memory written by an agent (``korg-recall remember`` as a child, stdin from
   /dev/null) reaching an open ``/api/v1/events`` stream: from the writer's exit to the event,
   :data:`LIVE_SAMPLES` times. Target: <= 1 s each.
4. **Idle RSS** of the server after the routes were served, after :data:`IDLE_S` of quiet.
   Target: <= 200 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlparse

import _common as common
import httpx
import memory_bench
import recall_bench

SAMPLES = 30
WRITE_SAMPLES = 15
LIVE_SAMPLES = 5
IDLE_S = 5.0
EVENTS = 100_000
P95_MS = 100.0
PAGE_KB = 150.0
PAGE_REQUESTS = 10
LIVE_S = 1.0
RSS_MB = 200.0
SECTION = "console"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.assets: list[str] = []
        self.pages: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "link" and values.get("href") and (values.get("rel") or "") != "alternate":
            self.assets.append(str(values["href"]))
        elif tag in ("script", "img", "source") and values.get("src"):
            self.assets.append(str(values["src"]))
        elif tag == "a" and values.get("href"):
            self.pages.append(str(values["href"]))


def build(workdir: Path) -> tuple[dict[str, str], Path, dict[str, float]]:
    project = workdir / "project"
    built = (workdir / "built.json").is_file()
    project.mkdir(parents=True, exist_ok=True)
    env = memory_bench._env(workdir, project)
    env.pop("KORG_RECALL_ACTOR", None)
    env.update(
        KORG_RECALL_LEDGER=str(workdir / "corpus"), KORG_RECALL_INDEX=str(workdir / "cache" / "index.sqlite")
    )
    env.pop("KORG_RECALL_MODEL_DIR", None)
    env["KORG_RECALL_BACKGROUND"] = "0"
    if built:
        return env, project, json.loads((workdir / "built.json").read_text())
    figures: dict[str, float] = {}
    store = workdir / "data" / "korg-recall" / "memory.sqlite"
    print(f"console: writing {memory_bench.MEMORIES} memories ...", file=sys.stderr)
    figures["build_s"] = memory_bench.build_store(store, "project:" + os.path.realpath(project), "spread")
    print(f"console: generating and indexing {EVENTS} history events ...", file=sys.stderr)
    recall_bench.generate_corpus(workdir / "corpus", EVENTS)
    started = time.perf_counter()
    child = recall_bench.spawn([*_recall(), "index", "--no-embed"], env, project, 900)
    if child.code != 0:
        raise RuntimeError(f"korg-recall index failed: {child.err.strip()}")
    figures["index_s"] = time.perf_counter() - started
    (workdir / "built.json").write_text(json.dumps(figures))
    return env, project, figures


def _recall() -> list[str]:
    import shutil

    found = shutil.which("korg-recall", path=os.path.dirname(sys.executable))
    return [found] if found else [sys.executable, "-m", "korg_bridge.recall.cli.app"]


def start_server(env: dict[str, str], project: Path) -> tuple[subprocess.Popen[str], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [*_recall(), "serve", "--http", f"127.0.0.1:{port}", "--rate-limit", "100000/s"],
        cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    line = proc.stderr.readline()
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain: a full pipe would block it
    if "console at" not in line:
        proc.kill()
        raise RuntimeError(f"korg-recall serve did not start: {line.strip()}")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url + "/healthz", timeout=5)
            return proc, url
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def stop_server(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


CPU_MS: dict[str, float] = {}
"""The server's CPU time per request, by path (its /proc counters around the timed requests)."""
LABEL_CPU: dict[str, float | None] = {}


def _timed(client: httpx.Client, method: str, path: str, samples: int, **kwargs: Any) -> list[float]:
    times: list[float] = []
    pid = int(client.headers.get("x-bench-pid", "0"))
    client.request(method, path, **kwargs)  # the warm-up
    before = common.proc_cpu_seconds(pid) if pid else None
    for _ in range(samples):
        started = time.perf_counter()
        response = client.request(method, path, **kwargs)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:200]}")
        times.append(elapsed)
    after = common.proc_cpu_seconds(pid) if pid else None
    if before is not None and after is not None and samples:
        CPU_MS[path] = (after - before) * 1000 / samples
    return times


def routes(client: httpx.Client, project: Path) -> dict[str, list[float]]:
    listed = client.get("/api/v1/memories").json()["memories"]
    memory_id = listed[0]["id"]
    session = client.get("/api/v1/history/sessions").json()["sessions"][0]["session"]
    ref = client.get(f"/api/v1/history/sessions/{session}").json()["events"][0]["ref"]
    gets = {
        "/api/v1/status": "/api/v1/status",
        "/api/v1/memories": "/api/v1/memories",
        "/api/v1/memories?state=superseded": "/api/v1/memories?state=superseded",
        "/api/v1/memories?source=agent&type=project": "/api/v1/memories?source=agent&type=project",
        "/api/v1/memories/search": "/api/v1/memories/search?q=deploy+staging+database",
        "/api/v1/memories/scopes": "/api/v1/memories/scopes",
        "/api/v1/memories/due": "/api/v1/memories/due",
        "/api/v1/memories/{id}": f"/api/v1/memories/{memory_id}",
        "/api/v1/approvals": "/api/v1/approvals",
        "/api/v1/history/projects": "/api/v1/history/projects",
        "/api/v1/history/sessions": "/api/v1/history/sessions",
        "/api/v1/history/sessions/{session}": f"/api/v1/history/sessions/{session}",
        "/api/v1/history/events/{ref}": f"/api/v1/history/events/{ref}",
        "/api/v1/history/events/{ref}/draft": f"/api/v1/history/events/{ref}/draft",
        "/api/v1/history/search": "/api/v1/history/search?q=retry+timeout&mode=keyword",
        "/api/v1/context": "/api/v1/context?project=" + str(project),
        "/api/v1/health": "/api/v1/health",
        "/api/openapi.json": "/api/openapi.json",
        "/metrics": "/metrics",
    }
    out = {}
    for label, path in gets.items():
        out[label] = _timed(client, "GET", path, SAMPLES)
        LABEL_CPU[label] = CPU_MS.get(path)
    home = client.get("/")
    links = _Links()
    links.feed(home.text)
    pages = [
        "/",
        *sorted({urlparse(h).path for h in links.pages if h.startswith("/") and not h.startswith("/api")}),
    ]
    for page in pages[:15]:
        if page not in out and client.get(page).status_code == 200:
            out[f"page {page}"] = _timed(client, "GET", page, SAMPLES)
            LABEL_CPU[f"page {page}"] = CPU_MS.get(page)
    csrf = client.get("/api/v1/csrf").json()["csrf_token"]
    headers = {"x-csrf-token": csrf}
    pid = int(client.headers.get("x-bench-pid", "0"))
    run_id = os.urandom(4).hex()
    before = common.proc_cpu_seconds(pid) if pid else None
    writes: list[float] = []
    for number in range(WRITE_SAMPLES + 1):
        body = {
            "content": f"Console bench fact {number} of run {run_id}: the cache lives in /var/cache/b{number}.",
            "type": "note",
        }
        started = time.perf_counter()
        answer = client.post("/api/v1/memories", json=body, headers=headers)
        writes.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 201:
            raise RuntimeError(f"remember: {answer.status_code} {answer.text[:200]}")
    out["POST /api/v1/memories (remember)"] = writes[1:]
    after = common.proc_cpu_seconds(pid) if pid else None
    if before is not None and after is not None:
        LABEL_CPU["POST /api/v1/memories (remember)"] = (after - before) * 1000 / len(writes)
    before = common.proc_cpu_seconds(pid) if pid else None
    revisions: list[float] = []
    version = client.get(f"/api/v1/memories/{memory_id}").json()["current"]["version"]
    for number in range(WRITE_SAMPLES):
        started = time.perf_counter()
        answer = client.post(
            f"/api/v1/memories/{memory_id}/revise",
            json={"content": f"Revised in the console, round {number}.", "expected_version": version},
            headers=headers,
        )
        revisions.append((time.perf_counter() - started) * 1000)
        version = answer.json()["version"]
    out["POST /api/v1/memories/{id}/revise"] = revisions
    after = common.proc_cpu_seconds(pid) if pid else None
    if before is not None and after is not None:
        LABEL_CPU["POST /api/v1/memories/{id}/revise"] = (after - before) * 1000 / len(revisions)
    return out


def page_weight(client: httpx.Client) -> tuple[str, int, int, list[str]]:
    """The memories page (``/memories``, else the home page): bytes and requests with its assets."""
    path = "/memories" if client.get("/memories").status_code == 200 else "/"
    page = client.get(path)
    links = _Links()
    links.feed(page.text)
    total = len(page.content)
    fetched = [path]
    for asset in dict.fromkeys(links.assets):
        target = urljoin(str(page.url), asset)
        if urlparse(target).netloc != urlparse(str(page.url)).netloc:
            fetched.append(f"EXTERNAL {asset}")
            continue
        response = client.get(urlparse(target).path)
        total += len(response.content)
        fetched.append(urlparse(target).path)
    return path, total, len(fetched), fetched


def live(url: str, env: dict[str, str], project: Path) -> list[float]:
    delays: list[float] = []
    run_id = os.urandom(4).hex()  # a text no earlier run stored: a repeat would be deduplicated, not written
    with httpx.Client(base_url=url, timeout=30) as client, client.stream("GET", "/api/v1/events") as stream:
        lines = stream.iter_lines()
        for number in range(LIVE_SAMPLES):
            content = f"Agent fact {number} of run {run_id} for the live bench: port {8000 + number}."
            child = recall_bench.spawn(
                [*_recall(), "remember", "--content", content, "--type", "note", "--json"], env, project, 120
            )
            done = time.perf_counter()
            if child.code != 0:
                raise RuntimeError(child.err)
            wanted = json.loads(child.out)["id"]
            for line in lines:
                if line.startswith("data: ") and wanted in line:
                    delays.append(time.perf_counter() - done)
                    break
    return delays


def rss_mb(pid: int) -> float:
    kib = common.proc_status_kib(pid, "VmRSS")
    return (kib or 0) / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--workdir", type=Path, help="build the store and index here, and reuse them when there"
    )
    args = parser.parse_args(argv)
    machine = common.machine()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        env, project, figures = build(workdir)
        proc, url = start_server(env, project)
        try:
            rss_start = rss_mb(proc.pid)
            with httpx.Client(base_url=url, timeout=60, headers={"x-bench-pid": str(proc.pid)}) as client:
                print("console: timing routes ...", file=sys.stderr)
                timings = routes(client, project)
                path, size, requests, fetched = page_weight(client)
            print("console: live updates ...", file=sys.stderr)
            delays = live(url, env, project)
            time.sleep(IDLE_S)
            rss_idle = rss_mb(proc.pid)
        finally:
            stop_server(proc)
    rows: list[list[str]] = []
    passed: list[bool] = []
    worst = ("", 0.0)
    for label, values in timings.items():
        p95 = common.percentile(values, 95)
        ok = p95 <= P95_MS
        passed.append(ok)
        worst = max(worst, (label, p95), key=lambda item: item[1])
        cpu = LABEL_CPU.get(label)
        rows.append(
            [
                f"`{label}`",
                f"{common.median(values):.1f} ms",
                f"{p95:.1f} ms",
                "-" if cpu is None else f"{cpu:.1f} ms",
                f"<= {P95_MS:.0f} ms",
                common.verdict(ok),
            ]
        )
    external = [f for f in fetched if f.startswith("EXTERNAL")]
    weight_ok = size / 1024 <= PAGE_KB and requests <= PAGE_REQUESTS and not external
    live_ok = bool(delays) and max(delays) <= LIVE_S
    rss_ok = rss_idle <= RSS_MB
    passed += [weight_ok, live_ok, rss_ok]
    rows += [
        [f"memories page `{path}`: bytes with its assets", f"{size / 1024:.1f} KB", "-", "-", f"<= {PAGE_KB:.0f} KB", common.verdict(size / 1024 <= PAGE_KB)],
        [f"memories page `{path}`: requests ({', '.join(fetched)})", str(requests), "-", "-", f"<= {PAGE_REQUESTS}", common.verdict(requests <= PAGE_REQUESTS and not external)],
        ["an agent's memory on an open stream (from the writer's exit)", f"{common.median(delays):.2f} s", f"max {max(delays):.2f} s", "-", f"<= {LIVE_S:.0f} s", common.verdict(live_ok)],
        ["server RSS: at start / idle after serving", f"{rss_start:.0f} MB", f"{rss_idle:.0f} MB", "-", f"<= {RSS_MB:.0f} MB", common.verdict(rss_ok)],
    ]  # fmt: skip
    table = common.markdown_table(
        ["measure", "median", "p95", "server CPU / request", "target", "verdict"], rows
    )
    intro = (
        f"`korg-recall serve` as a child process on a loopback port, with the memory benchmark's 10,000 memories "
        f"(spread layout: 3,000 in the calling project and user) and {EVENTS:,} history events (the recall "
        f"benchmark's corpus; store built in {figures['build_s']:.0f} s, index in {figures['index_s']:.0f} s), no "
        f"embedding model. Each route: {SAMPLES} requests after a warm-up over one kept-alive connection, timed at "
        "the client (an upper bound of server time); writes as a person makes them in the console. The memories "
        "page is weighed with every asset it references. Live: an agent's `korg-recall remember` (a child process) "
        f"reaching an open `/api/v1/events` stream, {LIVE_SAMPLES} times, timed from the writer's exit. RSS from "
        f"/proc after the routes were served and {IDLE_S:.0f} s of quiet. Server CPU per request: the server "
        "process's CPU time (/proc) over a route's timed requests, divided by their number -- what the code "
        "costs, apart from waiting for a core on this shared machine (see the load below). Writes fsync the "
        "store, the mirror file and the operation log."
    )
    costly = max(
        ((label, cpu) for label, cpu in LABEL_CPU.items() if cpu is not None), key=lambda item: item[1]
    )
    missed = [label for label, values in timings.items() if common.percentile(values, 95) > P95_MS]
    notes = (
        f"Slowest route at p95: `{worst[0]}` ({worst[1]:.1f} ms). The most server CPU per request: `{costly[0]}` "
        f"({costly[1]:.1f} ms). Routes over the p95 target: {', '.join(f'`{m}`' for m in missed) or 'none'}; at "
        f"a load average of {machine.load or 0:.0f} on {machine.cores} cores most of their wall time is spent "
        "waiting for a core (compare the CPU column). The two searches are the CLI's own ranking (memory "
        "search and the history index's FTS5 queries, shared with `recall`); the writes are the CLI's "
        "operations with their fsyncs."
    )
    body = common.section_body(
        "Console (`bench/console_bench.py`)", intro, table, machine, common.rerun_command(__file__), notes
    )
    print(body)
    if not args.no_write:
        common.write_section(SECTION, body)
    return 1 if args.check and not all(passed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
