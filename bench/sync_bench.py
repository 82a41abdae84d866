"""Sync at size: 10,000 memories and 50,000 operations, a new machine's first sync and a no-op one.

    python bench/sync_bench.py             # folder and git remotes; records docs/benchmarks.md
    python bench/sync_bench.py --no-write  # print only

1. **Load**: machine A's store gets 10,000 user memories of three versions each, written in
   process (a process per write would take an hour): 30,000 version rows, which its first sync
   sends as 30,000 puts and 20,000 metas (the superseded marks) -- 50,000 operations.
2. **A's first sync** turns them into records and pushes them (timed, no target).
3. **B joins** (``sync init --join``) and runs its **first sync**: pull, verify 50,000 records,
   decrypt and apply them in one transaction (target: at most 30 s).
4. **No-op syncs** on B, then on A (target: at most 1 s each); the median of 5.
5. Both stores' canonical exports must be equal.

Everything runs in this process against real SQLite files, a real folder or a real bare git
repository (``git`` as a subprocess); the environment of each machine is its own HOME.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as common

sys.path.insert(0, str(common.REPO_ROOT))

from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.rows import insert_versions
from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.sync import steps
from korg_bridge.recall.sync.canonical import canonical_export

MEMORIES = 10_000
VERSIONS = 3
FIRST_SYNC_TARGET_S = 30.0
NOOP_TARGET_S = 1.0


def _env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "share"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "KORG_RECALL_ACTOR": "bench",
        "PATH": os.environ.get("PATH", ""),
    }


def _load(store_path: Path) -> None:
    import hashlib

    base = time.time() - 86_400
    rows: list[Version] = []
    for n in range(MEMORIES):
        memory_id = "m" + "".join("abcdefghij"[int(d)] for d in f"{n:010d}")
        for number in range(1, VERSIONS + 1):
            body = f"fact {n} of the benchmark, version {number}: service {n % 97} listens on port {8000 + n % 1000}"
            at = iso(base + n + number)
            rows.append(
                Version(
                    id=memory_id,
                    version=number,
                    scope="user",
                    type="note",
                    title=body[:60],
                    body=body,
                    content_hash=hashlib.sha256(body.encode()).hexdigest(),
                    actor="bench",
                    recorded_at=at,
                    superseded_by=number + 1 if number < VERSIONS else None,
                    superseded_at=iso(base + n + number + 1) if number < VERSIONS else None,
                    provenance=[{"actor": "bench", "at": at, "source": None}],
                )
            )
    with SqliteStore(store_path) as store, store.write(stage=True) as conn:
        insert_versions(conn, rows)


def _timed(env: dict[str, str]) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    result = steps.sync(env, Context.from_env(env))
    return time.perf_counter() - started, result


def run(kind: str, root: Path) -> list[list[str]]:
    a_env, b_env = _env(root / "a"), _env(root / "b")
    if kind == "git":
        remote = str(root / "remote.git")
        subprocess.run(["git", "init", "-q", "--bare", remote], check=True, timeout=60)
    else:
        remote = str(root / "folder")
        Path(remote).mkdir()
    store_a = root / "a" / "share" / "korg-recall" / "memory.sqlite"
    started = time.perf_counter()
    _load(store_a)
    load_s = time.perf_counter() - started
    key = str(steps.init(a_env, remote, None)["join_key"])
    a_first, sent = _timed(a_env)
    steps.init(b_env, remote, key)
    b_first, applied = _timed(b_env)
    b_noop = common.median([_timed(b_env)[0] for _ in range(5)])
    a_noop = common.median([_timed(a_env)[0] for _ in range(5)])
    with SqliteStore(store_a) as a, a.reading() as ta:
        exported_a = canonical_export(ta)
    store_b = root / "b" / "share" / "korg-recall" / "memory.sqlite"
    with SqliteStore(store_b) as b, b.reading() as tb:
        same = canonical_export(tb) == exported_a
    ops = f"{sent['sent']:,} sent / {applied['applied']:,} applied"
    return [
        [kind, "load A (in process, 30,000 rows)", f"{load_s:.1f} s", "-", "-"],
        [kind, f"A's first sync ({ops})", f"{a_first:.1f} s", "-", "-"],
        [
            kind,
            "B's first sync (new machine)",
            f"{b_first:.1f} s",
            f"<= {FIRST_SYNC_TARGET_S:g} s",
            common.verdict(b_first <= FIRST_SYNC_TARGET_S and same),
        ],
        [
            kind,
            "B's no-op sync (median of 5)",
            f"{b_noop:.2f} s",
            f"<= {NOOP_TARGET_S:g} s",
            common.verdict(b_noop <= NOOP_TARGET_S),
        ],
        [
            kind,
            "A's no-op sync (median of 5)",
            f"{a_noop:.2f} s",
            f"<= {NOOP_TARGET_S:g} s",
            common.verdict(a_noop <= NOOP_TARGET_S),
        ],
        [kind, "canonical exports of A and B equal", "yes" if same else "NO", "yes", common.verdict(same)],
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument(
        "--kinds", default="folder,git", help="remotes to measure: folder, git (default both)"
    )
    args = parser.parse_args()
    info = common.machine()
    rows: list[list[str]] = []
    for kind in args.kinds.split(","):
        with tempfile.TemporaryDirectory(prefix="korg-sync-bench-") as tmp:
            rows += run(kind, Path(tmp))
    table = common.markdown_table(["remote", "step", "time", "target", "verdict"], rows)
    body = common.section_body(
        "Sync between machines (`bench/sync_bench.py`)",
        "10,000 memories of three versions on machine A (50,000 operations: 30,000 puts, 20,000 "
        "supersession metas); B joins and syncs for the first time, then both sync with nothing new. "
        "In process, real SQLite files, a real folder or bare git repository.",
        table,
        info,
        common.rerun_command(__file__, [a for a in sys.argv[1:] if a != "--no-write"]),
        "The machine is shared (2 cores, several engineers' test runs): the load average above is "
        "part of every figure.",
    )
    print(body)
    if not args.no_write:
        common.write_section("sync", body)
    return 0 if all(row[4] != "FAIL" for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
