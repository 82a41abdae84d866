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
from typing import Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory.records import Version, check_id, iso
from korg_bridge.recall.memory.rows import lineage, links_of, select_versions
from korg_bridge.recall.memory.safety import age_label, escape_body
from korg_bridge.recall.memory.store import Store

__all__ = ["LINE_MAX", "index_lines", "line_of", "parse_cursor", "read_full"]

LINE_MAX = 150
CHARS_PER_TOKEN = 4
"""A rough, conservative token estimate for English text and ids."""
IDS_MAX = 20


def line_of(version: Version, now: float, project: str) -> str:
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
    where = "" if version.scope == project else f" ({'user' if version.scope == 'user' else version.scope})"
    head = f"{version.id} {version.type} {age_label(version.recorded_at, now)}{where} "
    tail = (" " + " ".join(flags)) if flags else ""
    room = LINE_MAX - len(head) - len(tail)
    title = version.title if len(version.title) <= room else version.title[: max(0, room - 1)] + "…"
    return (head + title + tail)[:LINE_MAX]


def _where(scopes: Sequence[str], kind: str | None, states: Sequence[str]) -> tuple[str, list[Any]]:
    clauses = [
        f"scope IN ({', '.join('?' * len(scopes))})",
        "superseded_by IS NULL",
        f"state IN ({', '.join('?' * len(states))})",
    ]
    params: list[Any] = [*scopes, *states]
    if kind:
        clauses.append("type = ?")
        params.append(kind)
    return " AND ".join(clauses), params


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


def index_lines(
    store: Store,
    *,
    scopes: Sequence[str],
    project: str,
    now: float,
    kind: str | None = None,
    tag: str | None = None,
    include_retired: bool = False,
    pending: bool = False,
    budget_tokens: int = 800,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The index of memories in ``scopes`` (``pending``: the proposals awaiting approval instead).

    Raises:
        UsageError: a cursor that is not one this returned.
    """
    offset = parse_cursor(cursor)
    states = ("pending",) if pending else (("live", "retired") if include_retired else ("live",))
    where, params = _where(scopes, kind, states)
    with store.reading() as conn:
        versions = select_versions(conn, f"{where} ORDER BY pinned DESC, recorded_at DESC, id", params)
    now_iso = iso(now)
    if not include_retired and not pending:
        versions = [v for v in versions if v.expires_at is None or v.expires_at > now_iso]
    if tag:
        versions = [v for v in versions if tag in v.tags]
    lines: list[str] = []
    spent = 0
    position = offset
    for version in versions[offset:]:
        line = line_of(version, now, project)
        cost = len(line) // CHARS_PER_TOKEN + 1
        if lines and spent + cost > budget_tokens:
            break
        lines.append(line)
        spent += cost
        position += 1
    result: dict[str, Any] = {
        "scopes": list(scopes),
        "total": len(versions),
        "shown": len(lines),
        "lines": lines,
        "next_cursor": str(position) if position < len(versions) else None,
    }
    if not pending:
        with store.reading() as conn:
            marks = ", ".join("?" * len(scopes))
            waiting = conn.execute(
                f"SELECT count(*) FROM memory WHERE scope IN ({marks}) AND superseded_by IS NULL AND state = 'pending'",
                tuple(scopes),
            ).fetchone()[0]
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
            out.append(entry)
    return {"memories": out}
