"""The store interface: one way to reach memories, whichever database holds them.

``KORG_RECALL_STORE`` is a path (a SQLite file, the default: one person's store,
:mod:`.sqlite`) or a ``postgresql://`` URL (a team's store, tenants walled off by
row-level security: :mod:`.pg`). Everything above this module -- the write policy,
scopes, safety, rendering, the commands -- is written against the protocols
here (standard library only; :mod:`.factory` opens one) and never learns which one it talks to:

==============  ===================================================================
:class:`Store`  opening, transactions (:meth:`~Store.write`, :meth:`~Store.reading`),
                what follows a purge, the operation log's flush, the store's health
:class:`Tx`     one transaction: portable SQL (``?`` placeholders) plus one object
                per concern whose SQL differs: :class:`FullText` (keyword search
                and its ranking), :class:`VectorStore` (embeddings), and the
                operation log's :meth:`~Tx.log_op`
==============  ===================================================================

The SQL both backends share is written once, in the modules that use it
(``rows``, ``policy``, ``listing`` …): plain SQL both engines read alike
(``INSERT … ON CONFLICT DO NOTHING``, ``RETURNING``, no ``rowid`` magic: the column
is named ``rowid`` in both). Only what differs goes through a concern object,
whose SQL is built apart from running it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol


class Rows(Protocol):
    """What a statement returns: a DB-API cursor, as far as the memory code uses one."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class FullText(Protocol):
    """Keyword search over a memory's title, body and tags (SQLite FTS5, or a ``tsvector``).

    ``terms`` are query words as :func:`korg_bridge.recall.history.query.fts.query_terms` gives them; each
    reaches the engine as a bound parameter, quoted, so no query syntax survives in them.
    ``where`` is a condition on the memory row aliased ``m`` with ``?`` placeholders for
    ``params``, built by the caller from constants.
    """

    def ranked(
        self, tx: Tx, terms: Sequence[str], *, where: str, params: Sequence[object], limit: int
    ) -> list[tuple[int, float]]:
        """``(rowid, score)`` of rows matching any term, best first (higher is better)."""
        ...

    def condition(self, terms: Sequence[str], *, every: bool) -> tuple[str, list[object]]:
        """A condition on ``m`` true when the row matches every term (``every``) or any."""
        ...

    def holding(self, tx: Tx, rowids: Sequence[int], terms: Sequence[str]) -> set[int]:
        """Those of ``rowids`` that match every one of ``terms``."""
        ...

    def index(self, tx: Tx, rowid: int, title: str, body: str, tags: Sequence[str]) -> None:
        """Make a newly inserted row searchable (a no-op where the index follows the row)."""
        ...

    def index_many(self, tx: Tx, rows: Sequence[tuple[int, str, str, Sequence[str]]]) -> None:
        """:meth:`index` for many ``(rowid, title, body, tags)`` at once (an import's rows)."""
        ...

    def after_purge(self, tx: Tx) -> None:
        """Leave no token of purged text in the index (inside the purge's transaction)."""
        ...


class VectorStore(Protocol):
    """Embeddings of version rows, beside their model id and dimension (models never mix)."""

    def missing(
        self, tx: Tx, scope: str | None, model_id: str, dim: int, limit: int
    ) -> list[tuple[int, str, str]]:
        """``(rowid, title, body)`` of live or pending heads of ``scope`` (None: of every scope)
        without a vector, newest first."""
        ...

    def coverage(self, tx: Tx, scopes: Sequence[str] | None, model_id: str, dim: int) -> tuple[int, int]:
        """``(live heads, of them with a vector)`` in ``scopes`` (None: every scope)."""
        ...

    def nearest_rows(
        self, tx: Tx, where: str, params: Sequence[object], model_id: str, dim: int, vector: Any, limit: int
    ) -> list[tuple[int, float]]:
        """``(rowid, cosine)`` of the ``limit`` rows closest to ``vector`` among those with a vector
        that match ``where`` (a condition on ``m``, built by the caller from constants), closest first."""
        ...

    def cosines_of(
        self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int, vector: Any
    ) -> dict[int, float]:
        """The cosine of ``vector`` with each of ``rowids`` that has a vector."""
        ...

    def alike(self, tx: Tx, rowids: Sequence[int], model_id: str, dim: int) -> dict[tuple[int, int], float]:
        """The cosine of each two of ``rowids`` that both have a vector, keyed ``(lower, higher)``
        rowid: whether two hits state one fact (:mod:`.search`'s ties by meaning)."""
        ...

    def put(self, tx: Tx, rowid: int, model_id: str, dim: int, vector: Any) -> None:
        """Keep ``vector`` for version row ``rowid`` (replacing one it had)."""
        ...

    def drop(self, tx: Tx, rowids: Sequence[int]) -> None:
        """Delete the vectors of these rows (a purge)."""
        ...

    def cosines(
        self, tx: Tx, scope: str, model_id: str, dim: int, vector: Any, limit: int
    ) -> tuple[dict[str, float], bool | None]:
        """The cosine of ``vector`` with the closest live or pending heads of ``scope``, by memory id
        (at least the ``limit`` closest; a backend may give more), and whether one of those heads
        has no vector of the model (None: not known -- ask :meth:`missing`)."""
        ...


class Tx(Protocol):
    """One transaction on the store: portable SQL, and the concerns whose SQL differs."""

    @property
    def text(self) -> FullText: ...

    @property
    def vectors(self) -> VectorStore: ...

    @property
    def has_mirror(self) -> bool:
        """Whether this store has a Markdown mirror (a SQLite store's folder; never a team store)."""
        ...

    def execute(self, sql: str, params: Sequence[object] = ()) -> Rows: ...

    def executemany(self, sql: str, seq: Iterable[Sequence[object]]) -> None: ...

    def log_op(self, op_id: str, entry: Mapping[str, Any]) -> None:
        """Write one operation-log entry with this transaction (see :mod:`.oplog`)."""
        ...

    def mark_dirty(self, memory_id: str) -> None:
        """Queue ``memory_id``'s mirror file for rewriting (a no-op without a mirror)."""
        ...

    def mark_dirty_many(self, memory_ids: Sequence[str]) -> None:
        """:meth:`mark_dirty` for many memories at once (an import's)."""
        ...

    def secret(self, name: str) -> str:
        """A per-store (per-tenant) secret, hex: the key of forget's confirmation tokens."""
        ...

    def tag_condition(self) -> str:
        """A condition on table ``memory`` true when its ``tags`` JSON array holds the parameter."""
        ...

    def source_field(self, name: str) -> str:
        """An expression giving field ``name`` (a constant) of the ``source`` JSON column, as text."""
        ...

    def take_turn(self) -> None:
        """In a transaction opened with ``write(stage=True)``: wait for the store's other writers
        and hold them off until commit (see :meth:`Store.write`)."""
        ...


class Store(Protocol):
    """An open memory store."""

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql``."""
        ...

    @property
    def label(self) -> str:
        """How messages name the store: the file's path, or the URL without its password."""
        ...

    @property
    def folder(self) -> Path | None:
        """The SQLite store's folder (mirror, operation log, backups); None for a team store."""
        ...

    def write(self, *, stage: bool = False, durable: bool = True) -> contextlib.AbstractContextManager[Tx]:
        """One write transaction: all of it commits, or none of it; writers take turns.

        ``stage``: the caller writes rows no one else can see before it calls
        :meth:`Tx.take_turn` (an import's new memories), so where the database allows it (a team
        store) other writers are not held off meanwhile; a SQLite file has one writer at a time,
        so there the turn is taken at once.

        ``durable=False``: what it writes may be lost to a power cut, never torn (a recall's use
        counts): a SQLite file does not wait for the disk at its commit.
        """
        ...

    def reading(self) -> contextlib.AbstractContextManager[Tx]: ...

    def after_purge(self) -> dict[str, Any]:
        """Finish erasing purged text outside the transaction (checkpoint, vacuum); its checks."""
        ...

    def flush_log(self, env: Mapping[str, str]) -> str | None:
        """Append queued operation-log entries; None when done, else why they stay queued."""
        ...

    def describe(self) -> dict[str, Any]:
        """What ``stats`` says about the store itself (integrity, schema, log, backups)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc_info: object) -> None: ...
