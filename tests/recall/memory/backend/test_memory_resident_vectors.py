"""Memory vectors a resident engine keeps (korg_bridge/recall/memory/backend/sqlite/resident.py):
a search by meaning and a write's duplicate check give the very scores a fresh process computes
-- the same floats, the same order -- after rows are added, purged or revised, when the file is
replaced by another whose rowids hold other texts, and for another store (a tenant's), which
never uses them."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from korg_bridge.recall.memory.backend.sqlite import resident
from korg_bridge.recall.memory.backend.sqlite.schema import SCOPE_INDEX
from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
from korg_bridge.recall.memory.backend.sqlite.vectors import listing_sql
from korg_bridge.recall.memory.records import Version, iso
from korg_bridge.recall.memory.rows import insert_version
from korg_bridge.recall.memory.search import match_where

pytestmark = pytest.mark.no_store

MODEL = "test-model"
DIM = 16
SCOPES = ("user", "project:/work/shop")
NOW = 1_790_000_000.0


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    resident._KEPT.clear()
    yield
    resident._KEPT.clear()


def _vector(rng: Any) -> Any:
    import numpy as np

    row = rng.standard_normal(DIM).astype(np.float32)
    return row / np.linalg.norm(row)


def _add(store: SqliteStore, rng: Any, count: int, *, tag: str, twins: int = 0) -> list[int]:
    """``count`` memories over the scopes, each with a vector (``twins`` of them share one)."""
    rowids = []
    shared = _vector(rng)
    with store.write() as tx:
        for n in range(count):
            version = insert_version(
                tx,
                Version(
                    id=f"m{tag}{n:06d}", version=1, scope=SCOPES[n % 2], type="project",
                    title=f"{tag} note {n}", body=f"{tag} note {n} about release trains",
                    content_hash=f"{tag}{n}", actor="agent", recorded_at=iso(NOW - n),
                ),
            )  # fmt: skip
            assert version.rowid is not None
            tx.vectors.put(tx, version.rowid, MODEL, DIM, shared if n < twins else _vector(rng))
            rowids.append(version.rowid)
    return rowids


def _answers(store: SqliteStore, query: Any) -> tuple[list[tuple[int, float]], dict[str, float]]:
    """What a search by meaning ranks, and a write's duplicate check for the first scope."""
    where = match_where(len(SCOPES), 0, heads_only=False)
    with store.reading() as tx:
        nearest = tx.vectors.nearest_rows(tx, where, SCOPES, MODEL, DIM, query, 10_000)
        cosines, _lacking = tx.vectors.cosines(tx, SCOPES[0], MODEL, DIM, query, 10)
    return nearest, cosines


def _fresh(store: SqliteStore, query: Any) -> tuple[list[tuple[int, float]], dict[str, float]]:
    kept = dict(resident._KEPT)
    resident._KEPT.clear()
    try:
        return _answers(store, query)
    finally:
        resident._KEPT.update(kept)


@pytest.fixture
def rng() -> Any:
    import numpy as np

    return np.random.default_rng(22)


def test_kept_vectors_give_the_bytes_a_fresh_process_computes_as_the_store_changes(
    tmp_path: Path, rng: Any
) -> None:
    store = SqliteStore(tmp_path / "memory.sqlite")
    _add(store, rng, 300, tag="a", twins=6)  # exact ties: their order is the rowids'
    query = _vector(rng)
    fresh = _fresh(store, query)
    assert resident.keep(store.path, MODEL, DIM) == 300
    assert _answers(store, query) == fresh and len(fresh[0]) == 300

    added = _add(store, rng, 40, tag="b")  # written since: read from the store
    with store.write() as tx:  # a purge: the vector goes, the row stays
        tx.vectors.drop(tx, [added[0], 5])
        tx.execute(
            "UPDATE memory SET state = 'purged', title = '', body = '' WHERE rowid IN (?, ?)", (added[0], 5)
        )
    assert _answers(store, query) == _fresh(store, query)
    assert resident.keep(store.path, MODEL, DIM) == 39  # the new rows but the purged one
    assert _answers(store, query) == _fresh(store, query)
    assert all(rowid not in (added[0], 5) for rowid, _ in _answers(store, query)[0])


def test_a_file_replaced_under_the_engine_never_lends_its_rowids_the_old_vectors(
    tmp_path: Path, rng: Any
) -> None:
    """A restored or copied-in store hands the same rowids to other texts: the kept vectors of the
    old file are not theirs, whatever the rowid."""
    store = SqliteStore(tmp_path / "memory.sqlite")
    _add(store, rng, 120, tag="a")
    resident.keep(store.path, MODEL, DIM)
    other = SqliteStore(tmp_path / "other.sqlite")
    _add(other, rng, 120, tag="z")
    del store, other
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_path / 'memory.sqlite'}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(tmp_path / "other.sqlite", tmp_path / "memory.sqlite")
    replaced = SqliteStore(tmp_path / "memory.sqlite")
    query = _vector(rng)
    assert _answers(replaced, query) == _fresh(replaced, query)
    kept = resident.kept(replaced.path, MODEL, DIM)
    assert kept is not None and len(kept.rowids)  # still held: only never used for these rows


def test_a_vector_rewritten_in_place_or_a_backup_restored_is_never_answered_from_the_kept_copy(
    tmp_path: Path, rng: Any
) -> None:
    """Whatever writes a vector row -- an older korg-recall, a person with sqlite3 -- the store gives
    it a new stamp; a restored backup that then grows again holds other vectors at the rowids the
    engine kept, and their stamps are not the kept ones."""
    import numpy as np

    store = SqliteStore(tmp_path / "memory.sqlite")
    rowids = _add(store, rng, 60, tag="a")
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every write in the file: a whole backup
    shutil.copyfile(tmp_path / "memory.sqlite", tmp_path / "backup.sqlite")
    _add(store, rng, 20, tag="b")
    resident.keep(store.path, MODEL, DIM)
    query = _vector(rng)
    with store.write() as tx:  # raw SQL, as another program would write it
        tx.execute(
            "UPDATE memory_vectors SET vector = ? WHERE row = ?",
            (np.asarray(query, dtype=np.float32).tobytes(), rowids[7]),
        )
    answers = _answers(store, query)
    assert answers == _fresh(store, query) and answers[0][0][0] == rowids[7]
    assert answers[0][0][1] == pytest.approx(1.0)
    store.conn.close()
    del store
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp_path / 'memory.sqlite'}{suffix}").unlink(missing_ok=True)
    with open(tmp_path / "backup.sqlite", "rb") as src, open(tmp_path / "memory.sqlite", "r+b") as dst:
        data = src.read()  # copied over the same inode, as `cp backup memory.sqlite` does
        dst.truncate(0)
        dst.write(data)
    restored = SqliteStore(tmp_path / "memory.sqlite")
    with restored.reading() as tx:
        assert tx.execute("SELECT count(*) FROM memory").fetchone()[0] == 60
    _add(restored, rng, 20, tag="c")  # the rowids the engine kept for "b", other vectors
    assert _answers(restored, query) == _fresh(restored, query)


def test_another_store_never_uses_what_was_kept_for_the_engines(tmp_path: Path, rng: Any) -> None:
    store = SqliteStore(tmp_path / "memory.sqlite")
    _add(store, rng, 50, tag="a")
    resident.keep(store.path, MODEL, DIM)
    tenant = SqliteStore(tmp_path / "tenants" / "acme" / "memory.sqlite")
    _add(tenant, rng, 50, tag="a")  # the same ids and rowids, other vectors
    assert resident.kept(tenant.path, MODEL, DIM) is None
    query = _vector(rng)
    assert _answers(tenant, query) == _fresh(tenant, query)
    assert _answers(tenant, query) != _answers(store, query)


def test_keeping_reads_the_store_without_creating_or_changing_anything(tmp_path: Path, rng: Any) -> None:
    missing = tmp_path / "none" / "memory.sqlite"
    with pytest.raises(sqlite3.Error):  # the engine tries again later
        resident.keep(missing, MODEL, DIM)
    assert not missing.parent.exists()
    store = SqliteStore(tmp_path / "memory.sqlite")
    _add(store, rng, 10, tag="a")
    del store
    before = (tmp_path / "memory.sqlite").read_bytes()
    assert resident.keep(tmp_path / "memory.sqlite", MODEL, DIM) == 10
    assert resident.keep(tmp_path / "memory.sqlite", MODEL, DIM) == 0  # nothing new: nothing read
    assert (tmp_path / "memory.sqlite").read_bytes() == before


@pytest.mark.parametrize("keep", [False, True])
def test_a_rows_cosine_is_the_same_whether_a_search_by_meaning_scored_it_or_it_is_read_alone(
    tmp_path: Path, rng: Any, keep: bool
) -> None:
    """Rows a hybrid search ranks by keywords take the cosines its side by meaning computed for
    every row it listed: the same floats as reading each vector alone, rows it did not list (no
    vector, another scope) read as before."""
    store = SqliteStore(tmp_path / "memory.sqlite")
    rowids = _add(store, rng, 60, tag="a")
    with store.write() as tx:
        tx.vectors.drop(tx, [rowids[3]])
        tx.execute("UPDATE memory SET scope = 'project:/elsewhere' WHERE rowid = ?", (rowids[4],))
    if keep:
        resident.keep(store.path, MODEL, DIM)
    query = _vector(rng)
    asked = [rowids[n] for n in (0, 3, 4, 7, 59, 30)] + [10_000]
    with store.reading() as tx:
        alone = tx.vectors.cosines_of(tx, asked, MODEL, DIM, query)
    with store.reading() as tx:
        where = match_where(len(SCOPES), 0, heads_only=False)
        closest = tx.vectors.nearest_rows(tx, where, SCOPES, MODEL, DIM, query, 5)
        after = tx.vectors.cosines_of(tx, asked, MODEL, DIM, query)
        again = tx.vectors.cosines_of(tx, [rowid for rowid, _ in closest], MODEL, DIM, query)
        other = tx.vectors.cosines_of(tx, asked, MODEL, DIM, _vector(rng))
    assert after == alone and sorted(alone) == sorted(set(asked) - {rowids[3], 10_000})
    assert again == dict(closest)
    assert other != after and sorted(other) == sorted(after)


def test_a_reads_coverage_and_search_by_meaning_come_from_one_listing_with_the_same_answers(
    tmp_path: Path, rng: Any
) -> None:
    """In a read a recall asks how much of its scopes is embedded, then ranks their rows by meaning:
    one listing answers both, with what each query alone answers (outside a read: a write)."""
    store = SqliteStore(tmp_path / "memory.sqlite")
    rowids = _add(store, rng, 80, tag="a", twins=4)
    with store.write() as tx:
        tx.vectors.drop(tx, rowids[:6])  # live heads without a vector
        for rowid, state in zip(rowids[6:14], ["retired", "pending", "purged", "live"] * 2, strict=True):
            tx.execute("UPDATE memory SET state = ? WHERE rowid = ?", (state, rowid))
        tx.execute("UPDATE memory SET superseded_by = ? WHERE rowid = ?", (rowids[20], rowids[21]))
        tx.execute("UPDATE memory SET scope = 'project:/elsewhere' WHERE rowid = ?", (rowids[22],))
    query = _vector(rng)
    where = match_where(len(SCOPES), 0, heads_only=False)

    def both(tx: Any) -> tuple[tuple[int, int], list[tuple[int, float]], tuple[int, int]]:
        return (
            tx.vectors.coverage(tx, SCOPES, MODEL, DIM),
            tx.vectors.nearest_rows(tx, where, SCOPES, MODEL, DIM, query, 50),
            tx.vectors.coverage(tx, SCOPES[:1], MODEL, DIM),
        )

    with store.write() as tx:
        alone = both(tx)
    with store.reading() as tx:
        assert both(tx) == alone
        assert len(tx.listed) == 2  # one listing for both scopes, one for the first
        plan = " ".join(
            row[3] for row in tx.execute(f"EXPLAIN QUERY PLAN {listing_sql(where)}", (MODEL, DIM, *SCOPES))
        )
        assert f"COVERING INDEX {SCOPE_INDEX} " in plan, plan  # the rows themselves are never read
    assert (
        alone[0] == (80 - 6 - 1 - 1, 80 - 6 - 1 - 1 - 6) and len(alone[1]) == 50
    )  # states, revised, moved; no vector
