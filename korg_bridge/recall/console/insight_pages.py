"""The context preview (what the session-start hook would inject now, its tokens against the
budget, what was left out and why, which agents have the hook) and the Health page (index
freshness and coverage, skipped lines, unreadable Claude Code memory files, store integrity, the
op-log verdict, sources and sizes). Both read :class:`~.services.Console` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from korg_bridge.errors import KorgError
from korg_bridge.recall.console.history_pages import project_name
from korg_bridge.recall.console.render import caller_of, console_of, error_page, render_page

__all__ = ["health_sections", "routes"]

LEFT_OUT_REASONS = {
    "budget": "did not fit the token budget",
    "untrusted": "untrusted: reads like an injected instruction",
    "retired": "retired",
    "pending": "waiting for approval",
}


def context_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    q = request.query_params
    project = q.get("project", "").strip() or None
    raw_budget = q.get("budget", "").strip()
    budget = int(raw_budget) if raw_budget.isdigit() and len(raw_budget) < 7 else None
    try:
        preview = console.context_preview(caller, project, budget)
    except KorgError as exc:
        return error_page(request, exc, section="context")
    try:
        known = [p.get("project") for p in console.projects(caller) if p.get("project")]
    except KorgError:
        known = []
    shown = preview["project"]
    projects = [{"project": p, "name": f"{project_name(p)} ({p})"} for p in dict.fromkeys([shown, *known])]
    left_out = [
        {"reason": LEFT_OUT_REASONS.get(reason, reason), "count": count}
        for reason, count in preview["left_out"].items()
        if count
    ]
    hooks = [
        {
            "agent": f"{hook.get('agent', '')} ({hook.get('level', '')} settings)",
            "installed": bool(hook.get("installed")),
            "path": hook.get("file", ""),
            "error": hook.get("error"),
        }
        for hook in preview["hooks"]
    ]
    context = {
        "projects": projects,
        "project": shown,
        "budget": preview["budget"],
        "used": preview["tokens"],
        "text": preview["text"],
        "left_out": left_out,
        "hooks": hooks,
        "brief_notes": preview.get("notes") or [],
    }
    return render_page(request, "context.html", context, title="Context preview", section="context")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _fact(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_fact(v)}" for k, v in value.items()) or "—"
    if isinstance(value, list | tuple):
        return ", ".join(_fact(v) for v in value) or "—"
    return str(value)


def _table(title: str, rows: Sequence[Any]) -> dict[str, Any]:
    """A list of records as a table (columns: every key, in first-seen order)."""
    records = [row if isinstance(row, Mapping) else {"value": row} for row in rows]
    columns = list(dict.fromkeys(key for row in records for key in row))
    return {
        "title": title,
        "table": True,
        "columns": [c.replace("_", " ") for c in columns],
        "rows": [[_fact(row.get(c)) for c in columns] for row in records],
    }


def _section(title: str, data: Mapping[str, Any], status: str | None = None) -> list[dict[str, Any]]:
    """A part of the health report: its plain figures, then each list in it as its own table."""
    if "error" in data and len(data) == 1:
        return [
            {"title": title, "status": "bad", "facts": [("error", data["error"])], "rows": [], "columns": []}
        ]
    facts = [
        (key.replace("_", " "), _fact(value))
        for key, value in data.items()
        if _scalar(value) or (isinstance(value, Mapping) and all(_scalar(v) for v in value.values()))
    ]
    out = [{"title": title, "status": status, "facts": facts, "rows": [], "columns": []}]
    for key, value in data.items():
        if isinstance(value, list) and value and not all(_scalar(v) for v in value):
            out.append(_table(f"{title}: {key.replace('_', ' ')}", value))
        elif isinstance(value, Mapping) and not all(_scalar(v) for v in value.values()):
            out.extend(_section(f"{title}: {key.replace('_', ' ')}", value))
    return out


def health_sections(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The health report as page sections, the verdicts first."""
    index = report.get("index") or {}
    memory = report.get("memory") or {}
    oplog = report.get("oplog") or {}
    index_status = "bad" if "error" in index else "warn" if index.get("skipped_lines") else "ok"
    memory_status = (
        "bad" if "error" in memory else "ok" if memory.get("integrity_check") in ("ok", None) else "bad"
    )
    intact = oplog.get("intact")
    oplog_status = "ok" if intact is True else "bad" if intact is False else None
    sections: list[dict[str, Any]] = []
    sections += _section(
        "History index", {k: v for k, v in index.items() if k not in ("sources", "skipped")}, index_status
    )
    sections.append(_table("Skipped lines (file, line, reason)", index.get("skipped") or []))
    sections.append(_table("Sources", index.get("sources") or []))
    claude = memory.get("claude") if isinstance(memory.get("claude"), Mapping) else {}
    sections += _section("Memory store", {k: v for k, v in memory.items() if k != "claude"}, memory_status)
    sections.append(
        _table("Claude Code memory files that could not be read", (claude or {}).get("skipped") or [])
    )
    sections += _section("Operation log verify", oplog, oplog_status)
    return sections


def health_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    try:
        report = console.health(caller)
    except KorgError as exc:
        return error_page(request, exc, section="health")
    return render_page(
        request, "health.html", {"sections": health_sections(report)}, title="Health", section="health"
    )


def routes() -> list[Route]:
    return [
        Route("/context", context_page, methods=["GET"]),
        Route("/health", health_page, methods=["GET"]),
    ]
