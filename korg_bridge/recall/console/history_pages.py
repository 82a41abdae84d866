"""The History pages: projects, a project's sessions, a session's timeline, one event, and search
across history with each hit's score breakdown; every event offers "Remember this".

A timeline pairs each tool call with its result (the index joined them), marks compaction
summaries, and folds long texts in ``<details>`` (open without JavaScript); an event's own page
shows it whole. Like every page, these call :class:`~.services.Console` only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from korg_bridge.errors import KorgError
from korg_bridge.recall.console.render import caller_of, console_of, error_page, render_page
from korg_bridge.recall.console.services import Caller, Console

__all__ = ["project_name", "routes", "timeline_entry"]

FOLD_AT = 600
"""Characters beyond which a text is folded in a timeline (its first line stays visible)."""
FOLD_LINES = 8
HISTORY_MODES = ("auto", "keyword", "hybrid", "semantic", "substring")
KIND_LABELS = {
    "prompt": "prompt",
    "reply": "reply",
    "summary": "compaction summary",
    "tool": "tool call",
    "subagent_prompt": "sub-agent prompt",
    "system_note": "system note",
    "command": "command",
    "command_output": "command output",
    "shell": "shell",
    "ide_context": "IDE context",
    "interrupt": "interrupt",
    "task_notification": "task notification",
}


def project_name(project: str | None) -> str:
    """What a person calls a project: its folder's name (the full path is shown beside it)."""
    if not project:
        return "(no project)"
    return os.path.basename(project.rstrip("/")) or project


def _shown(value: Any) -> str:
    """A tool's arguments or result as text: the one string it holds, else compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str):
            return only
    return json.dumps(value, ensure_ascii=False, indent=1)


def _from_json_text(text: str) -> str:
    """A tool's input or output as the timeline gets it (JSON text, perhaps cut short) shown as
    :func:`_shown` shows the value: a cut ``{"output": "…`` still reads as its text."""
    try:
        return _shown(json.loads(text))
    except ValueError:
        pass
    opening = re.match(r'\{"[^"\\]{1,40}": "', text)
    if opening is None:
        return text
    rest = text[opening.end() :]
    for end in range(len(rest), max(len(rest) - 8, -1), -1):  # an escape the cut split in two
        try:
            decoded = json.loads(f'"{rest[:end]}"')
        except ValueError:
            continue
        return str(decoded)
    return text


def _call_and_result(event: Mapping[str, Any]) -> tuple[str, str | None]:
    """A tool event's call and result: the whole values (an event's page) or the timeline's
    folded JSON texts."""
    if "args" in event or "result" in event:
        result = event.get("result")
        return _shown(event.get("args")), None if result is None else _shown(result)
    raw_in, raw_out = event.get("input"), event.get("output")
    call = _from_json_text(raw_in) if isinstance(raw_in, str) else ""
    return call, _from_json_text(raw_out) if isinstance(raw_out, str) else None


def _long(text: str) -> bool:
    return len(text) > FOLD_AT or text.count("\n") >= FOLD_LINES


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    return line[:120] + ("…" if len(line) > 120 else "")


def timeline_entry(event: Mapping[str, Any], *, fold: bool = True) -> dict[str, Any]:
    """What a timeline shows of one event: its kind, the call and its paired result, folded when long."""
    kind = str(event.get("kind") or "event")
    is_tool = kind == "tool"
    tool = str(event.get("tool") or "")
    text, result = _call_and_result(event) if is_tool else (str(event.get("text") or ""), None)
    entry: dict[str, Any] = {
        "ref": event["ref"],
        "kind_class": kind if kind in ("prompt", "reply", "tool", "summary") else "other",
        "kind_label": KIND_LABELS.get(kind, kind.replace("_", " ")),
        "compaction": kind == "summary",
        "tool": tool if is_tool else None,
        "call": None,
        "time": event.get("timestamp") or "",
        "text": text,
        "long": fold and _long(text),
        "summary": _first_line(text),
        "length": len(text),
        "result": result,
        "failed": event.get("success") is False,
        "result_long": fold and result is not None and _long(result),
        "result_summary": _first_line(result or ""),
        "result_length": len(result or ""),
        "truncated": bool(event.get("folded")),
        "session": event.get("session"),
    }
    return entry


def projects_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    try:
        found = console.projects(caller)
    except KorgError as exc:
        return error_page(request, exc, section="history")
    projects = [
        {**p, "name": project_name(p.get("project")), "project": p.get("project") or ""} for p in found
    ]
    return render_page(request, "projects.html", {"projects": projects}, title="History", section="history")


def sessions_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    project = request.query_params.get("project") or None
    cursor = request.query_params.get("cursor") or None
    try:
        found = console.sessions(caller, project=project, cursor=cursor)
    except KorgError as exc:
        return error_page(request, exc, section="history")
    sessions = [
        {
            "id": s["session"],
            "title": s.get("title") or s["session"],
            "time": s.get("started") or "",
            "agent": s.get("agent") or "",
            "branch": s.get("branch"),
            "events": s.get("events", 0),
        }
        for s in found["sessions"]
    ]
    next_url = None
    if found.get("next_cursor"):
        query = f"project={quote(project, safe='')}&" if project else ""
        next_url = f"/history/sessions?{query}cursor={found['next_cursor']}"
    context = {
        "sessions": sessions,
        "project_name": project_name(project) if project else "All projects",
        "next_url": next_url,
    }
    return render_page(request, "sessions.html", context, title="Sessions", section="history")


def session_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    session = request.path_params["session"]
    try:
        found = console.timeline(caller, session, cursor=request.query_params.get("cursor") or None)
        about = _session_about(console, caller, session)
    except KorgError as exc:
        return error_page(request, exc, section="history")
    events = [timeline_entry(e) for e in found["events"] if e.get("tool") != "session_title"]
    context: dict[str, Any] = {"s": {**about, "events": found["total"]}, "events": events, "page": "session"}
    next_cursor = found.get("next_cursor")
    context["next_url"] = (
        f"/history/sessions/{quote(session, safe='')}?cursor={next_cursor}" if next_cursor else None
    )
    return render_page(request, "session.html", context, title=about["title"][:80], section="history")


SESSION_PAGES = 40
"""Pages of the (cached) sessions list looked through for one session's title and branch."""


def _session_about(console: Console, caller: Caller, session: str) -> dict[str, Any]:
    """The session's title, time, agent and branch, from the sessions list."""
    cursor: str | None = None
    for _ in range(SESSION_PAGES):
        found = console.sessions(caller, cursor=cursor, limit=500)
        for s in found["sessions"]:
            if s["session"] == session:
                return {
                    "id": session,
                    "title": s.get("title") or session,
                    "time": s.get("started") or "",
                    "agent": s.get("agent") or "",
                    "branch": s.get("branch"),
                    "project": s.get("project") or "",
                    "project_name": project_name(s.get("project")),
                }
        cursor = found.get("next_cursor")
        if not cursor:
            break
    return {
        "id": session,
        "title": session,
        "time": "",
        "agent": "",
        "branch": None,
        "project": "",
        "project_name": "",
    }


def event_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    try:
        found = console.event(caller, request.path_params["ref"])
    except KorgError as exc:
        return error_page(request, exc, section="history")
    entry = timeline_entry(found, fold=False)
    session = found.get("session") or ""
    context = {
        "e": entry,
        "session_href": f"/history/sessions/{quote(str(session), safe='')}#{entry['ref']}"
        if session
        else None,
        "meta": {
            "agent": found.get("agent") or "",
            "project": found.get("project") or "",
            "source": found.get("source") or "",
        },
        "page": "event",
    }
    return render_page(request, "event.html", context, title=f"Event {entry['ref']}", section="history")


def search_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    q = request.query_params
    f = {name: q.get(name, "").strip() for name in ("q", "project", "agent", "kind", "since", "until")}
    f["mode"] = q.get("mode", "auto") if q.get("mode", "auto") in HISTORY_MODES else "auto"
    hits: list[dict[str, Any]] = []
    used = None
    error = None
    status = 200
    try:
        projects = [
            {"project": p.get("project") or "", "name": project_name(p.get("project"))}
            for p in console.projects(caller)
        ]
    except KorgError:
        projects = []
    if f["q"]:
        try:
            found = console.search_history(
                caller,
                f["q"],
                mode=f["mode"],
                project=f["project"] or None,
                agent=f["agent"] or None,
                tool=f["kind"] or None,
                since=f["since"] or None,
                until=f["until"] or None,
            )
            used = found["mode"]
            hits = [
                {
                    **hit,
                    "title": hit.get("snippet", "")[:100] or hit["ref"],
                    "kind": hit.get("tool") or "",
                    "time": hit.get("timestamp") or "",
                    "project": project_name(hit.get("project")) if hit.get("project") else "",
                }
                for hit in found["hits"]
            ]
        except KorgError as exc:
            error, status = exc.message, 400 if exc.exit_code == 2 else 409
    context = {
        "f": f,
        "hits": hits,
        "used_mode": used,
        "modes": HISTORY_MODES,
        "projects": projects,
        "page": "history-search",
    }
    return render_page(
        request,
        "history_search.html",
        context,
        title="Search history",
        section="history",
        error=error,
        status=status,
    )


def routes() -> list[Route]:
    return [
        Route("/history", projects_page, methods=["GET"]),
        Route("/history/sessions", sessions_page, methods=["GET"]),
        Route("/history/sessions/{session:path}", session_page, methods=["GET"]),
        Route("/history/events/{ref}", event_page, methods=["GET"]),
        Route("/history/search", search_page, methods=["GET"]),
    ]
