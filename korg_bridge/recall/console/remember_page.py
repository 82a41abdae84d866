"""The remember form: a new memory written by a person, blank or opened by "Remember this" on a
history event, prefilled with the event's text and its provenance (its ref, which the memory's
versions then link back to). The write is :meth:`~.services.Console.remember`: the CLI's
``remember``, as the person.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from korg_bridge.errors import KorgError
from korg_bridge.recall.console.render import (
    caller_of,
    console_of,
    error_page,
    form_of,
    render_page,
    see_other,
)
from korg_bridge.recall.console.services import Caller, Console, http_status
from korg_bridge.recall.memory.records import MEMORY_TYPES

__all__ = ["new_memory_page", "new_memory_post", "tags_of"]


def tags_of(text: str) -> list[str]:
    """Tags as a person types them: comma-separated."""
    return [tag.strip() for tag in text.split(",") if tag.strip()]


def new_memory_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    ref = request.query_params.get("event", "").strip()
    form: dict[str, Any] = {
        "content": "",
        "title": "",
        "type": "project",
        "scope": "",
        "tags": "",
        "pinned": False,
    }
    event = None
    try:
        scopes = _write_scopes(console, caller)
        if ref:
            draft = console.remember_draft(caller, ref)
            form.update(
                content=draft.get("content") or "",
                title=draft.get("title") or "",
                type=draft.get("type") or "project",
                scope=draft.get("scope") or "",
            )
            event = _event_summary(draft)
    except KorgError as exc:
        return error_page(request, exc)
    context = {"form": form, "event": event, "types": MEMORY_TYPES, "scopes": scopes, "page": "new"}
    return render_page(request, "new_memory.html", context, title="New memory", section="memories")


def _write_scopes(console: Console, caller: Caller) -> list[str]:
    """Where a person may write from here: the server's project first, then user, then the others."""
    project = console.context(caller).project
    known = [row["scope"] for row in console.scopes(caller)]
    return list(dict.fromkeys([project, "user", *known]))


def _event_summary(draft: Mapping[str, Any]) -> dict[str, Any]:
    event = draft.get("event") if isinstance(draft.get("event"), Mapping) else {}
    assert isinstance(event, Mapping)
    ref = str(draft.get("source") or event.get("ref") or "")
    session = event.get("session")
    href = f"/history/events/{ref}"
    return {
        "ref": ref,
        "kind": event.get("kind") or event.get("tool") or "event",
        "session_title": event.get("session_title") or session or "its session",
        "time": event.get("timestamp") or "",
        "href": href,
    }


async def new_memory_post(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    form = await form_of(request)
    args: dict[str, Any] = {"content": form.get("content", ""), "type": form.get("type", "note")}
    for name in ("title", "scope", "source"):
        if form.get(name, "").strip():
            args[name] = form[name].strip()
    if tags_of(form.get("tags", "")):
        args["tags"] = tags_of(form.get("tags", ""))
    if form.get("pinned") == "yes":
        args["pinned"] = True
    try:
        result = await run_in_threadpool(console.remember, caller, args)
    except KorgError as exc:
        try:
            scopes = await run_in_threadpool(_write_scopes, console, caller)
        except KorgError:
            scopes = []
        keep = {**form, "pinned": form.get("pinned") == "yes"}
        context = {"form": keep, "event": None, "types": MEMORY_TYPES, "scopes": scopes, "page": "new"}
        return render_page(
            request,
            "new_memory.html",
            context,
            title="New memory",
            section="memories",
            status=http_status(exc),
            error=exc.message,
        )
    return see_other(f"/memories/{result['id']}", "remembered")
