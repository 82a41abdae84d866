"""The console's reads of the memory store: filtered pages, search with breakdowns, a memory in
full (versions, links both ways, its operation-log entries), the approval queue.

Reads only: every write goes through :mod:`korg_bridge.recall.memory.operations` and friends
(:class:`~.services.Console`). The SQL here is built from constants; every value is a bound
parameter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from korg_bridge.errors import UsageError
from korg_bridge.recall.console.heads import Head, heads_of
from korg_bridge.recall.memory.records import MEMORY_TYPES, Version, source_kind
from korg_bridge.recall.memory.rows import head, lineage, links_of, pending_proposal, select_versions
from korg_bridge.recall.memory.safety import age_label

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx

__all__ = [
    "SOURCES",
    "STATES",
    "Filters",
    "checked_scope",
    "detail",
    "due",
    "next_cursor",
    "page",
    "parse_cursor",
    "pending",
    "pending_count",
    "rows_by_id",
    "scopes",
    "search",
    "summary",
]

STATES = ("live", "pending", "superseded", "retired", "untrusted", "all")
SOURCES = ("agent", "user", "claude", "import")
PAGE_MAX = 200
EXCERPT_CHARS = 240
OPLOG_MAX = 200
"""Operation-log entries shown with one memory (the newest)."""
WIKI_LINK = re.compile(r"\[\[(m[a-z2-7]{10})\]\]")
"""``[[m3x7k2p9qaz]]`` in a memory's text links to that memory."""

_STATE_WHERE = {
    "live": "superseded_by IS NULL AND state = 'live'",
    "pending": "superseded_by IS NULL AND state = 'pending'",
    "retired": "superseded_by IS NULL AND state = 'retired'",
    "superseded": "superseded_by IS NOT NULL AND state NOT IN ('pending', 'purged')",
    "untrusted": "superseded_by IS NULL AND state IN ('live', 'pending') AND trust = 'untrusted'",
    "all": "superseded_by IS NULL AND state <> 'purged'",
}
_SOURCE_WHERE = {
    "user": "actor IN ('user', 'mirror')",
    "claude": "actor = 'claude'",
    "import": "actor = 'import'",
    "agent": "actor NOT IN ('user', 'mirror', 'claude', 'import')",
}
"""Who wrote a memory, by the version's actor: a person (at a terminal, in the console, or by
editing the mirror), Claude Code's folders, an import, or anything else -- an agent."""


def _source_of(actor: str) -> str:
    if actor in ("user", "mirror"):
        return "user"
    return actor if actor in ("claude", "import") else "agent"


def parse_cursor(cursor: str | None) -> int:
    """The offset a ``next_cursor`` stands for.

    Raises:
        UsageError: not a cursor a page returned.
    """
    text = (cursor or "").strip()
    if not text:
        return 0
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise UsageError(f"bad cursor {cursor!r}: pass the next_cursor of the previous page.")
    return int(text)


def next_cursor(offset: int, shown: int, total: int) -> str | None:
    return str(offset + shown) if offset + shown < total else None


def checked_scope(scope: str, project: str) -> str:
    """Raises:
    UsageError: not a scope."""
    from korg_bridge.recall.memory.scopes import parse_scope

    return parse_scope(scope, project)


@dataclass(frozen=True, slots=True)
class Filters:
    scope: str | None
    type: str | None
    state: str
    tag: str | None
    pinned: bool | None
    source: str | None

    @classmethod
    def checked(
        cls,
        *,
        scope: str | None,
        type: str | None,
        state: str | None,
        tag: str | None,
        pinned: bool | None,
        source: str | None,
        project: str,
    ) -> Filters:
        """Raises:
        UsageError: a value outside its list, a bad scope."""
        state = state or "live"
        for name, value, allowed in (
            ("state", state, STATES),
            ("type", type, MEMORY_TYPES),
            ("source", source, SOURCES),
        ):
            if value and value not in allowed:
                raise UsageError(f"bad {name} {value!r}: use one of {', '.join(allowed)}.")
        return cls(
            scope=checked_scope(scope, project) if scope else None,
            type=type or None,
            state=state,
            tag=(tag or "").strip() or None,
            pinned=pinned,
            source=source or None,
        )

    def matches(self, head: Head) -> bool:
        """:meth:`where` for a row of the kept copy (:mod:`.heads`)."""
        state = self.state
        if state == "superseded":
            if not head.superseded or head.state == "pending":
                return False
        elif head.superseded:
            return False
        elif state == "untrusted":
            if head.state not in ("live", "pending") or head.trust != "untrusted":
                return False
        elif state != "all" and head.state != state:
            return False
        if (self.scope and head.scope != self.scope) or (self.type and head.type != self.type):
            return False
        if self.pinned is not None and head.pinned != self.pinned:
            return False
        if self.source and _source_of(head.actor) != self.source:
            return False
        return not self.tag or (self.tag in head.tags and self.tag in json.loads(head.tags))

    def where(self, conn: Tx) -> tuple[str, list[object]]:
        clauses = [_STATE_WHERE[self.state]]
        params: list[object] = []
        if self.scope:
            clauses.append("scope = ?")
            params.append(self.scope)
        if self.type:
            clauses.append("type = ?")
            params.append(self.type)
        if self.tag:
            clauses.append(conn.tag_condition())
            params.append(self.tag)
        if self.pinned is not None:
            clauses.append("pinned = ?")
            params.append(int(self.pinned))
        if self.source:
            clauses.append(_SOURCE_WHERE[self.source])
        return " AND ".join(clauses), params


def summary(version: Version, now: float) -> dict[str, Any]:
    """What a list shows of one version (no full body: a page of 50 stays small)."""
    body = version.body
    return {
        "id": version.id,
        "version": version.version,
        "scope": version.scope,
        "type": version.type,
        "title": version.title,
        "excerpt": body if len(body) <= EXCERPT_CHARS else body[: EXCERPT_CHARS - 1] + "…",
        "tags": list(version.tags),
        "pinned": version.pinned,
        "state": version.state,
        "trust": version.trust,
        "actor": version.actor,
        "source_kind": source_kind(version.source),
        "recorded_at": version.recorded_at,
        "age": age_label(version.recorded_at, now),
        "conflict": version.conflict,
        "superseded_by": version.superseded_by,
    }


def page(store: Store, filters: Filters, offset: int, limit: int, now: float) -> dict[str, Any]:
    limit = max(1, min(limit, PAGE_MAX))
    with store.reading() as conn:
        heads = heads_of(store, conn)
        if heads is not None:
            chosen = [h for h in heads if filters.matches(h)]  # kept in the list's order
            total = len(chosen)
            rowids = [h.rowid for h in chosen[offset : offset + limit]]
            waiting = sum(1 for h in heads if h.state == "pending" and not h.superseded)
        else:
            where, params = filters.where(conn)
            total = int(conn.execute(f"SELECT count(*) FROM memory WHERE {where}", params).fetchone()[0])
            # Order the keys alone, then read the page's rows: sorting whole rows would carry every
            # body of the store through the sorter.
            rowids = [
                int(row[0])
                for row in conn.execute(
                    f"SELECT rowid FROM memory WHERE {where} ORDER BY pinned DESC, recorded_at DESC, rowid DESC "
                    "LIMIT ? OFFSET ?",
                    [*params, limit, offset],
                )
            ]
            waiting = pending_count_in(conn)
        found = rows_by_id(conn, rowids)
    return {
        "memories": [summary(v, now) for v in found],
        "total": total,
        "next_cursor": next_cursor(offset, len(found), total),
        "pending": waiting,
    }


def due(store: Store, now: float, days: int, limit: int, offset: int) -> tuple[list[Version], int]:
    """:func:`~korg_bridge.recall.memory.review.due_for_review` over every scope, from the kept copy
    when there is one."""
    from korg_bridge.recall.memory.records import iso
    from korg_bridge.recall.memory.review import due_for_review, reviewed_epoch

    cutoff = now - days * 86_400
    with store.reading() as conn:
        heads = heads_of(store, conn)
        if heads is not None:
            old = iso(cutoff)
            found = sorted(
                (h for h in heads if not h.superseded and h.state == "live" and h.recorded_at < old),
                key=lambda h: (h.recorded_at, h.id),
            )
            flagged = [h.rowid for h in found if h.reviewed]
            recent: set[int] = set()
            for start in range(0, len(flagged), 500):
                chunk = flagged[start : start + 500]
                for rowid, provenance in conn.execute(
                    f"SELECT rowid, provenance FROM memory WHERE rowid IN ({', '.join('?' * len(chunk))})",
                    chunk,
                ):
                    if (reviewed_epoch(provenance) or 0.0) >= cutoff:
                        recent.add(int(rowid))
            wanted = [h.rowid for h in found if h.rowid not in recent]
            return rows_by_id(conn, wanted[offset : offset + limit]), len(wanted)
    return due_for_review(store, scopes=None, now=now, days=days, limit=limit, offset=offset)


def rows_by_id(conn: Tx, rowids: Sequence[int]) -> list[Version]:
    """The versions of ``rowids``, in that order."""
    if not rowids:
        return []
    found = {v.rowid: v for v in select_versions(conn, f"rowid IN ({', '.join('?' * len(rowids))})", rowids)}
    return [found[r] for r in rowids if r in found]


def pending_count_in(conn: Tx) -> int:
    row = conn.execute(
        "SELECT count(*) FROM memory WHERE superseded_by IS NULL AND state = 'pending'"
    ).fetchone()
    return int(row[0])


def pending_count(store: Store) -> int:
    with store.reading() as conn:
        heads = heads_of(store, conn)
        if heads is not None:
            return sum(1 for h in heads if h.state == "pending" and not h.superseded)
        return pending_count_in(conn)


def pending(store: Store, offset: int, limit: int, now: float) -> dict[str, Any]:
    limit = max(1, min(limit, PAGE_MAX))
    with store.reading() as conn:
        heads = heads_of(store, conn)
        if heads is not None:
            waiting = sorted(
                (h for h in heads if h.state == "pending" and not h.superseded),
                key=lambda h: (h.recorded_at, h.id),
            )
            total = len(waiting)
            found = rows_by_id(conn, [h.rowid for h in waiting[offset : offset + limit]])
        else:
            total = pending_count_in(conn)
            found = select_versions(
                conn,
                "superseded_by IS NULL AND state = 'pending' ORDER BY recorded_at, id LIMIT ? OFFSET ?",
                (limit, offset),
            )
        out: list[dict[str, Any]] = []
        for proposal in found:
            current = head(conn, proposal.id)
            before = current if current is not None and current.version != proposal.version else None
            out.append(
                {
                    **summary(proposal, now),
                    "body": proposal.body,
                    "before": None
                    if before is None
                    else {
                        "version": before.version,
                        "title": before.title,
                        "body": before.body,
                        "state": before.state,
                    },
                }
            )
    return {"memories": out, "total": total, "next_cursor": next_cursor(offset, len(found), total)}


def scopes(store: Store) -> list[dict[str, Any]]:
    with store.reading() as conn:
        heads = heads_of(store, conn)
        if heads is not None:
            counts: dict[str, int] = {}
            for h in heads:
                if not h.superseded:
                    counts[h.scope] = counts.get(h.scope, 0) + 1
            return [{"scope": scope, "memories": count} for scope, count in sorted(counts.items())]
        rows = conn.execute(
            "SELECT scope, count(*) FROM memory WHERE superseded_by IS NULL AND state <> 'purged' "
            "GROUP BY scope ORDER BY scope"
        ).fetchall()
    return [{"scope": str(scope), "memories": int(count)} for scope, count in rows]


def _version_entry(version: Version, now: float) -> dict[str, Any]:
    data = version.to_dict()
    data["age"] = age_label(version.recorded_at, now)
    data["source_kind"] = source_kind(version.source)
    data["ref"] = _ref_of(version.source)
    return data


def _ref_of(source: Mapping[str, Any] | None) -> str | None:
    """The history event a memory came from (``e123``), when its source names one."""
    ref = source.get("ref") if isinstance(source, Mapping) else None
    return ref if isinstance(ref, str) and re.fullmatch(r"e\d{1,18}", ref) else None


def detail(store: Store, env: Mapping[str, str], memory_id: str, now: float) -> dict[str, Any]:
    """Raises:
    UsageError: "no memory …" for an unknown or purged id."""
    from korg_bridge.recall.memory.review import last_reviewed

    with store.reading() as conn:
        versions = lineage(conn, memory_id)
        current = head(conn, memory_id)
        if current is None or current.state == "purged":
            raise UsageError(f"no memory {memory_id}. List ids with `korg-recall memories`.")
        proposal = pending_proposal(conn, memory_id)
        similar = links_of(conn, [memory_id])
        # Through the full-text index (the id is a word of a text that links to it), then exactly.
        cond, cond_params = conn.text.condition([memory_id], every=True)
        linking = [
            int(row[0])
            for row in conn.execute(
                f"SELECT m.rowid FROM memory m WHERE {cond} AND m.superseded_by IS NULL AND m.state <> 'purged' "
                "AND m.id <> ? ORDER BY m.id",
                [*cond_params, memory_id],
            )
        ]
        incoming = [v for v in rows_by_id(conn, linking) if f"[[{memory_id}]]" in v.body]
        mentioned = sorted(set(WIKI_LINK.findall(current.body)) - {memory_id})
        targets = {m: head(conn, m) for m in mentioned}
        entries = _oplog_entries(store, conn, env, memory_id)
    outgoing: list[dict[str, Any]] = [
        {"id": m, "kind": "wiki", "title": t.title if t is not None and t.state != "purged" else None}
        for m, t in targets.items()
    ]
    outgoing += [{"id": b, "kind": kind, "title": None} for a, b, kind in similar if a == memory_id]
    inbound: list[dict[str, Any]] = [{"id": v.id, "kind": "wiki", "title": v.title} for v in incoming]
    inbound += [{"id": a, "kind": kind, "title": None} for a, b, kind in similar if b == memory_id]
    shown = [v for v in versions if v.state != "purged"]
    in_conflict = sorted(
        v.version for v in versions if v.conflict and v.superseded_by is None and v.state == "live"
    )
    return {
        "current": {
            **_version_entry(current, now),
            "reviewed_at": last_reviewed(current),
            "conflict_versions": in_conflict if len(in_conflict) > 1 else [],
        },
        "versions": [_version_entry(v, now) for v in shown],
        "pending": None
        if proposal is None or proposal.version == current.version
        else _version_entry(proposal, now),
        "links": {"outgoing": outgoing, "incoming": inbound},
        "oplog": entries,
        "reviewed_at": last_reviewed(current),
    }


def _oplog_entries(store: Store, conn: Tx, env: Mapping[str, str], memory_id: str) -> list[dict[str, Any]]:
    """The operation-log entries naming ``memory_id`` (a team store's table, a SQLite store's file)."""
    if store.kind == "postgresql":
        rows = conn.execute(
            "SELECT seq_id, entry FROM memory_ops WHERE entry LIKE ? ORDER BY seq_id DESC LIMIT ?",
            (f"%{memory_id}%", OPLOG_MAX),
        ).fetchall()
        lines = [(int(seq), str(entry)) for seq, entry in reversed(rows)]
    else:
        from korg_bridge.recall.console.oplogview import entries_of

        lines = entries_of(env, memory_id, OPLOG_MAX)
    out: list[dict[str, Any]] = []
    for seq, text in lines:
        try:
            entry = json.loads(text)
        except ValueError:
            continue
        args = entry.get("args") if isinstance(entry, dict) else None
        if not isinstance(args, dict) or args.get("id") != memory_id:
            continue
        out.append(
            {
                "seq": seq,
                "op": str(entry.get("tool_name", "")).removeprefix("memory."),
                "actor": entry.get("source_agent"),
                "status": (entry.get("result") or {}).get("status"),
                "version": args.get("version"),
                "state": args.get("state"),
                "timestamp": entry.get("timestamp"),
            }
        )
    return out


class SearchOptions(TypedDict, total=False):
    """What narrows a console memory search besides its words."""

    mode: str
    """auto (hybrid when a model is on disk), keyword, hybrid or semantic."""
    scopes: Sequence[str] | None
    """None: every scope the store holds."""
    type: str | None
    tag: str | None
    top_n: int


def search(
    store: Store, env: Mapping[str, str], query: str, *, now: float, **options: Unpack[SearchOptions]
) -> dict[str, Any]:
    """Raises:
    UsageError: a bad mode or type; DependencyMissing: a semantic mode without a model."""
    from korg_bridge.recall.memory.search import search_memories

    mode, scopes_ = options.get("mode", "auto"), options.get("scopes")
    type_, tag, top_n = options.get("type"), options.get("tag"), options.get("top_n", 20)

    if type_ and type_ not in MEMORY_TYPES:
        raise UsageError(f"bad type {type_!r}: use one of {', '.join(MEMORY_TYPES)}.")
    if mode not in ("auto", "keyword", "hybrid", "semantic"):
        raise UsageError(f"bad mode {mode!r}: use auto, keyword, hybrid or semantic.")
    top_n = max(1, min(top_n, 100))
    meaning, used = _meaning(env, query, mode)
    with store.reading() as conn:
        wanted = list(scopes_) if scopes_ is not None else [row["scope"] for row in _scopes_in(conn)]
        hits = search_memories(
            conn,
            query,
            scopes=wanted,
            types=[type_] if type_ else (),
            tags=[tag] if tag else (),
            top_n=top_n,
            now=now,
            meaning=meaning,
        )
    return {
        "mode": used,
        "query": query,
        "hits": [{**hit.to_dict(now), "how": hit.how, "tags": list(hit.version.tags)} for hit in hits],
    }


def _scopes_in(conn: Tx) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT DISTINCT scope FROM memory WHERE superseded_by IS NULL").fetchall()
    return [{"scope": str(row[0])} for row in rows]


def _meaning(env: Mapping[str, str], query: str, mode: str) -> tuple[Any, str]:
    """How to rank (None: by keywords) and the mode used; ``auto`` takes hybrid when a model is on
    disk, keyword otherwise.

    Raises:
        DependencyMissing: ``hybrid``/``semantic`` asked for without a model.
    """
    from korg_bridge.recall.semantic.modes import SEMANTIC_MODES, resolve_mode

    used = "keyword" if mode == "keyword" else resolve_mode(mode, env)
    if used not in SEMANTIC_MODES:
        return None, "keyword"
    from korg_bridge.recall.memory.scoring import semantic_floor
    from korg_bridge.recall.memory.search import Meaning
    from korg_bridge.recall.semantic.modes import shared_embedder

    embedder = shared_embedder(env)
    vector = embedder.embed([query])[0]
    return Meaning(used, vector, embedder.model_id, embedder.dim, min_score=semantic_floor(None)), used
