"""Version rows: written verbatim, read back as :class:`~.records.Version`, and the few in-place
changes a lineage allows (state, provenance, use, the superseded marks).

Every function takes a transaction the caller holds (a :class:`~.backend.Tx`, from
``store.write()`` or ``store.reading()``); nothing here commits. The SQL is the same
on both backends. A lineage's *head* is its row with
``superseded_by`` NULL and a state other than ``pending``; a ``pending`` row with
``superseded_by`` NULL is a proposal awaiting approval (see :mod:`.writes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from korg_bridge.recall.memory.records import COLUMNS, Version

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = [
    "add_link",
    "chunks",
    "head",
    "index_versions",
    "insert_version",
    "insert_versions",
    "lineage",
    "links_of",
    "mark_dirty",
    "match_where",
    "next_version",
    "pending_proposal",
    "select_versions",
    "supersede",
    "update_head",
]

_SELECT = "SELECT rowid, " + ", ".join(COLUMNS) + " FROM memory"
_INSERT_MANY = f"INSERT INTO memory ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_INSERT = f"{_INSERT_MANY} RETURNING rowid"
T = TypeVar("T")
CHUNK = 500
"""Values bound in one ``IN (…)``: below SQLite's oldest limit of 999 parameters."""


def insert_version(conn: Tx, version: Version) -> Version:
    """Store ``version`` verbatim (ids, versions, timestamps as given) and index its text.

    Returns it with ``rowid`` set. Lossless import writes through here too.
    """
    version.rowid = int(conn.execute(_INSERT, version.to_row()).fetchall()[0][0])
    mark_dirty(conn, version.id)
    if version.state != "purged":
        conn.text.index(conn, version.rowid, version.title, version.body, version.tags)
    return version


def insert_versions(
    conn: Tx,
    versions: Sequence[Version],
    *,
    index: bool = True,
    encoded: Sequence[tuple[object, ...]] | None = None,
) -> None:
    """Store many versions verbatim in one statement batch, as :func:`insert_version` stores one
    (an import writes thousands: one round trip each would hold the write lock for seconds), and
    set their ``rowid``. ``index`` False leaves their text unsearchable and their mirror files
    unqueued until :func:`index_versions`: an import checks them first, and may delete some.
    ``encoded``: their :meth:`~.records.Version.to_row`, made before the transaction began."""
    if not versions:
        return
    before = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM memory").fetchone()[0])
    conn.executemany(_INSERT_MANY, encoded if encoded is not None else [v.to_row() for v in versions])
    wanted = {(version.id, version.version): version for version in versions}
    # Rows of other writers may be among them on the team store (an import stages its rows before
    # it takes its turn): only those of ``versions`` are matched.
    for rowid, memory_id, number in conn.execute(
        "SELECT rowid, id, version FROM memory WHERE rowid > ?", (before,)
    ):
        version = wanted.get((memory_id, number))
        if version is not None:
            version.rowid = int(rowid)
    if index:
        index_versions(conn, versions)


def index_versions(conn: Tx, versions: Sequence[Version]) -> None:
    """Make stored ``versions`` searchable and queue their mirror files (see :func:`insert_version`)."""
    conn.text.index_many(
        conn,
        [
            (version.rowid, version.title, version.body, version.tags)
            for version in versions
            if version.state != "purged" and version.rowid is not None
        ],
    )
    conn.mark_dirty_many(list(dict.fromkeys(version.id for version in versions)))


def chunks(values: Sequence[T]) -> list[Sequence[T]]:
    """``values`` in slices of at most :data:`CHUNK`, for ``IN (…)`` lists."""
    return [values[start : start + CHUNK] for start in range(0, len(values), CHUNK)]


def match_where(scope_count: int, type_count: int, *, heads_only: bool) -> str:
    """Which rows a search ranks: in ``scope_count`` scopes (and ``type_count`` types), neither
    purged nor pending, heads only unless older versions are asked for. A condition on ``m``;
    params: the scopes, then the types."""
    clauses = [f"m.scope IN ({', '.join('?' * scope_count)})", "m.state NOT IN ('purged', 'pending')"]
    if type_count:
        clauses.append(f"m.type IN ({', '.join('?' * type_count)})")
    if heads_only:
        clauses.append("m.superseded_by IS NULL")
    return " AND ".join(clauses)


def select_versions(conn: Tx, where: str, params: Sequence[object] = ()) -> list[Version]:
    """Versions matching a ``WHERE`` clause built by the caller from constants (values go in params)."""
    return [Version.from_row(row) for row in conn.execute(f"{_SELECT} WHERE {where}", tuple(params))]


def lineage(conn: Tx, memory_id: str) -> list[Version]:
    """Every version of ``memory_id``, oldest first ([] when unknown)."""
    return select_versions(conn, "id = ? ORDER BY version", (memory_id,))


def head(conn: Tx, memory_id: str) -> Version | None:
    """The current version of ``memory_id``: its newest non-pending head, else its pending proposal."""
    return heads(conn, [memory_id]).get(memory_id)


def heads(conn: Tx, memory_ids: Sequence[str]) -> dict[str, Version]:
    """:func:`head` of each of ``memory_ids`` (unknown ones left out), a query per :data:`CHUNK`
    of them: a search whose matches are older versions needs the heads of dozens of lineages."""
    found: dict[str, Version] = {}
    for part in chunks(list(dict.fromkeys(memory_ids))):
        marks = ", ".join("?" * len(part))
        for version in select_versions(conn, f"id IN ({marks}) AND superseded_by IS NULL", tuple(part)):
            held = found.get(version.id)
            if held is None or _current_first(version) < _current_first(held):
                found[version.id] = version
    return found


def _current_first(version: Version) -> tuple[bool, int]:
    """Sorts a lineage's heads as :func:`head` picks: not pending first, then the newest."""
    return (version.state == "pending", -version.version)


def required_proposal(conn: Tx, memory_id: str) -> Version:
    """The version of ``memory_id`` awaiting approval (what approve and reject act on).

    Raises:
        UsageError: nothing of ``memory_id`` is pending.
    """
    from korg_bridge.errors import UsageError

    proposal = pending_proposal(conn, memory_id)
    if proposal is None:
        raise UsageError(
            f"{memory_id} has nothing pending approval. List pending memories with `korg-recall memories --pending`."
        )
    return proposal


def pending_proposal(conn: Tx, memory_id: str) -> Version | None:
    """The version of ``memory_id`` awaiting approval, if any."""
    rows = select_versions(
        conn, "id = ? AND superseded_by IS NULL AND state = 'pending' LIMIT 1", (memory_id,)
    )
    return rows[0] if rows else None


def next_version(conn: Tx, memory_id: str) -> int:
    """The version number a new row of ``memory_id`` gets."""
    row = conn.execute("SELECT max(version) FROM memory WHERE id = ?", (memory_id,)).fetchone()
    return int(row[0] or 0) + 1


def supersede(conn: Tx, memory_id: str, by: int, at: str, *, pending_only: bool = False) -> None:
    """Mark the current rows of ``memory_id`` (heads and proposals, or proposals only) as replaced by ``by``."""
    extra = " AND state = 'pending'" if pending_only else ""
    conn.execute(
        "UPDATE memory SET superseded_by = ?, superseded_at = ? "
        f"WHERE id = ? AND superseded_by IS NULL AND version <> ?{extra}",
        (by, at, memory_id, by),
    )
    mark_dirty(conn, memory_id)


def update_head(conn: Tx, version: Version, **changes: object) -> None:
    """Change lineage-level columns of a stored row in place (state, retired_at, provenance, use)."""
    allowed = {
        "state",
        "retired_at",
        "provenance",
        "use_count",
        "last_used_at",
        "superseded_by",
        "superseded_at",
    }
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"update_head: not a lineage-level column: {', '.join(sorted(unknown))}")
    for name, value in changes.items():
        setattr(version, name, value)
    row = dict(zip(COLUMNS, version.to_row(), strict=True))
    assignments = ", ".join(f"{name} = ?" for name in changes)
    conn.execute(
        f"UPDATE memory SET {assignments} WHERE rowid = ?",
        (*(row[name] for name in changes), version.rowid),
    )
    if {"state", "superseded_by"} & set(changes):  # provenance and use do not show in the file
        mark_dirty(conn, version.id)


def add_link(conn: Tx, src: str, dst: str, kind: str, at: str) -> bool:
    """Link ``src`` to ``dst``; False when that link existed already."""
    cursor = conn.execute(
        "INSERT INTO memory_links (src, dst, kind, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (src, dst, kind, at),
    )
    return cursor.rowcount == 1


def links_of(conn: Tx, ids: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(src, dst, kind)`` of every link touching one of ``ids``."""
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    return [
        (str(a), str(b), str(c))
        for a, b, c in conn.execute(
            f"SELECT src, dst, kind FROM memory_links WHERE src IN ({marks}) OR dst IN ({marks})",
            (*ids, *ids),
        )
    ]


def mark_dirty(conn: Tx, memory_id: str) -> None:
    """Queue ``memory_id`` for its mirror file (in the caller's transaction; see mirror.reconcile)."""
    conn.mark_dirty(memory_id)
