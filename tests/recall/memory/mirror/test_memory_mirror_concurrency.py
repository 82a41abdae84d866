"""The mirror and the operation log under many writers at once: real processes revising one
memory together, and a soak of random operations -- remember, revise with and without
``expected_version``, hand edits of mirror files, retire, restore, purge, import -- after
which every acknowledged write is there exactly once, no head is older than a write
acknowledged after it, ``verify`` is intact, the mirror matches the store and purged text is
found nowhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.memory.mirror.frontmatter import rel_path, render
from korg_bridge.recall.memory.records import Version
from korg_bridge.recall.memory.rows import select_versions
from tests.helpers.cli import BOUND, answer, korg_recall, ok, run_recall
from tests.helpers.memory import rows, store_file
from tests.helpers.sqlite import connect

pytestmark = pytest.mark.sqlite_only(
    "the Markdown mirror and the file log beside a SQLite store (a team store's log is written inside "
    "each transaction: test_memory_oplog.py)"
)

WORKER = Path(__file__).with_name("_soak_worker.py")
WRITERS = 8
OPS = 200
SOAK_BOUND_S = 240.0
"""Seconds the soak's writers may take in all: it takes well under a minute on two busy cores;
far beyond that, something hangs."""


def note(capsys: pytest.CaptureFixture[str], text: str) -> str:
    """Remember ``text`` in scope ``user``; its id."""
    return str(answer(capsys, "remember", "--content", text, "--type", "note", "--scope", "user")["id"])


def revise_all_at_once(cwd: Path, memory_id: str, count: int) -> list[int]:
    """``count`` real ``korg-recall revise`` processes started together; the versions acknowledged."""
    procs = [
        subprocess.Popen(
            [*korg_recall(), "revise", "--id", memory_id, "--content", f"The counter stands at {n}."],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    acked: list[int] = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=BOUND * 2)
            assert proc.returncode == 0, err
            acked.append(int(json.loads(out)["version"]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    return acked


def test_concurrent_revisions_of_one_memory_never_revert_it_nor_freeze_its_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, store: Path
) -> None:
    for n in range(20):  # other files in the folder: a scan takes longer, the race window is wider
        note(capsys, f"Heron colony {n} counts {n * 7} nests.")
    for _round in range(2):
        memory_id = note(capsys, "The counter stands at zero.")
        acked = revise_all_at_once(tmp_path, memory_id, 24)
        ok(run_recall("memories", "--scope", "user", cwd=tmp_path))
        history = rows(
            store, "SELECT version, actor, state FROM memory WHERE id = ? ORDER BY version", [memory_id]
        )
        assert [actor for _, actor, _ in history] == [
            "agent"
        ] * 25  # no write of korg-recall's read as a person's
        assert sorted(acked) == list(range(2, 26))
        head = current(store, memory_id)
        assert head.version == 25
        found = list((store.parent / "memories" / "user").glob(f"*--{memory_id}.md"))
        assert [p.read_bytes() for p in found] == [render(head).encode("utf-8")]
        assert rows(store, "SELECT origin FROM mirror_files WHERE id = ?", [memory_id]) == [("ours",)]


def current(store: Path, memory_id: str) -> Version:
    conn = connect(store)
    try:
        found = select_versions(
            conn,  # type: ignore[arg-type]
            "id = ? AND superseded_by IS NULL AND state <> 'pending'",
            (memory_id,),
        )
    finally:
        conn.close()
    assert len(found) == 1, found
    return found[0]


# --- the soak ------------------------------------------------------------------------------------


def exported_store(tmp_path: Path) -> Path:
    """A JSONL export of another store: the import the writers run now and then."""
    other = {"XDG_DATA_HOME": str(tmp_path / "other-data")}
    for n in range(4):
        text = f"Imported fact {n}: kestrels hover {n + 2} metres up."
        ok(
            run_recall(
                "remember", "--content", text, "--type", "note", "--scope", "user", cwd=tmp_path, env=other
            )
        )
    target = tmp_path / "other.jsonl"
    proc = run_recall("export", "--output", str(target), cwd=tmp_path, env=other)
    assert proc.returncode == 0, proc.stderr
    return target


def start_writer(folder: Path, number: int, plan: dict[str, Any]) -> subprocess.Popen[bytes]:
    """One soak writer: a real process with its own seed and journal, its stderr kept for a failure."""
    path = folder / f"plan-{number}.json"
    journal = str(folder / f"journal-{number}.jsonl")
    path.write_text(json.dumps({**plan, "worker": number, "seed": 1000 + number, "journal": journal}))
    with (folder / f"writer-{number}.err").open("w") as err:
        return subprocess.Popen(
            [sys.executable, str(WORKER), str(path)],
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def refused(folder: Path, entries: list[dict[str, Any]]) -> str:
    """Why few writes were acknowledged: the journal's count per operation, and what the writers'
    calls said most often on stderr (a refusal is a call that failed, not a lost write)."""
    said = Counter(
        line.strip()[:200]
        for path in sorted(folder.glob("writer-*.err"))
        for line in path.read_text(errors="replace").splitlines()
        if line.strip()
    )
    done = Counter(entry["op"] for entry in entries)
    return f"acknowledged: {dict(done)}; the writers said most often: {said.most_common(8)}"


def journal(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(folder.glob("journal-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


@pytest.fixture
def in_memory_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The store in a folder on ``/dev/shm`` when there is one: the soak is about many writers
    deciding right, not about the disk, and a shared disk's fsyncs (several per write, taken in
    turn under the write lock) would make it wait minutes on I/O. ``KEEP_SOAK=1`` keeps the folder
    for a look after a failure (remove it by hand)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield store_file(Path(os.environ["HOME"]))
        return
    folder = Path(tempfile.mkdtemp(prefix="korg-soak-", dir=shm))
    try:
        monkeypatch.setenv("XDG_DATA_HOME", str(folder))
        yield folder / "korg-recall" / "memory.sqlite"
    finally:
        if not os.environ.get("KEEP_SOAK"):
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.soak
def test_a_soak_of_eight_writers_loses_nothing_reverts_nothing_and_leaves_no_purged_text(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, in_memory_store: Path
) -> None:
    store = in_memory_store
    shared = [note(capsys, f"Shared fact {n}: the {n}th gate opens at dawn.") for n in range(6)]
    export = exported_store(tmp_path)
    mirror = store.parent / "memories"
    plan = {"ops": OPS, "shared": shared, "export": str(export), "mirror": str(mirror)}
    writers = [start_writer(tmp_path, number, plan) for number in range(WRITERS)]
    deadline = time.monotonic() + SOAK_BOUND_S
    for number, proc in enumerate(writers):
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        assert proc.returncode == 0, (tmp_path / f"writer-{number}.err").read_text()[-2000:]
    entries = journal(tmp_path)
    written = sum(e["op"] in ("remember", "revise", "hand") for e in entries)
    assert written > WRITERS * OPS // 2, refused(tmp_path, entries)

    for _ in range(60):  # let the queued mirror work drain, 64 memories a call
        answer(capsys, "memories", "--scope", "user")
        if rows(store, "SELECT count(*) FROM mirror_dirty") == [(0,)]:
            break
    assert rows(store, "SELECT count(*) FROM mirror_dirty") == [(0,)]
    assert rows(store, "SELECT count(*) FROM oplog_pending") == [(0,)]

    purged = {e["id"] for e in entries if e["op"] == "purge"}
    tokens: dict[str, list[str]] = {}
    for e in entries:
        if "token" in e:
            tokens.setdefault(e["id"], []).append(e["token"])
    bodies = rows(store, "SELECT id, version, body, state, conflict, superseded_by FROM memory")
    holders: dict[str, set[str]] = {}
    for mid, _v, body, _s, _c, _sup in bodies:
        for word in body.split():
            if word.startswith("tok"):
                holders.setdefault(word, set()).add(mid)

    # Every acknowledged write is present exactly once.
    by_version = {(mid, v): body for mid, v, body, *_ in bodies}
    for e in entries:
        if e["op"] in ("remember", "revise") and e["id"] not in purged:
            assert e["token"] in by_version[(e["id"], e["version"])].split(), e
            assert holders[e["token"]] == {e["id"]}, e  # in one memory only: nothing taken in twice
    imported = [json.loads(line) for line in export.read_text().splitlines()[1:]]
    for record in imported:
        if record.get("record") == "version":
            found = rows(
                store,
                "SELECT count(*) FROM memory WHERE id = ? AND version = ?",
                [record["id"], record["version"]],
            )
            assert found == [(1,)], record

    # No head is older than a write acknowledged after it; no conflict is ever the head.
    acked: dict[str, int] = {}
    for e in entries:
        if "version" in e:
            acked[e["id"]] = max(acked.get(e["id"], 0), int(e["version"]))
    for memory_id, version in acked.items():
        if memory_id in purged:
            continue
        head = current(store, memory_id)
        newest = rows(
            store, "SELECT max(version) FROM memory WHERE id = ? AND state <> 'pending'", [memory_id]
        )
        assert head.version == newest[0][0] and head.version >= version, (memory_id, head.version, version)
        assert not head.conflict
    assert rows(
        store, "SELECT count(*) FROM memory WHERE conflict = 1 AND state NOT IN ('pending', 'purged')"
    ) == [(0,)]

    # verify is intact.
    report = ok(run_recall("verify", "--store", str(store), cwd=tmp_path))
    assert report["intact"] is True and report["events"] > WRITERS * OPS // 2

    # The mirror matches the store: one file per live head, its rendering, at the name its title gives.
    conn = connect(store)
    try:
        heads = select_versions(conn, "superseded_by IS NULL AND state = 'live'", ())  # type: ignore[arg-type]
    finally:
        conn.close()
    files = {p.relative_to(mirror).as_posix(): p.read_bytes() for p in mirror.rglob("*.md")}
    assert files == {rel_path(v): render(v).encode("utf-8") for v in heads}

    # Purged text is found nowhere korg-recall writes.
    assert purged, "the soak purged nothing"
    places = {path: path.read_bytes() for path in store.parent.rglob("*") if path.is_file()}
    places.update({path.parent / f"name of {path.name}": path.name.encode() for path in mirror.rglob("*")})
    for memory_id in purged:
        for token in tokens.get(memory_id, []):
            found = [str(path) for path, data in places.items() if token.encode() in data]
            assert not found, (memory_id, token, found)
