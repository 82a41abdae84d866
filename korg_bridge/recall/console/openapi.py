"""``/api/openapi.json``: the OpenAPI 3.1 document of the REST API, built from :data:`.api.ENDPOINTS`
-- the same table the routes are made from, whose schemas are the ones the callables declare --
so it describes exactly what answers. OpenAPI 3.1 takes JSON Schema 2020-12 as is.
"""

from __future__ import annotations

import re
from typing import Any

from korg_bridge._version import __version__
from korg_bridge.recall.console.api import API_PREFIX, ENDPOINTS, Endpoint

__all__ = ["document"]

_ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}
_ERRORS = {
    "400": "Bad arguments (exit code 2): the message says what to pass.",
    "401": "Missing or wrong bearer token.",
    "403": "A request from another site, or a missing CSRF token.",
    "404": "No such memory, event or session.",
    "409": "The server's configuration refuses it (exit code 3), e.g. KORG_RECALL_WRITES=off.",
    "413": "The request body is over the limit.",
    "429": "Over this token's rate limit; see Retry-After.",
    "503": "The database cannot be reached (exit code 5), or the server is stopping.",
}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": schema}
        for name, schema in endpoint.path_params.items()
    ]
    params += [
        {"name": name, "in": "query", "required": name in endpoint.required_query, "schema": schema}
        for name, schema in endpoint.query.items()
    ]
    op: dict[str, Any] = {
        "operationId": endpoint.operation,
        "summary": endpoint.summary,
        "tags": [endpoint.tag],
        "responses": {
            str(endpoint.status): {
                "description": "The result, as the CLI's --json prints it.",
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            **{
                status: {
                    "description": text,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
                for status, text in _ERRORS.items()
            },
        },
    }
    if params:
        op["parameters"] = params
    if endpoint.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": endpoint.body}}}
    return op


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (plain JSON data)."""
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(API_PREFIX + endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint)
    paths[API_PREFIX + "/events"] = {
        "get": {
            "operationId": "events",
            "summary": "Live updates as server-sent events: memory, pending, events.",
            "tags": ["console"],
            "responses": {
                "200": {
                    "description": "An event stream.",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                }
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "korg-recall console API",
            "version": __version__,
            "description": (
                "What korg-recall serve offers a person, as JSON: memories, approvals, history, the "
                "session-start brief and health, over the same operations the CLI and MCP tools run."
            ),
        },
        "servers": [{"url": "/"}],
        "components": {
            "schemas": {"Error": _ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{}, {"bearer": []}],
        "paths": paths,
    }


def path_pattern(path: str) -> re.Pattern[str]:
    """A regular expression matching concrete paths of a templated one (for tests and metrics)."""
    return re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$")
