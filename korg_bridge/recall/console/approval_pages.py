"""The approval queue: writes held by ``KORG_RECALL_WRITES=confirm``, approved, rejected or
edited then approved -- one (``/approvals/ID/ACT``) or the checked ones together -- as the
person (:meth:`~.services.Console.approve` and friends: actor ``user``, or the token's).
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from korg_bridge.errors import KorgError, UsageError
from korg_bridge.recall.console.render import (
    caller_of,
    console_of,
    error_page,
    form_of,
    render_page,
    see_other,
)
from korg_bridge.recall.console.services import http_status

__all__ = ["approvals_page", "approvals_post"]


def approvals_page(request: Request, error: str | None = None, status: int = 200) -> Response:
    console, caller = console_of(request), caller_of(request)
    try:
        found = console.pending(caller, cursor=request.query_params.get("cursor") or None)
    except KorgError as exc:
        return error_page(request, exc, section="approvals")
    pending = [{**item, "previous": (item.get("before") or {}).get("version")} for item in found["memories"]]
    return render_page(
        request,
        "approvals.html",
        {"pending": pending, "page": "approvals"},
        title="Approvals",
        section="approvals",
        error=error,
        status=status,
    )


async def approvals_post(request: Request) -> Response:
    """Approve, reject or edit-then-approve: one (``/approvals/ID/ACT``) or the checked ones."""
    console, caller = console_of(request), caller_of(request)
    form = await form_of(request)
    one = request.path_params.get("memory_id")
    action = request.path_params.get("action") or form.get("action", "")
    ids = [one] if one else form["ids"]
    try:
        if not ids:
            raise UsageError("select at least one write to approve or reject.")
        if action == "approve":
            await run_in_threadpool(console.approve, caller, ids)
        elif action == "reject":
            await run_in_threadpool(console.reject, caller, ids)
        elif action == "edit" and one:
            edit: dict[str, Any] = {"content": form.get("content", "")}
            if form.get("title", "").strip():
                edit["set"] = {"title": form["title"].strip()}
            await run_in_threadpool(console.edit_and_approve, caller, one, edit)
            action = "approve"
        else:
            raise UsageError(f"no action {action!r} on approvals: approve, reject or edit.")
    except KorgError as exc:
        return await run_in_threadpool(approvals_page, request, exc.message, http_status(exc))
    return see_other("/approvals", "approved" if action == "approve" else "rejected")
