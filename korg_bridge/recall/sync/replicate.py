"""Operations in and out of the store: this machine's changes become records; others' are applied.

Both run inside one store transaction per sync (:mod:`.steps`), export first, so a change
made here is on its way out before anything from elsewhere touches the same memory, and a
killed sync leaves either all of it or none of it.

**Out** -- the store is compared with ``sync_versions`` (what sync last knew of each version
row), so every writer (remember, revise, forget, restore, approve, an import, Claude Code's
intake, a mirror edit) is covered without a hook in any of them:

=========  ===================================================================================
put        a version row sync has not seen (user and project scopes only): its columns, with
           its project scope in the form that travels (:mod:`.projects`)
meta       a known row whose lineage-level columns changed (state, retired_at, provenance, and
           what superseded it and when): a retire, an approval, a merge's provenance, a revise's
           mark on the version it replaced
purge      a memory purged here: no payload; every machine erases it and destroys its data key
=========  ===================================================================================

**In** -- records of every machine, in one order, ``(lamport, machine, seq)``:

* a put is new by its operation id (a repeat is skipped); its version number is kept unless
  another version holds it, and then the one made first in that order keeps it and the
  other moves to the next free number -- the same answer on every machine;
* a meta applies when it is newer, in that order, than the row's last change (last writer
  wins for lineage-level columns only; text is never overwritten: it is a new version);
* two versions of one memory that nothing supersedes are a **conflict**: both are kept and
  flagged ``conflict`` until a revise supersedes both (a revise supersedes every current
  version, so it names both as its parents);
* a purge erases the memory as ``forget --mode purge`` does.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.recall.memory import storable
from korg_bridge.recall.memory.records import COLUMNS, Version
from korg_bridge.recall.memory.rows import insert_version, mark_dirty, next_version, select_versions
from korg_bridge.recall.sync.keys import KEY_BYTES, Keys
from korg_bridge.recall.sync.projects import ProjectMap
from korg_bridge.recall.sync.wire import Mark, Record, make_record, open_payload

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Tx

__all__ = ["Applied", "apply_records", "export_changes", "order_text", "watch_changes"]

_LOCAL_ONLY = ("use_count", "last_used_at", "superseded_by", "superseded_at")
"""Columns a put leaves out: use is this machine's, supersession travels as meta."""
_SYNCED = "(m.scope = 'user' OR m.scope LIKE 'project:%')"
_DIGEST_EXPR = (
    "m.state || '|' || coalesce(m.retired_at, '') || '|' || length(m.provenance) || '|' "
    "|| coalesce(m.superseded_at, '') || '|' || coalesce(s2.uid, '')"
)
"""What sync last knew of a row's lineage-level columns, computed by SQLite so that a sync with
nothing new compares 30,000 rows without handing one to Python. Provenance counts by its length:
it only ever grows (an entry is appended), so a change changes its length."""
_CHANGED_SQL = (
    f"SELECT m.rowid, m.id, m.state, m.retired_at, m.provenance, m.superseded_at, s2.uid, s.uid, {_DIGEST_EXPR} "
    "FROM sync_versions s JOIN memory m ON m.rowid = s.rowid "
    "LEFT JOIN memory m2 ON m2.id = m.id AND m2.version = m.superseded_by "
    "LEFT JOIN sync_versions s2 ON s2.rowid = m2.rowid WHERE m.rowid IN (SELECT rowid FROM sync_dirty) "
    f"AND m.state <> 'purged' AND s.digest <> {_DIGEST_EXPR}"
)


def order_text(lamport: int, machine: str, seq: int) -> str:
    """An operation's place in the one order, as text that sorts like the tuple."""
    return f"{lamport:016d}:{machine}:{seq:012d}"


def _digest(state: Any, retired_at: Any, provenance_text: str, superseded_at: Any, by_uid: Any) -> str:
    """:data:`_DIGEST_EXPR` in Python, for a row written here."""
    return f"{state}|{retired_at or ''}|{len(provenance_text)}|{superseded_at or ''}|{by_uid or ''}"


def _lamport(conn: Tx) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'sync_lamport'").fetchone()
    return int(row[0]) if row else 0


def _set_lamport(conn: Tx, value: int) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('sync_lamport', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(value),),
    )


@dataclass
class _Writer:
    """Appends this machine's records to ``sync_out``."""

    conn: Tx
    machine: str
    keys: Keys
    auth_key: bytes
    seq: int = 0
    prev: str = ""
    lamport: int = 0
    written: int = 0
    new_keys: bool = False

    def emit(self, kind: str, memory_id: str, payload: dict[str, Any] | None) -> tuple[str, str]:
        """Append one record; its place in the order and its operation id."""
        self.lamport += 1
        self.seq += 1
        dek = None
        if payload is not None:
            dek = self.keys.deks.get(memory_id)
            if dek is None:
                dek = self.keys.deks[memory_id] = secrets.token_bytes(KEY_BYTES)
                self.new_keys = True
        line, digest = make_record(
            auth_key=self.auth_key,
            machine=self.machine,
            seq=self.seq,
            lamport=self.lamport,
            kind=kind,
            memory_id=memory_id,
            uid=(uid := secrets.token_hex(12)),
            prev=self.prev,
            payload=payload,
            dek=dek,
        )
        self.conn.execute("INSERT INTO sync_out (seq, hash, line) VALUES (?, ?, ?)", (self.seq, digest, line))
        self.prev = digest
        self.written += 1
        return order_text(self.lamport, self.machine, self.seq), uid


_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS sync_dirty_insert AFTER INSERT ON memory "
    "BEGIN INSERT OR IGNORE INTO sync_dirty (rowid) VALUES (new.rowid); END",
    "CREATE TRIGGER IF NOT EXISTS sync_dirty_update AFTER UPDATE OF state, retired_at, provenance, superseded_by, "
    "superseded_at ON memory BEGIN INSERT OR IGNORE INTO sync_dirty (rowid) VALUES (new.rowid); END",
)


def watch_changes(conn: Tx) -> None:
    """Make the store note every row written or changed from now on (``sync_dirty``), and -- the
    first time -- every row it holds already: the triggers catch every writer, in this process or
    another, without a hook in any of them."""
    found = conn.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ('sync_dirty_insert', 'sync_dirty_update')"
    ).fetchone()[0]
    if int(found) == len(_TRIGGERS):
        return
    for statement in _TRIGGERS:
        conn.execute(statement)
    conn.execute("INSERT OR IGNORE INTO sync_dirty (rowid) SELECT rowid FROM memory")


def export_changes(conn: Tx, *, machine: str, keys: Keys, pmap: ProjectMap, genesis: str) -> _Writer:
    """Turn this machine's changes since the last sync into records in ``sync_out``."""
    last = conn.execute("SELECT seq, hash FROM sync_out ORDER BY seq DESC LIMIT 1").fetchone()
    out = _Writer(conn, machine, keys, keys.auth_key, seq=int(last[0]) if last else 0)
    out.prev = str(last[1]) if last else genesis
    out.lamport = _lamport(conn)
    fresh = select_versions(
        conn,
        "rowid IN (SELECT rowid FROM sync_dirty) AND rowid NOT IN (SELECT rowid FROM sync_versions) "
        f"AND {_SYNCED.replace('m.', '')} ORDER BY rowid",
    )
    for version in fresh:
        assert version.rowid is not None
        if version.state == "purged":  # erased before it ever left: nothing of it goes out
            order, uid = "", secrets.token_hex(12)
        else:
            row = {name: value for name, value in version.to_dict().items() if name not in _LOCAL_ONLY}
            order, uid = out.emit(
                "w", version.id, {"t": "put", "v": row, "scope": pmap.to_wire(version.scope)}
            )
        conn.execute(
            "INSERT INTO sync_versions (rowid, uid, id, digest, made, changed) VALUES (?, ?, ?, ?, ?, ?)",
            (
                version.rowid,
                uid,
                version.id,
                _digest(version.state, version.retired_at, storable.dumps(version.provenance), None, None),
                order,
                order,
            ),
        )
    for rowid, memory_id, state, retired_at, provenance, superseded_at, by_uid, uid, digest in conn.execute(
        _CHANGED_SQL
    ).fetchall():
        payload = {
            "t": "meta",
            "u": uid,
            "state": state,
            "retired_at": retired_at,
            "provenance": storable.loads(provenance) if provenance else [],
            "sb": by_uid,
            "sa": superseded_at,
        }
        order, _uid = out.emit("w", memory_id, payload)
        conn.execute(
            "UPDATE sync_versions SET digest = ?, changed = ? WHERE rowid = ?", (digest, order, rowid)
        )
    purged = [
        str(row[0])
        for row in conn.execute(
            "SELECT DISTINCT s.id FROM sync_versions s JOIN memory m ON m.rowid = s.rowid WHERE m.state = 'purged' "
            "AND m.rowid IN (SELECT rowid FROM sync_dirty) "
            "AND s.made <> '' AND s.id NOT IN (SELECT id FROM sync_purged) ORDER BY s.id"
        ).fetchall()
    ]
    for memory_id in purged:
        out.emit("purge", memory_id, None)
        conn.execute("INSERT INTO sync_purged (id) VALUES (?) ON CONFLICT DO NOTHING", (memory_id,))
    _set_lamport(conn, out.lamport)
    conn.execute("DELETE FROM sync_dirty")
    return out


@dataclass
class Applied:
    """What one pull changed here."""

    count: int = 0
    touched: set[str] = field(default_factory=set)
    purged: list[str] = field(default_factory=list)
    left_files: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)
    marks: dict[str, Mark] = field(default_factory=dict)


def apply_records(
    conn: Tx,
    records: Sequence[tuple[Record, str]],
    *,
    keys: Keys,
    pmap: ProjectMap,
    mirror_root: Path | None,
    now: str,
) -> Applied:
    """Apply other machines' verified records, in order (see the module docstring)."""
    done = Applied()
    doomed = {str(row[0]) for row in conn.execute("SELECT id FROM sync_purged").fetchall()}
    doomed |= {record.memory_id for record, _ in records if record.kind == "purge"}
    lamport = _lamport(conn)
    for record, _prev in sorted(records, key=lambda item: item[0].order):
        if record.machine in done.waiting:
            continue
        lamport = max(lamport, record.lamport)
        if record.kind == "purge":
            _apply_purge(conn, record.memory_id, keys, mirror_root, now, done)
        elif record.kind == "w" and record.memory_id not in doomed:
            dek = keys.deks.get(record.memory_id)
            payload = open_payload(record, dek) if dek is not None else None
            if payload is None:
                done.waiting[record.machine] = (
                    f"record {record.seq} needs a key that machine {record.machine} has not published under "
                    "the current epoch yet; it is applied once that machine syncs"
                )
                continue
            order = order_text(*record.order)
            if payload.get("t") == "put":
                _apply_put(conn, record, payload, order, pmap, done)
            elif payload.get("t") == "meta":
                _apply_meta(conn, payload, order, done)
        done.marks[record.machine] = record.mark
        done.count += 1
    _set_lamport(conn, lamport)
    for memory_id in sorted(done.touched - set(done.purged)):
        heads = conn.execute(
            "SELECT rowid FROM memory WHERE id = ? AND superseded_by IS NULL AND state NOT IN ('pending', 'purged')",
            (memory_id,),
        ).fetchall()
        if len(heads) > 1:
            conn.executemany("UPDATE memory SET conflict = 1 WHERE rowid = ?", [(row[0],) for row in heads])
            mark_dirty(conn, memory_id)
    if done.purged:
        conn.text.after_purge(conn)
    conn.execute("DELETE FROM sync_dirty")  # what was applied here is not a change to send back
    return done


def _apply_put(
    conn: Tx, record: Record, payload: dict[str, Any], order: str, pmap: ProjectMap, done: Applied
) -> None:
    if conn.execute("SELECT 1 FROM sync_versions WHERE uid = ?", (record.uid,)).fetchone() is not None:
        return
    fields = {name: value for name, value in dict(payload["v"]).items() if name in COLUMNS}
    fields["scope"] = pmap.from_wire(payload["scope"])
    version = Version.from_dict(fields)
    holder = conn.execute(
        "SELECT m.rowid, s.made FROM memory m LEFT JOIN sync_versions s ON s.rowid = m.rowid "
        "WHERE m.id = ? AND m.version = ?",
        (version.id, version.version),
    ).fetchone()
    if holder is not None:
        number = next_version(conn, version.id)
        if holder[1] is not None and order < str(holder[1]):
            # The version here was made after this one: it moves, this one keeps its number.
            old = version.version
            conn.execute("UPDATE memory SET version = ? WHERE rowid = ?", (number, holder[0]))
            conn.execute(
                "UPDATE memory SET superseded_by = ? WHERE id = ? AND superseded_by = ?",
                (number, version.id, old),
            )
        else:
            version.version = number
    insert_version(conn, version)
    assert version.rowid is not None
    digest = _digest(version.state, version.retired_at, storable.dumps(version.provenance), None, None)
    conn.execute(
        "INSERT INTO sync_versions (rowid, uid, id, digest, made, changed) VALUES (?, ?, ?, ?, ?, ?)",
        (version.rowid, record.uid, version.id, digest, order, order),
    )
    done.touched.add(version.id)


def _apply_meta(conn: Tx, payload: dict[str, Any], order: str, done: Applied) -> None:
    row = conn.execute(
        "SELECT s.rowid, s.changed, s.id FROM sync_versions s WHERE s.uid = ?", (str(payload.get("u")),)
    ).fetchone()
    if row is None or order <= str(row[1]):
        return  # a version this machine never had, or a change older than the one it holds
    by: int | None = None
    if payload.get("sb"):
        found = conn.execute(
            "SELECT m.version FROM sync_versions s JOIN memory m ON m.rowid = s.rowid WHERE s.uid = ?",
            (str(payload["sb"]),),
        ).fetchone()
        by = int(found[0]) if found else None
    state, retired_at = str(payload.get("state") or "live"), payload.get("retired_at")
    provenance = storable.dumps(payload.get("provenance") or [])
    superseded_at = payload.get("sa") if by is not None else None
    conn.execute(
        "UPDATE memory SET state = ?, retired_at = ?, provenance = ?, superseded_by = ?, superseded_at = ? "
        "WHERE rowid = ?",
        (state, retired_at, provenance, by, superseded_at, row[0]),
    )
    digest = _digest(
        state, retired_at, provenance, superseded_at, payload.get("sb") if by is not None else None
    )
    conn.execute("UPDATE sync_versions SET digest = ?, changed = ? WHERE rowid = ?", (digest, order, row[0]))
    mark_dirty(conn, str(row[2]))
    done.touched.add(str(row[2]))


def _apply_purge(conn: Tx, memory_id: str, keys: Keys, root: Path | None, now: str, done: Applied) -> None:
    from korg_bridge.recall.memory.forget import _purge

    keys.deks.pop(memory_id, None)
    if conn.execute("SELECT 1 FROM sync_purged WHERE id = ?", (memory_id,)).fetchone() is not None:
        return
    conn.execute("INSERT INTO sync_purged (id) VALUES (?)", (memory_id,))
    alive = conn.execute(
        "SELECT 1 FROM memory WHERE id = ? AND state <> 'purged' LIMIT 1", (memory_id,)
    ).fetchone()
    if alive is not None:
        edited, theirs = _purge(conn, memory_id, now, root)
        done.left_files.extend([*edited, *theirs])
    done.purged.append(memory_id)
