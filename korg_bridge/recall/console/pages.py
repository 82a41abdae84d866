"""The console's HTML pages: server-rendered, each a plain GET or a form POST, so everything works
without JavaScript (``static/console.js`` only adds live updates, shortcuts and diff toggles).

Every page calls :class:`~.services.Console` and nothing below it. A form POST that changes
something answers ``303 See Other`` to the page it came from, with a fixed notice code in the
query (``?done=revised``): a reload never repeats the act and no stored text travels in a URL. A
refused act re-renders the page with the error and the person's input kept (``revise`` against a
version that moved on shows the newer version and keeps the draft, nothing overwritten).

This module holds the memory pages and gathers every page's route (:func:`routes`); the
remember form is :mod:`.remember_page`, the approval queue :mod:`.approval_pages`, History
:mod:`.history_pages`, the context preview and health :mod:`.insight_pages`, and what every
page shares :mod:`.render`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from korg_bridge.errors import KorgError, UsageError
from korg_bridge.recall.console.remember_page import tags_of
from korg_bridge.recall.console.render import (
    caller_of,
    console_of,
    error_page,
    form_of,
    render_page,
    see_other,
)
from korg_bridge.recall.console.services import MEMORY_STATES, SOURCES, Caller, Console, http_status
from korg_bridge.recall.memory.records import MEMORY_TYPES, check_id
from korg_bridge.recall.memory.review import REVIEW_AFTER_DAYS

__all__ = ["routes"]

SEARCH_MODES = ("auto", "keyword", "hybrid", "semantic")
SOURCE_LABELS = {
    "agent": "an agent",
    "user": "a person",
    "claude": "Claude Code folder",
    "import": "an import",
}


def _query(request: Request, **changes: str | None) -> str:
    """This page's query string with ``changes`` (None drops a name)."""
    params = {name: value for name, value in request.query_params.items() if name != "done"}
    for name, value in changes.items():
        if value is None:
            params.pop(name, None)
        else:
            params[name] = value
    return urlencode(params)


# --- memories -----------------------------------------------------------------------------------


SCOPES_KEPT_S = 10.0
"""How long the scope list of the filter form is reused: it is a ``GROUP BY`` over every memory,
and a scope an agent just opened may join the list a few seconds late. A write made in the
console (``Warm.generation``) drops it at once."""
_scopes_kept: dict[str, tuple[float, int, list[str]]] = {}
_scopes_lock = threading.Lock()


def _scopes(console: Console, caller: Caller) -> list[str]:
    """The scopes holding memories, for the filter form (kept for :data:`SCOPES_KEPT_S`)."""
    now, generation = time.monotonic(), console.warm.generation
    with _scopes_lock:
        kept = _scopes_kept.get(caller.warm_key)
    if kept is not None and kept[1] == generation and now - kept[0] < SCOPES_KEPT_S:
        return kept[2]
    found = [row["scope"] for row in console.scopes(caller)]
    with _scopes_lock:
        if len(_scopes_kept) > 64:  # one entry per tenant seen: bounded all the same
            _scopes_kept.clear()
        _scopes_kept[caller.warm_key] = (now, generation, found)
    return found


def _filters(request: Request) -> dict[str, str]:
    q = request.query_params
    return {
        "q": q.get("q", "").strip(),
        "mode": q.get("mode", "auto") if q.get("mode", "auto") in SEARCH_MODES else "auto",
        "scope": q.get("scope", ""),
        "type": q.get("type", ""),
        "state": q.get("state", "live"),
        "tag": q.get("tag", ""),
        "pinned": q.get("pinned", "") if q.get("pinned", "") in ("", "yes", "no") else "",
        "source": q.get("source", ""),
        "due": "1" if q.get("due") else "",
    }


def _hit_card(hit: Mapping[str, Any]) -> dict[str, Any]:
    breakdown = hit.get("breakdown") or {}
    return {
        **hit,
        "excerpt": hit.get("how") or "",
        "breakdown": breakdown if isinstance(breakdown, dict) else {},
    }


def memories_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    f = _filters(request)
    cursor = request.query_params.get("cursor") or None
    pinned = {"yes": True, "no": False}.get(f["pinned"])
    next_url = None
    pending: int | None = None  # the listing counts them; other views leave it to render_page
    try:
        scopes = _scopes(console, caller)
        if f["due"]:
            found = console.due_for_review(caller, cursor=cursor)
            cards, total = found["memories"], found["total"]
            summary = f"{total} due for review (not reviewed or changed for {found['days']} days)"
            next_cursor = found["next_cursor"]
        elif f["q"]:
            found = console.search_memories(
                caller,
                f["q"],
                mode=f["mode"],
                scope=f["scope"] or None,
                type=f["type"] or None,
                tag=f["tag"] or None,
            )
            cards = [_hit_card(hit) for hit in found["hits"]]
            summary = (
                f"{len(cards)} hit{'' if len(cards) == 1 else 's'} for the search, ranked by {found['mode']}"
            )
            next_cursor = None
        else:
            found = console.memories(
                caller,
                scope=f["scope"] or None,
                type=f["type"] or None,
                state=f["state"] or "live",
                tag=f["tag"] or None,
                pinned=pinned,
                source=f["source"] or None,
                cursor=cursor,
            )
            cards, total = found["memories"], found["total"]
            summary = f"{total} memor{'y' if total == 1 else 'ies'}"
            next_cursor = found["next_cursor"]
            pending = found.get("pending")
    except KorgError as exc:
        return error_page(request, exc)
    if next_cursor:
        next_url = f"/memories?{_query(request, cursor=next_cursor)}"
    first_url = f"/memories?{_query(request, cursor=None)}" if cursor else None
    context = {
        "f": f,
        "memories": cards,
        "summary": summary,
        "next_url": next_url,
        "first_url": first_url,
        "modes": SEARCH_MODES,
        "scopes": scopes,
        "types": MEMORY_TYPES,
        "states": MEMORY_STATES,
        "sources": [(value, SOURCE_LABELS.get(value, value)) for value in SOURCES],
        "review_days": REVIEW_AFTER_DAYS,
    }
    return render_page(
        request, "memories.html", context, title="Memories", section="memories", pending=pending
    )


REFS_RESOLVED = 10
"""History events a memory's page looks up to name the session each version came from."""


def _events_of(
    console: Console, caller: Caller, versions: list[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The history event behind each version's ``ref`` (session, agent, tool), where the index
    still holds it: a memory's writer is shown with the session it came from."""
    found: dict[str, dict[str, Any]] = {}
    refs = [str(v["ref"]) for v in versions if isinstance(v.get("ref"), str)]
    for ref in list(dict.fromkeys(refs))[:REFS_RESOLVED]:
        try:
            found[ref] = console.event(caller, ref)
        except KorgError:
            continue
    return found


def _provenance(
    version: Mapping[str, Any], events: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, str | None]]:
    """Where a version came from, as links into History (built from refs and session ids the
    index returned, never from stored text)."""
    out: list[dict[str, str | None]] = []
    ref = version.get("ref")
    if isinstance(ref, str):
        event = events.get(ref) or {}
        kind = event.get("kind") or "event"
        out.append({"label": f"{kind} {ref}", "href": f"/history/events/{ref}"})
        session = event.get("session")
        if isinstance(session, str) and session:
            out.append(
                {
                    "label": f"session {session[:8]}"
                    + (f" ({event['agent']})" if event.get("agent") else ""),
                    "href": f"/history/sessions/{quote(session, safe='')}#{ref}",
                }
            )
    return out


def _version_row(
    version: Mapping[str, Any], events: Mapping[str, Mapping[str, Any]], tools: Mapping[int, str]
) -> dict[str, Any]:
    """A version as the page shows it: with the tool that wrote it (its op-log entry: remember,
    revise, approve …) and where it came from."""
    return {
        **version,
        "tool": tools.get(int(version.get("version") or 0)),
        "provenance": _provenance(version, events),
    }


def _memory_context(
    console: Console, caller: Caller, memory_id: str, a: str | None, b: str | None
) -> dict[str, Any]:
    """Raises:
    KorgError: unknown id or version."""
    detail = console.memory(caller, memory_id)
    current = detail["current"]
    events = _events_of(console, caller, [*detail["versions"], current])
    tools: dict[int, str] = {}
    for op in detail["oplog"]:  # oldest first: the entry that made a version names its tool
        if isinstance(op.get("version"), int) and op.get("op"):
            tools.setdefault(op["version"], str(op["op"]))
    versions = [_version_row(v, events, tools) for v in detail["versions"]]
    numbers = [v["version"] for v in versions]
    diff: dict[str, Any] = {"a": None, "b": None, "parts": []}
    if len(numbers) > 1:
        old = int(a) if a and a.isdigit() else numbers[-2]
        new = int(b) if b and b.isdigit() else numbers[-1]
        answer = console.diff(caller, memory_id, old, new)
        parts = [
            ("same" if p["op"] == "equal" else "del" if p["op"] == "delete" else "ins", p["text"])
            for p in answer["body"]
        ]
        diff = {"a": old, "b": new, "parts": parts}
    source = current.get("source") if isinstance(current.get("source"), Mapping) else None
    state = current["state"]
    actions = {"revise", "pin", "review", "retire", "purge"} if state == "live" else set()
    if state == "retired":
        actions = {"restore", "purge"}
    elif state == "pending":
        actions = {"purge"}
    titles = {
        link["id"]: link.get("title") for link in detail["links"]["outgoing"] + detail["links"]["incoming"]
    }

    def link(item: Mapping[str, Any]) -> dict[str, Any]:
        return {"id": item["id"], "kind": item["kind"], "title": titles.get(item["id"]) or item["id"]}

    return {
        "m": {
            **_version_row(current, events, tools),
            "source_label": (source or {}).get("kind") or (source or {}).get("ref") or "",
            "reviewed_at": detail.get("reviewed_at"),
        },
        "versions": versions,
        "diff": diff,
        "links_out": [link(item) for item in detail["links"]["outgoing"]],
        "links_in": [link(item) for item in detail["links"]["incoming"]],
        "ops": [
            {
                "at": op.get("timestamp") or "",
                "op": op.get("op") or "",
                "status": op.get("status") or "",
                "actor": op.get("actor") or "",
                "version": op.get("version"),
            }
            for op in detail["oplog"]
        ],
        "actions": actions,
        "form": {
            "title": current["title"],
            "content": current["body"],
            "tags": ", ".join(current.get("tags") or []),
            "reason": "",
        },
        "conflict": None,
        "page": "memory",
    }


def memory_page(request: Request) -> Response:
    console, caller = console_of(request), caller_of(request)
    q = request.query_params
    try:
        context = _memory_context(console, caller, request.path_params["memory_id"], q.get("a"), q.get("b"))
    except KorgError as exc:
        return error_page(request, exc)
    return render_page(request, "memory.html", context, title=context["m"]["title"][:80], section="memories")


async def memory_action(request: Request) -> Response:
    """The POSTs of a memory's page: revise, pin, review, retire, restore, purge."""
    console, caller = console_of(request), caller_of(request)
    action = request.path_params["action"]
    form = await form_of(request)
    try:
        memory_id = check_id(request.path_params["memory_id"])
    except UsageError as exc:
        return error_page(request, exc)
    expected = form.get("expected_version", "")
    expected_version = int(expected) if expected.isdigit() else None
    try:
        if action == "revise":
            args: dict[str, Any] = {
                "id": memory_id,
                "content": form.get("content", ""),
                "set": {"title": form.get("title", "").strip(), "tags": tags_of(form.get("tags", ""))},
            }
            if not args["set"]["title"]:
                del args["set"]["title"]
            if form.get("reason", "").strip():
                args["reason"] = form["reason"].strip()
            if expected_version is not None:
                args["expected_version"] = expected_version
            named = [int(v) for v in form.get("resolves", "").split(",") if v.strip().isdigit()]
            if named:  # the page named the versions in conflict the person saw
                args["resolves"] = named
            result = await run_in_threadpool(console.revise, caller, args)
            done = "unchanged" if result.get("status") == "unchanged" else "revised"
        elif action == "pin":
            pinned = form.get("pinned") == "yes"
            await run_in_threadpool(console.pin, caller, memory_id, pinned, expected_version)
            done = "pinned" if pinned else "unpinned"
        elif action == "review":
            await run_in_threadpool(console.mark_reviewed, caller, memory_id)
            done = "reviewed"
        elif action == "retire":
            await run_in_threadpool(console.retire, caller, memory_id)
            done = "retired"
        elif action == "restore":
            await run_in_threadpool(console.restore, caller, memory_id)
            done = "restored"
        elif action == "purge":
            await run_in_threadpool(console.purge, caller, memory_id, form.get("confirm", ""))
            return see_other("/memories", "purged")
        else:
            return error_page(request, UsageError(f"no action {action!r} on a memory."))
    except KorgError as exc:
        return await run_in_threadpool(
            _refused, request, console, caller, memory_id, exc, form, expected_version
        )
    return see_other(f"/memories/{memory_id}", done)


def _refused(
    request: Request,
    console: Console,
    caller: Caller,
    memory_id: str,
    exc: KorgError,
    form: Mapping[str, Any],
    expected: int | None,
) -> Response:
    """The memory's page again with the refusal; a version that moved on is shown, the draft kept."""
    try:
        context = _memory_context(console, caller, memory_id, None, None)
    except KorgError:
        return error_page(request, exc)
    if "content" in form:
        context["form"] = {
            "title": form.get("title", ""),
            "content": form.get("content", ""),
            "tags": form.get("tags", ""),
            "reason": form.get("reason", ""),
        }
    current = context["m"]["version"]
    if expected is not None and expected != current:
        context["conflict"] = {"version": current, "expected": expected}
    return render_page(
        request,
        "memory.html",
        context,
        title=context["m"]["title"][:80],
        section="memories",
        status=http_status(exc) if context["conflict"] is None else 409,
        error=exc.message,
    )


def routes(console: Console) -> list[BaseRoute]:
    """Every page of the console (the app mounts the API, static files and metrics beside them);
    handlers find ``console`` as ``request.app.state.console``, the app's one :class:`Console`."""
    from korg_bridge.recall.console import approval_pages, history_pages, insight_pages, remember_page

    return [
        *history_pages.routes(),
        *insight_pages.routes(),
        Route("/", memories_page, methods=["GET"]),  # the home page is the memories list
        Route("/memories", memories_page, methods=["GET"]),
        Route("/memories/new", remember_page.new_memory_page, methods=["GET"]),
        Route("/memories/new", remember_page.new_memory_post, methods=["POST"]),
        Route("/memories/{memory_id}", memory_page, methods=["GET"]),
        Route("/memories/{memory_id}/{action}", memory_action, methods=["POST"]),
        Route("/approvals", approval_pages.approvals_page, methods=["GET"]),
        Route("/approvals", approval_pages.approvals_post, methods=["POST"]),
        Route("/approvals/{memory_id}/{action}", approval_pages.approvals_post, methods=["POST"]),
    ]
