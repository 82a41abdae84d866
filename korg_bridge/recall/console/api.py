"""The REST API under ``/api/v1``: every act of the console as JSON, over :class:`~.services.Console`.

Each route is declared once in :data:`ENDPOINTS` -- method, path, query parameters and body as
JSON Schema, taken from the schemas the callables declare in :mod:`korg_bridge.recall.cli`
(``remember``'s body *is* ``REMEMBER_SCHEMA``) -- and :mod:`.openapi` builds the OpenAPI document
from the same table, so the document and the routes cannot drift.

Arguments are checked against those schemas as the MCP tools' are (the clearest violation named),
then by the operations themselves, with the CLI's messages. Errors are
``{"error": {"code", "message"}}`` with the HTTP status of the error's exit code
(:func:`~.services.http_status`); lists page with ``cursor``/``next_cursor``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from korg_bridge.auth.identity import SCOPE_KEY
from korg_bridge.config import OFF_WORDS, ON_WORDS
from korg_bridge.errors import KorgError, UsageError
from korg_bridge.recall.cli.memory import MEMORIES_SCHEMA, REMEMBER_SCHEMA, REVISE_SCHEMA
from korg_bridge.recall.cli.schemas import CONTEXT_SCHEMA, RECALL_SCHEMA
from korg_bridge.recall.console.services import MEMORY_STATES, SOURCES, Caller, Console, http_status

__all__ = ["API_PREFIX", "ENDPOINTS", "Endpoint", "caller_of", "routes"]

API_PREFIX = "/api/v1"

Handler = Callable[[Console, Caller, dict[str, Any]], Any]

_ID = {
    "type": "string",
    "pattern": "^m[a-z2-7]{10}$",
    "description": "A memory id (m and 10 base32 characters).",
}
_REF = {"type": "string", "pattern": "^e[0-9]{1,18}$", "description": "An event ref from history (e123)."}
_CURSOR = {"type": "string", "maxLength": 12, "description": "next_cursor of the previous page."}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 200, "default": 50, "description": "Items per page."}
_IDS = {"type": "array", "items": _ID, "minItems": 1, "maxItems": 100}
_MEMORY = MEMORIES_SCHEMA["properties"]
_RECALL = RECALL_SCHEMA["properties"]


def _without(schema: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """``schema`` minus properties the path carries (``revise``'s id is the URL's)."""
    props = {k: v for k, v in schema["properties"].items() if k not in names}
    required = [r for r in schema.get("required", []) if r not in names]
    return (
        {**schema, "properties": props, "required": required}
        if required
        else {k: v for k, v in {**schema, "properties": props}.items() if k != "required"}
    )


@dataclass(frozen=True)
class Endpoint:
    """One route of the API, as the OpenAPI document describes it."""

    method: str
    path: str
    """Under :data:`API_PREFIX`; ``{name}`` segments are path parameters (declared in ``path_params``)."""
    operation: str
    summary: str
    handler: Handler
    query: dict[str, Any] = field(default_factory=dict)
    path_params: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    status: int = 200
    tag: str = "memories"
    required_query: tuple[str, ...] = ()


def _memories(c: Console, who: Caller, a: dict[str, Any]) -> Any:
    return c.memories(
        who,
        scope=a.get("scope"),
        type=a.get("type"),
        state=a.get("state", "live"),
        tag=a.get("tag"),
        pinned=a.get("pinned"),
        source=a.get("source"),
        cursor=a.get("cursor"),
        limit=a.get("limit", 50),
    )


def _search_memories(c: Console, who: Caller, a: dict[str, Any]) -> Any:
    return c.search_memories(
        who,
        a["q"],
        mode=a.get("mode", "auto"),
        scope=a.get("scope"),
        type=a.get("type"),
        tag=a.get("tag"),
        top_n=a.get("top_n", 20),
    )


def _search_history(c: Console, who: Caller, a: dict[str, Any]) -> Any:
    return c.search_history(
        who,
        a["q"],
        mode=a.get("mode", "auto"),
        project=a.get("project"),
        agent=a.get("agent"),
        tool=a.get("tool"),
        since=a.get("since"),
        until=a.get("until"),
        top_n=a.get("top_n", 20),
    )


def _revise(c: Console, who: Caller, a: dict[str, Any]) -> Any:
    body = dict(a["body"])
    body["id"] = a["id"]
    return c.revise(who, body)


def _status(c: Console, who: Caller, a: dict[str, Any]) -> Any:
    return {"pending": c.pending_count(who), "tenant": who.tenant, "actor": who.actor}


_PIN_BODY = {
    "type": "object",
    "properties": {
        "pinned": {"type": "boolean", "description": "True to pin, false to unpin."},
        "expected_version": REVISE_SCHEMA["properties"]["expected_version"],
    },
    "required": ["pinned"],
    "additionalProperties": False,
}
_PURGE_BODY = {
    "type": "object",
    "properties": {"confirm": {"type": "string", "description": "The memory's id, typed again."}},
    "required": ["confirm"],
    "additionalProperties": False,
}
_IDS_BODY = {
    "type": "object",
    "properties": {"ids": _IDS},
    "required": ["ids"],
    "additionalProperties": False,
}
_EDIT_BODY = {
    "type": "object",
    "properties": {k: REVISE_SCHEMA["properties"][k] for k in ("content", "set", "reason")},
    "additionalProperties": False,
}

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "GET",
        "/status",
        "status",
        "Who is acting, and how many writes await approval.",
        _status,
        tag="console",
    ),
    Endpoint(
        "GET",
        "/memories",
        "listMemories",
        "Memories, filtered; pinned first, newest first.",
        _memories,
        query={
            "scope": _MEMORY["scope"],
            "type": _MEMORY["type"],
            "state": {"type": "string", "enum": list(MEMORY_STATES), "default": "live"},
            "tag": _MEMORY["tag"],
            "pinned": {"type": "boolean"},
            "source": {"type": "string", "enum": list(SOURCES), "description": "Who wrote it."},
            "cursor": _CURSOR,
            "limit": _LIMIT,
        },
    ),
    Endpoint(
        "GET",
        "/memories/search",
        "searchMemories",
        "Search memories; each hit with its score breakdown.",
        _search_memories,
        query={
            "q": _RECALL["query"],
            "mode": {"type": "string", "enum": ["auto", "keyword", "hybrid", "semantic"]},
            "scope": _MEMORY["scope"],
            "type": _MEMORY["type"],
            "tag": _MEMORY["tag"],
            "top_n": {**_RECALL["top_n"], "default": 20, "maximum": 100},
        },
        required_query=("q",),
    ),
    Endpoint(
        "POST",
        "/memories",
        "remember",
        "Remember a memory (as korg-recall remember).",
        lambda c, who, a: c.remember(who, a["body"]),
        body=REMEMBER_SCHEMA,
        status=201,
    ),
    Endpoint(
        "GET",
        "/memories/scopes",
        "listScopes",
        "Scopes holding memories, with counts.",
        lambda c, who, a: {"scopes": c.scopes(who)},
    ),
    Endpoint(
        "GET",
        "/memories/due",
        "dueForReview",
        "Memories neither changed nor reviewed for a long time.",
        lambda c, who, a: c.due_for_review(who, cursor=a.get("cursor"), limit=a.get("limit", 50)),
        query={"cursor": _CURSOR, "limit": _LIMIT},
    ),
    Endpoint(
        "GET",
        "/memories/{id}",
        "getMemory",
        "A memory: every version, links both ways, op-log entries.",
        lambda c, who, a: c.memory(who, a["id"]),
        path_params={"id": _ID},
    ),
    Endpoint(
        "GET",
        "/memories/{id}/diff",
        "diffMemory",
        "A word-level diff between two versions.",
        lambda c, who, a: c.diff(who, a["id"], a["old"], a["new"]),
        path_params={"id": _ID},
        query={"old": {"type": "integer", "minimum": 1}, "new": {"type": "integer", "minimum": 1}},
        required_query=("old", "new"),
    ),
    Endpoint(
        "POST",
        "/memories/{id}/revise",
        "revise",
        "Revise (as korg-recall revise); pass expected_version: a newer version is refused, not overwritten.",
        _revise,
        path_params={"id": _ID},
        body=_without(REVISE_SCHEMA, "id"),
    ),
    Endpoint(
        "POST",
        "/memories/{id}/pin",
        "pin",
        "Pin or unpin.",
        lambda c, who, a: c.pin(who, a["id"], a["body"]["pinned"], a["body"].get("expected_version")),
        path_params={"id": _ID},
        body=_PIN_BODY,
    ),
    Endpoint(
        "POST",
        "/memories/{id}/retire",
        "retire",
        "Retire (hidden, restorable).",
        lambda c, who, a: c.retire(who, a["id"]),
        path_params={"id": _ID},
    ),
    Endpoint(
        "POST",
        "/memories/{id}/restore",
        "restore",
        "Restore a retired memory.",
        lambda c, who, a: c.restore(who, a["id"]),
        path_params={"id": _ID},
    ),
    Endpoint(
        "POST",
        "/memories/{id}/review",
        "markReviewed",
        "Mark as reviewed.",
        lambda c, who, a: c.mark_reviewed(who, a["id"]),
        path_params={"id": _ID},
    ),
    Endpoint(
        "DELETE",
        "/memories/{id}",
        "purge",
        "Purge for good; confirm carries the id typed again.",
        lambda c, who, a: c.purge(who, a["id"], a["body"]["confirm"]),
        path_params={"id": _ID},
        body=_PURGE_BODY,
    ),
    Endpoint(
        "GET",
        "/approvals",
        "listApprovals",
        "Writes held by KORG_RECALL_WRITES=confirm.",
        lambda c, who, a: c.pending(who, cursor=a.get("cursor"), limit=a.get("limit", 50)),
        query={"cursor": _CURSOR, "limit": _LIMIT},
        tag="approvals",
    ),
    Endpoint(
        "POST",
        "/approvals/approve",
        "approve",
        "Approve proposals (all or none), recorded with your actor.",
        lambda c, who, a: c.approve(who, a["body"]["ids"]),
        body=_IDS_BODY,
        tag="approvals",
    ),
    Endpoint(
        "POST",
        "/approvals/reject",
        "reject",
        "Reject proposals (all or none).",
        lambda c, who, a: c.reject(who, a["body"]["ids"]),
        body=_IDS_BODY,
        tag="approvals",
    ),
    Endpoint(
        "POST",
        "/approvals/{id}/edit",
        "editAndApprove",
        "Approve a proposal, then revise it with your edit.",
        lambda c, who, a: c.edit_and_approve(who, a["id"], a["body"]),
        path_params={"id": _ID},
        body=_EDIT_BODY,
        tag="approvals",
    ),
    Endpoint(
        "GET",
        "/history/projects",
        "listProjects",
        "Projects with history.",
        lambda c, who, a: {"projects": c.projects(who)},
        tag="history",
    ),
    Endpoint(
        "GET",
        "/history/sessions",
        "listSessions",
        "Sessions, newest first.",
        lambda c, who, a: c.sessions(
            who, project=a.get("project"), cursor=a.get("cursor"), limit=a.get("limit", 50)
        ),
        query={"project": {"type": "string", "maxLength": 4096}, "cursor": _CURSOR, "limit": _LIMIT},
        tag="history",
    ),
    Endpoint(
        "GET",
        "/history/sessions/{session}",
        "getTimeline",
        "A session's timeline.",
        lambda c, who, a: c.timeline(who, a["session"], cursor=a.get("cursor"), limit=a.get("limit", 100)),
        path_params={"session": {"type": "string", "maxLength": 512}},
        query={"cursor": _CURSOR, "limit": {**_LIMIT, "maximum": 500, "default": 100}},
        tag="history",
    ),
    Endpoint(
        "GET",
        "/history/events/{ref}",
        "getEvent",
        "One event in full.",
        lambda c, who, a: c.event(who, a["ref"]),
        path_params={"ref": _REF},
        tag="history",
    ),
    Endpoint(
        "GET",
        "/history/events/{ref}/draft",
        "rememberDraft",
        "A new memory prefilled from an event.",
        lambda c, who, a: c.remember_draft(who, a["ref"]),
        path_params={"ref": _REF},
        tag="history",
    ),
    Endpoint(
        "GET",
        "/history/search",
        "searchHistory",
        "Search history; each hit with its score breakdown.",
        _search_history,
        query={
            "q": _RECALL["query"],
            "mode": _RECALL["mode"],
            "project": _RECALL["project"],
            "agent": {"type": "string", "maxLength": 200},
            "tool": {"type": "string", "maxLength": 200},
            "since": _RECALL["since"],
            "until": _RECALL["until"],
            "top_n": {**_RECALL["top_n"], "default": 20, "maximum": 100},
        },
        required_query=("q",),
        tag="history",
    ),
    Endpoint(
        "GET",
        "/context",
        "contextPreview",
        "The session-start brief the hook would inject now.",
        lambda c, who, a: c.context_preview(who, a.get("project"), a.get("budget")),
        query={
            "project": CONTEXT_SCHEMA["properties"]["project"],
            "budget": CONTEXT_SCHEMA["properties"]["budget"],
        },
        tag="context",
    ),
    Endpoint(
        "GET",
        "/health",
        "health",
        "Index, store and op-log health.",
        lambda c, who, a: c.health(who),
        tag="health",
    ),
)


def caller_of(request: Request) -> Caller:
    """The caller the auth gate found for ``request``."""
    return Caller.of(request.scope.get(SCOPE_KEY))


def _convert(name: str, schema: Mapping[str, Any], raw: str) -> Any:
    kind = schema.get("type")
    if kind == "integer":
        if not raw.strip().lstrip("-").isdigit():
            raise UsageError(f"{name} must be a whole number, got {raw[:40]!r}.")
        return int(raw)
    if kind == "boolean":
        if raw.strip().lower() in ON_WORDS:  # the words every yes/no setting takes
            return True
        if raw.strip().lower() in OFF_WORDS:
            return False
        raise UsageError(f"{name} must be true or false, got {raw[:40]!r}.")
    return raw


def _check(schema: Mapping[str, Any], value: Any, what: str) -> None:
    """Raises:
    UsageError: ``value`` fails ``schema`` (the clearest violation named)."""
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise UsageError(f"invalid {what}{' at ' + where if where else ''}: {error.message}")


async def _arguments(endpoint: Endpoint, request: Request) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, schema in endpoint.path_params.items():
        value = _convert(name, schema, str(request.path_params[name]))
        _check(schema, value, name)
        args[name] = value
    unknown = sorted(set(request.query_params) - set(endpoint.query))
    if unknown:
        raise UsageError(
            f"unknown query parameter {unknown[0]!r}: this route takes {', '.join(endpoint.query) or 'none'}."
        )
    for name, schema in endpoint.query.items():
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            if name in endpoint.required_query:
                raise UsageError(f"the query parameter {name} is required.")
            continue
        value = _convert(name, schema, raw)
        _check(schema, value, name)
        args[name] = value
    if endpoint.body is not None:
        raw_body = await request.body()
        try:
            body = json.loads(raw_body) if raw_body.strip() else {}
        except ValueError as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
            raise UsageError(f"the request body is not JSON ({why}); send a JSON object.") from exc
        if not isinstance(body, dict):
            raise UsageError("the request body must be a JSON object.")
        _check(endpoint.body, body, "body")
        args["body"] = body
    return args


def error_json(exc: KorgError) -> JSONResponse:
    status = http_status(exc)
    code = {
        400: "bad_request",
        404: "not_found",
        409: "conflict",
        501: "dependency_missing",
        503: "unavailable",
    }
    return JSONResponse(
        {"error": {"code": code.get(status, "error"), "message": exc.message}}, status_code=status
    )


def _route(console: Console, endpoint: Endpoint) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        try:
            args = await _arguments(endpoint, request)
            caller = caller_of(request)
            result = await console.warm.call(caller.warm_key, lambda: endpoint.handler(console, caller, args))
        except KorgError as exc:
            return error_json(exc)
        return JSONResponse(result, status_code=endpoint.status)

    handle.__name__ = endpoint.operation
    return handle


def routes(console: Console) -> list[Route]:
    """The API's routes (more specific paths first, as Starlette matches in order)."""
    ordered = sorted(ENDPOINTS, key=lambda e: ("{" in e.path, -e.path.count("/")))
    return [
        Route(API_PREFIX + e.path, _route(console, e), methods=[e.method], name=e.operation) for e in ordered
    ]
