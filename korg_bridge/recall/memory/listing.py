"""``memories``: what is remembered, as index lines within a token budget, or in full by id.

Without ids: one line per memory (at most 150 characters: id, type, age,
title, and flags such as ``[pinned]`` ``[untrusted]`` ``[conflict]``), pinned
first, then newest first, until ``budget_tokens`` is spent; ``next_cursor``
continues. Memories older than two weeks show "as of DATE" instead of an age,
so the agent checks before relying on them. With ids: every version (bodies
included), the provenance and the links -- what a person needs to judge a
memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory.records import Version, check_id, iso, source_kind
from korg_bridge.recall.memory.rows import lineage, links_of
from korg_bridge.recall.memory.safety import age_label, escape_body

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store

__all__ = ["LINE_MAX", "IndexOptions", "index_lines", "line_of", "listing_sql", "parse_cursor", "read_full"]

LINE_MAX = 150
CHARS_PER_TOKEN = 4
"""A rough, conservative token estimate for English text and ids."""
IDS_MAX = 20


def line_of(version: Version | _Line, now: float, project: str) -> str:
    """One index line: ``m3x7k2p9qaz project 3d Tests need make db first [pinned]``."""
    flags = [
        flag
        for flag, on in (
            ("[pinned]", version.pinned),
            ("[untrusted]", version.trust == "untrusted"),
            ("[conflict]", version.conflict),
            (f"[{version.state}]", version.state != "live"),
            ("[expired]", version.expires_at is not None and version.expires_at <= iso(now)),
        )
        if on
    ]
    kind = source_kind(version.source)
    if kind:  # a copy of one of Claude Code's files (or an instructions file): say which kind
        flags.append(f"[{kind}]")
    where = "" if version.scope == project else f" ({'user' if version.scope == 'user' else version.scope})"
    head = f"{version.id} {version.type} {age_label(version.recorded_at, now)}{where} "
    tail = (" " + " ".join(flags)) if flags else ""
    room = LINE_MAX - len(head) - len(tail)
    title = version.title if len(version.title) <= room else version.title[: max(0, room - 1)] + "…"
    return (head + title + tail)[:LINE_MAX]


def parse_cursor(cursor: str | None) -> int:
    """The offset a ``next_cursor`` stands for.

    Raises:
        UsageError: not a cursor this module returned.
    """
    try:
        offset = int(cursor) if cursor else 0
    except ValueError:
        offset = -1
    if offset < 0:
        raise UsageError(f"bad cursor {cursor!r}: pass the next_cursor of a previous memories call.")
    return offset


_LINE_COLUMNS = "id, type, scope, title, recorded_at, pinned, trust, conflict, state, expires_at"
"""What an index line shows of a memory; then ``source.kind`` in the store's JSON syntax."""


@dataclass(frozen=True, slots=True)
class _Line:
    """The columns an index line shows (no body: a listing reads a few bytes per memory)."""

    id: str
    type: str
    scope: str
    title: str
    recorded_at: str
    pinned: bool
    trust: str
    conflict: bool
    state: str
    expires_at: str | None
    source_kind: str | None = None

    @property
    def source(self) -> dict[str, Any] | None:
        return {"kind": self.source_kind} if self.source_kind else None


CONFLICT_NOTE = (
    "conflict: two machines revised this memory from the same version; both versions are kept and shown. "
    "Revise it with the text that holds, naming every version in resolves, to resolve it on every machine."
)


def listing_sql(
    scope_count: int, *, states: int, kind: bool, tag: str | None, hide_expired: bool, conflicts: bool = False
) -> str:
    """``WHERE`` of an index listing: heads in the scopes and states, optionally of one type, with
    one tag (``tag``: the store's condition for it, :meth:`~.backend.Tx.tag_condition`), unexpired.
    Params: scopes, states, type, tag, now (those that apply), in that order."""
    clauses = [
        f"scope IN ({', '.join('?' * scope_count)})",
        "superseded_by IS NULL",
        f"state IN ({', '.join('?' * states)})",
    ]
    if kind:
        clauses.append("type = ?")
    if tag:
        clauses.append(tag)
    if hide_expired:
        clauses.append("(expires_at IS NULL OR expires_at > ?)")
    if conflicts:  # versions two machines wrote from one version (sync): both current until a revise
        clauses.append("conflict = 1")
    return " AND ".join(clauses)


class IndexOptions(TypedDict, total=False):
    """What one page of :func:`index_lines` holds, besides its scopes."""

    kind: str | None
    """Only memories of this type."""
    tag: str | None
    """Only memories with this tag."""
    include_retired: bool
    """Retired and expired memories too."""
    pending: bool
    """The proposals awaiting approval instead of the memories."""
    conflicts: bool
    """Only memories whose versions disagree after a sync (``memories --conflicts``)."""
    budget_tokens: int
    """About how many tokens the lines may take (default 800)."""
    cursor: str | None
    """Where the previous page stopped (its ``next_cursor``)."""


def index_lines(
    store: Store, *, scopes: Sequence[str], project: str, now: float, **options: Unpack[IndexOptions]
) -> dict[str, Any]:
    """The index of memories in ``scopes`` (``pending``: the proposals awaiting approval instead).

    Raises:
        UsageError: a cursor that is not one this returned.
    """
    kind, tag = options.get("kind"), options.get("tag")
    include_retired, pending = options.get("include_retired", False), options.get("pending", False)
    conflicts = options.get("conflicts", False)
    budget_tokens = options.get("budget_tokens", 800)
    cursor = options.get("cursor")
    offset = parse_cursor(cursor)
    states = ("pending",) if pending else (("live", "retired") if include_retired else ("live",))
    hide_expired = not include_retired and not pending
    params: list[Any] = [*scopes, *states, *([kind] if kind else []), *([tag] if tag else [])]
    params += [iso(now)] if hide_expired else []
    # No line is shorter than ~20 characters (5+ tokens), so this many rows always fill the budget.
    room = budget_tokens // 5 + 1
    with store.reading() as conn:
        where = listing_sql(
            len(scopes),
            states=len(states),
            kind=bool(kind),
            tag=conn.tag_condition() if tag else None,
            hide_expired=hide_expired,
            conflicts=conflicts,
        )
        total = conn.execute(f"SELECT count(*) FROM memory WHERE {where}", params).fetchone()[0]
        rows = conn.execute(
            f"SELECT {_LINE_COLUMNS}, {conn.source_field('kind')} FROM memory WHERE {where} "
            "ORDER BY pinned DESC, recorded_at DESC, id "
            "LIMIT ? OFFSET ?",
            (*params, room, offset),
        ).fetchall()
        waiting = 0
        if not pending:
            marks = ", ".join("?" * len(scopes))
            waiting = conn.execute(
                f"SELECT count(*) FROM memory WHERE scope IN ({marks}) AND superseded_by IS NULL "
                "AND state = 'pending'",
                tuple(scopes),
            ).fetchone()[0]
    lines: list[str] = []
    spent = 0
    for row in rows:
        memory_id, kind_, scope, title, recorded_at, pinned, trust, conflict, state, expires_at, origin = row
        shown = _Line(
            memory_id,
            kind_,
            scope,
            title,
            recorded_at,
            bool(pinned),
            trust,
            bool(conflict),
            state,
            expires_at,
            origin,
        )
        line = line_of(shown, now, project)
        cost = len(line) // CHARS_PER_TOKEN + 1
        if lines and spent + cost > budget_tokens:
            break
        lines.append(line)
        spent += cost
    position = offset + len(lines)
    result: dict[str, Any] = {
        "scopes": list(scopes),
        "total": total,
        "shown": len(lines),
        "lines": lines,
        "next_cursor": str(position) if position < total else None,
    }
    if waiting:
        result["pending"] = waiting
    return result


def _version_dict(version: Version, now: float) -> dict[str, Any]:
    data = version.to_dict()
    data["age"] = age_label(version.recorded_at, now)
    return data


def read_full(
    store: Store, ids: Sequence[str], *, now: float, scopes: Sequence[str], include_pending: bool = False
) -> dict[str, Any]:
    """Every version, provenance and link of each memory in ``ids`` that lives in ``scopes``
    (a proposal awaiting approval only with ``include_pending``).

    Raises:
        UsageError: more than 20 ids, a malformed id, or an id with no memory in ``scopes``.
    """
    if len(ids) > IDS_MAX:
        raise UsageError(f"{len(ids)} ids; read at most {IDS_MAX} at a time.")
    wanted = [check_id(raw) for raw in ids]
    out: list[dict[str, Any]] = []
    with store.reading() as conn:
        for memory_id in wanted:
            versions = lineage(conn, memory_id)
            current = [v for v in versions if v.is_head and v.state != "pending"]
            shown = current[-1] if current else (versions[-1] if versions else None)
            hidden = shown is not None and shown.state == "pending" and not include_pending
            if shown is None or hidden or shown.scope not in scopes:
                raise UsageError(
                    f"no memory {memory_id} in {', '.join(scopes)}. List ids with `korg-recall memories`; "
                    "pass scope to read another scope's."
                )
            entry = _version_dict(shown, now)
            entry["body"] = escape_body(shown.body)
            entry["versions"] = [
                {**_version_dict(v, now), "body": escape_body(v.body)}
                for v in versions
                if v.version != shown.version
            ]
            entry["links"] = [
                {"src": a, "dst": b, "kind": kind} for a, b, kind in links_of(conn, [memory_id])
            ]
            if len(current) > 1:
                entry["conflict_versions"] = [v.version for v in current]
                entry["note"] = CONFLICT_NOTE
            out.append(entry)
    return {"memories": out}
