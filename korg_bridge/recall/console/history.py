"""The console's reads of the history index: projects, sessions, a session's timeline, one event,
search, and the draft "Remember this" opens.

Everything reads through the caller's walls (a tenant sees only the history its operator gave
it: :mod:`korg_bridge.recall.history.walls`), on the caller's warm index
(:mod:`.warm`). Text leaves with secrets redacted unless the operator set
``KORG_RECALL_ALLOW_SECRETS``.

Sessions are a ``GROUP BY`` over every event; the list is computed once per change of the index
(its newest event id and the time of its last refresh) and kept, so paging and repeated views
cost a lookup.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from korg_bridge.errors import UsageError
from korg_bridge.recall.console.memview import next_cursor, parse_cursor

if TYPE_CHECKING:
    from korg_bridge.recall.console.core import Caller
    from korg_bridge.recall.console.core import Core as Console
    from korg_bridge.recall.history.index import Index

__all__ = ["event", "projects", "refresh", "remember_draft", "search", "sessions", "timeline"]

FOLD_CHARS = 2000
FOLD_MARGIN = 512
"""Characters past a fold that are redacted with it: longer than any secret the rules find."""
"""Texts longer than this are folded in a timeline: the first part shown, the rest a click away."""
PAGE_MAX = 500
FRESH_S = 10.0
SESSIONS_KEPT = 8
"""Session lists kept (per caller and index state)."""
TOOL_KINDS = {"user_prompt": "prompt", "llm_inference": "reply", "compact_summary": "summary"}

ITEMS_KEPT = 20_000
"""Timeline items kept as shown (folded, redacted), by caller, event and what can change in an
event (its text's length, whether its result came): redaction is most of a timeline's cost."""


def _hides(console: Console) -> bool:
    """Whether secrets are redacted: unless the operator set ``KORG_RECALL_ALLOW_SECRETS``."""
    from korg_bridge.config import ENV_RECALL_ALLOW_SECRETS, switch

    return not switch(console.base_env, ENV_RECALL_ALLOW_SECRETS, False)


def _redactor(console: Console) -> Any:
    from korg_bridge.redact import redact_value

    if not _hides(console):
        return lambda value: value
    return lambda value: redact_value(value)[0]


def _read(console: Console, caller: Caller, work: Any) -> Any:
    ensure_fresh(console, caller)
    env = console.env_for(caller)
    return console.warm.with_index(caller.warm_key, env, lambda index: index.read(work))


def ensure_fresh(console: Console, caller: Caller) -> None:
    """Refresh the caller's history unless that was done in the last :data:`FRESH_S` (by a read or
    the background tick): a page never shows history older than that."""
    last = console.refreshed.get(caller.warm_key)
    if last is None or time.monotonic() - last > FRESH_S:
        refresh(console, caller)


def refresh(console: Console, caller: Caller) -> dict[str, Any]:
    """Bring the index up to date with the caller's sources (the background indexer's tick)."""
    env = console.env_for(caller)
    sources = _sources(env)

    def work(index: Index) -> dict[str, Any]:
        return dict(vars(index.refresh(sources)))

    found: dict[str, Any] = console.warm.with_index(caller.warm_key, env, work)
    console.refreshed[caller.warm_key] = time.monotonic()
    return found


def _sources(env: Mapping[str, str]) -> list[Path]:
    """The history the caller reads: its tenant's (walled), else the operator's ledgers."""
    from korg_bridge.recall.history.ingest.sources import resolve_sources
    from korg_bridge.recall.history.walls import history_of

    walls = history_of(env)
    return [Path(p) for p in walls.sources] if walls is not None else list(resolve_sources([], env))


def _state(conn: sqlite3.Connection) -> tuple[int, int]:
    """What changes when events come or go: the newest id, and how many there are (a refresh that
    found nothing new changes neither, so the sessions stay cached)."""
    newest, count = conn.execute("SELECT coalesce(max(id), 0), count(*) FROM events").fetchone()
    return int(newest), int(count)


def _all_sessions(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute(
        """
        SELECT session, min(agent), max(project), min(ts), max(ts), count(*),
               min(timestamp), max(timestamp), max(CASE WHEN tool = 'session_title' THEN id END),
               min(CASE WHEN tool = 'user_prompt' THEN id END), group_concat(DISTINCT source_id)
        FROM events WHERE session IS NOT NULL
        GROUP BY session ORDER BY max(ts) DESC, session
        """
    ).fetchall()
    out: list[dict[str, Any]] = []
    titles: dict[int, str] = {}
    # the title (Claude Code's summary line, else the first prompt), and the first prompt's branch:
    # a summary line carries no gitBranch
    wanted = sorted({int(r[i]) for r in rows for i in (8, 9) if r[i]})
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        for event_id, text, extra in conn.execute(
            f"SELECT id, substr(text, 1, 200), extra FROM events WHERE id IN ({marks})", chunk
        ):
            titles[int(event_id)] = " ".join(str(text).split())[:120]
            if extra:
                titles[-int(event_id)] = _branch(extra) or ""
    for session, agent, project, _t0, _t1, count, started, ended, title_id, prompt_id, files in rows:
        chosen = int(title_id or prompt_id or 0)
        out.append(
            {
                "session": str(session),
                "title": titles.get(chosen) or str(session),
                "agent": agent,
                "project": project,
                "branch": titles.get(-chosen) or titles.get(-int(prompt_id or 0)) or None,
                "started": started,
                "ended": ended,
                "events": int(count),
                "_files": [int(f) for f in str(files or "").split(",") if f],
            }
        )
    return out


def _branch(extra: str) -> str | None:
    try:
        value = json.loads(extra).get("git_branch")
    except (ValueError, AttributeError):
        return None
    return str(value) if value else None


def _sessions(console: Console, caller: Caller) -> list[dict[str, Any]]:
    def work(conn: sqlite3.Connection) -> Any:
        newest, count = _state(conn)
        key = (caller.warm_key, newest, count)
        kept = console.keep("sessions")
        with console.kept_lock:
            found = kept.get(key)
        if found is None:
            found = _all_sessions(conn)
            with console.kept_lock:
                for k in [k for k in kept if k[0] == caller.warm_key]:
                    del kept[k]
                while len(kept) >= SESSIONS_KEPT:
                    del kept[next(iter(kept))]
                kept[key] = found
        return found

    result: list[dict[str, Any]] = _read(console, caller, work)
    return result


def projects(console: Console, caller: Caller) -> list[dict[str, Any]]:
    by_project: dict[str, dict[str, Any]] = {}
    for item in _sessions(console, caller):
        name = item["project"] or ""
        entry = by_project.setdefault(
            name, {"project": item["project"], "sessions": 0, "events": 0, "last": None}
        )
        entry["sessions"] += 1
        entry["events"] += item["events"]
        if item["ended"] and (entry["last"] is None or item["ended"] > entry["last"]):
            entry["last"] = item["ended"]
    return sorted(by_project.values(), key=lambda e: e["last"] or "", reverse=True)


def sessions(
    console: Console, caller: Caller, *, project: str | None, cursor: str | None, limit: int
) -> dict[str, Any]:
    offset = parse_cursor(cursor)
    limit = max(1, min(limit, PAGE_MAX))
    found = _sessions(console, caller)
    if project:
        found = [s for s in found if s["project"] == project]
    shown = found[offset : offset + limit]
    redact = _redactor(console)
    return {
        "sessions": [_public(s, redact) for s in shown],
        "total": len(found),
        "next_cursor": next_cursor(offset, len(shown), len(found)),
    }


def _public(session: dict[str, Any], redact: Any) -> dict[str, Any]:
    return {k: v for k, v in session.items() if not k.startswith("_")} | {"title": redact(session["title"])}


_COLUMNS = (
    "e.id, s.path, e.seq, e.session, e.agent, e.tool, e.args, e.result, e.success, e.timestamp, "
    "e.extra, e.text, e.body, e.tool_use_id, e.project"
)


def _event_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """An event in full (``show``'s fields): the text, and the tool's input and output as stored."""
    event_id, path, seq, session, agent, tool, args, result, success, timestamp, extra, text, body = row[:13]
    full = str(body or text or "")
    return {
        "ref": f"e{event_id}",
        "seq": seq,
        "session": session,
        "agent": agent,
        "tool": tool,
        "kind": _kind(tool),
        "args": _json(args),
        "result": _json(result),
        "success": None if success is None else bool(success),
        "timestamp": timestamp,
        "text": full,
        "chars": len(full),
        "source": path,
        "project": row[14],
        "branch": _branch(extra) if extra else None,
    }


def _kind(tool: Any) -> str:
    return TOOL_KINDS.get(str(tool), "tool" if tool and tool not in _NON_TOOLS else str(tool or "event"))


def _folded(value: Any, hide: bool) -> tuple[str, bool]:
    """``value`` as text of at most :data:`FOLD_CHARS`, secrets redacted (``hide``), and whether
    it was cut. Redacted on a margin past the cut, then cut: a secret across the cut is found
    whole, so no half of one is shown."""
    from korg_bridge.redact import redact

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    cut = len(text) > FOLD_CHARS
    window = text[: FOLD_CHARS + FOLD_MARGIN] if cut else text
    if hide:
        window = redact(window)[0]
    return (window[:FOLD_CHARS] if cut else window), cut


def _timeline_item(row: tuple[Any, ...], hide: bool) -> dict[str, Any]:
    """An event as a timeline shows it: text, and a tool's input and output, each folded."""
    event_id, _path, seq, session, agent, tool, args, result, success, timestamp, extra, text, body = row[:13]
    full = str(body or text or "")
    shown, folded = _folded(full, hide)
    item: dict[str, Any] = {
        "ref": f"e{event_id}",
        "seq": seq,
        "session": session,
        "agent": agent,
        "tool": tool,
        "kind": _kind(tool),
        "success": None if success is None else bool(success),
        "timestamp": timestamp,
        "text": shown,
        "folded": folded,
        "chars": len(full),
        "input": None,
        "output": None,
        "branch": _branch(extra) if extra else None,
    }
    if item["kind"] == "tool":  # the call and its result, paired in one item
        if args is not None:
            item["input"], cut_in = _folded(_json(args), hide)
            item["folded"] = item["folded"] or cut_in
        if result is not None:
            item["output"], cut_out = _folded(_json(result), hide)
            item["folded"] = item["folded"] or cut_out
    return item


def _json(text: Any) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _non_tools() -> frozenset[str]:
    from korg_bridge.recall.history.ingest.event import KINDS

    return frozenset(KINDS)


_NON_TOOLS = _non_tools()


def timeline(
    console: Console, caller: Caller, session: str, *, cursor: str | None, limit: int
) -> dict[str, Any]:
    offset = parse_cursor(cursor)
    limit = max(1, min(limit, PAGE_MAX))
    if not session or len(session) > 512:
        raise UsageError("pass a session id from the sessions list.")

    found = next((s for s in _sessions(console, caller) if s["session"] == session), None)
    if found is None:
        raise UsageError(f"no session {session!r} in the history index.")
    files = found["_files"] or [-1]
    marks = ", ".join("?" * len(files))

    def work(conn: sqlite3.Connection) -> tuple[int, list[tuple[Any, ...]]]:
        # By the session's files first: their (source_id, offset) index, not a scan of every event.
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM events e JOIN sources s ON s.id = e.source_id "
            f"WHERE e.source_id IN ({marks}) AND e.session = ? "
            'ORDER BY e.source_id, e."offset", e.id LIMIT ? OFFSET ?',
            (*files, session, limit, offset),
        ).fetchall()
        return int(found["events"]), rows

    total, rows = _read(console, caller, work)
    if not total:
        raise UsageError(f"no session {session!r} in the history index.")
    hide = _hides(console)
    items = console.keep("timeline")
    events = []
    for row in rows:
        key = (caller.warm_key, int(row[0]), len(str(row[12] or row[11] or "")), row[7] is not None, hide)
        with console.kept_lock:
            item = items.get(key)
        if item is None:
            item = _timeline_item(row, hide)
            with console.kept_lock:
                items[key] = item
                while len(items) > ITEMS_KEPT:
                    del items[next(iter(items))]
        events.append(item)
    return {
        "session": session,
        "total": total,
        "events": events,
        "next_cursor": next_cursor(offset, len(rows), total),
    }


def event(console: Console, caller: Caller, ref: str) -> dict[str, Any]:
    from korg_bridge.recall.history.index import parse_ref

    event_id = parse_ref(ref)

    def work(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = conn.execute(
            f"SELECT {_COLUMNS} FROM events e JOIN sources s ON s.id = e.source_id WHERE e.id = ?",
            (event_id,),
        ).fetchone()
        return row

    row = _read(console, caller, work)
    if row is None:
        raise UsageError(f"no event e{event_id} in the recall index. Use a ref from a session or a search.")
    found: dict[str, Any] = _redactor(console)(_event_dict(row))
    return found


def remember_draft(console: Console, caller: Caller, ref: str) -> dict[str, Any]:
    found = event(console, caller, ref)
    text = str(found["text"]).strip()
    scope = f"project:{found['project']}" if found.get("project") else "user"
    return {
        "content": text[:4000],
        "title": " ".join(text.split())[:100],
        "source": found["ref"],
        "scope": scope,
        "type": "project" if found.get("project") else "note",
        "event": {k: found[k] for k in ("ref", "session", "agent", "tool", "timestamp", "project")},
    }


class SearchFilters(TypedDict, total=False):
    """What narrows a console history search besides its words (as ``recall``'s flags)."""

    mode: str
    project: str | None
    agent: str | None
    tool: str | None
    since: str | None
    until: str | None
    top_n: int


def search(console: Console, caller: Caller, query: str, **filters: Unpack[SearchFilters]) -> dict[str, Any]:
    from korg_bridge.recall.history.query.limits import check_query
    from korg_bridge.recall.history.query.search import search as run_search
    from korg_bridge.recall.history.query.timeparse import parse_time
    from korg_bridge.recall.semantic.modes import SEMANTIC_MODES, resolve_mode

    mode = filters.get("mode") or "auto"
    project, agent, tool = filters.get("project"), filters.get("agent"), filters.get("tool")
    since, until, top_n = filters.get("since"), filters.get("until"), filters.get("top_n", 20)
    check_query(query)
    if mode not in ("auto", "keyword", "hybrid", "semantic", "substring"):
        raise UsageError(f"bad mode {mode!r}: use auto, keyword, hybrid, semantic or substring.")
    env = console.env_for(caller)
    used = resolve_mode(mode, env)
    ranker = None
    if used in SEMANTIC_MODES:
        from korg_bridge.recall.semantic.modes import shared_embedder
        from korg_bridge.recall.semantic.rank import SemanticRanker

        ranker = SemanticRanker(shared_embedder(env))
    start = parse_time(since) if since else None
    end = parse_time(until, end_of_day=True) if until else None
    top_n = max(1, min(int(top_n), 100))
    root = None
    if project and project.strip():  # as the CLI's --project: a folder, matched by its git root
        from korg_bridge.recall.project import project_root

        root = project_root(os.path.abspath(os.path.expanduser(project.strip())))

    sources = _sources(env)
    ensure_fresh(console, caller)

    def work(index: Index) -> list[Any]:
        return run_search(
            index,
            query,
            mode=used,
            top_n=top_n,
            min_score=0.0 if used == "hybrid" else 0.3,
            sources=sources,
            tool_filter=[tool] if tool else (),
            agent_filter=[agent] if agent else (),
            since=start,
            until=end,
            project=root,
            ranker=ranker,
        )

    hits = console.warm.with_index(caller.warm_key, env, work)
    redact = _redactor(console)
    out = [
        redact(
            {
                "ref": hit.ref,
                "score": round(hit.score, 4),
                "breakdown": hit.breakdown or {"total": round(hit.score, 4)},
                "agent": hit.agent,
                "tool": hit.tool,
                "session": hit.session,
                "timestamp": hit.timestamp,
                "project": hit.project,
                "snippet": " ".join(str(hit.snippet).split())[:300],
            }
        )
        for hit in hits
    ]
    return {"mode": used, "query": query, "hits": out}
