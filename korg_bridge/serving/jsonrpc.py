"""What to answer a message that is not a valid JSON-RPC message, on any transport.

The SDK logs a stdio line it cannot parse and answers nothing, so a client
whose request was garbled waits forever; over HTTP it answers, but with
``INVALID_PARAMS`` and never the request's id. JSON-RPC 2.0 says: ``-32700``
Parse error for text that is not JSON, ``-32600`` Invalid Request for JSON
that is not a request, each with the request's ``id`` when it can be told,
else ``null``. So every message passes :func:`parse_message` first; what
comes back is either the SDK's own message object (valid input, parsed
exactly as the SDK parses it) or a :class:`Rejection` carrying the answer.

Cases that need care:

- Batches (a JSON array) were removed from MCP: one ``-32600``, id ``null``.
- Numbers Python refuses (an integer of more than 4,300 digits) and
  ``NaN``/``Infinity`` are not JSON a peer can rely on: ``-32700``.
- Truncated JSON: the id is recovered, when it appears whole, by a regex
  with bounded repetitions (:data:`_ID`).
- A request whose ``id`` is neither a string nor an integer (``true``,
  ``1.5``, ``null``) would pass the SDK's parser as a *notification*, which
  is never answered: it is an Invalid Request.
- A malformed *response* is not answered over stdio: answering a response
  could start two peers echoing errors at each other.

Over HTTP, :class:`BodyCheck` applies the same to request bodies.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from pydantic import ValidationError

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Largest message accepted on stdio, the same as the SDK's HTTP body limit:
one line is one message, and a line is never buffered beyond this."""

_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,19}(?=\s*[,}])|"(?:[^"\\\n]|\\.){0,256}")')
"""A request id in text that is not JSON (truncated, or broken further on):
an integer followed by a delimiter (so a cut-off ``12`` of ``123`` is not
taken), or a short string. Bounded repetitions keep it linear."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A message that cannot be served, and the JSON-RPC error that answers it."""

    code: int
    message: str
    id: int | str | None = None
    answer: bool = True
    """False for a malformed response: nothing is waiting for an answer to it."""

    def response(self) -> types.JSONRPCError:
        return types.JSONRPCError(
            jsonrpc="2.0", id=self.id, error=types.ErrorData(code=self.code, message=self.message)
        )

    def body(self) -> bytes:
        """The error response as JSON, for transports that write bytes."""
        return self.response().model_dump_json(by_alias=True, exclude_unset=True).encode()


def parse_message(raw: bytes) -> types.JSONRPCMessage | Rejection:
    """The SDK's message object for ``raw``, or the error that answers it.

    Never raises: every way ``raw`` can be wrong is a :class:`Rejection`.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _parse_error(f"the message is not UTF-8 (byte {exc.start})", raw)
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        return _parse_error(f"{exc.msg} (line {exc.lineno}, column {exc.colno})", raw)
    except RecursionError:
        return _parse_error("the JSON is nested too deeply", raw)
    except ValueError as exc:  # an integer over the 4,300-digit limit, NaN, Infinity
        return _parse_error(str(exc).split(";")[0].split(":")[0], raw)
    if isinstance(value, list):
        return Rejection(
            types.INVALID_REQUEST,
            "Invalid Request: batches (JSON arrays) are not supported by MCP; send one message at a time",
        )
    if not isinstance(value, dict):
        return Rejection(
            types.INVALID_REQUEST, f"Invalid Request: expected a JSON-RPC object, got {_kind(value)}"
        )
    request_id = _usable_id(value.get("id"))
    try:
        message = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            return _parse_error("the JSON is not valid (a lone surrogate, or nested too deeply)", raw)
        looks_like_response = "method" not in value and ("result" in value or "error" in value)
        return Rejection(
            types.INVALID_REQUEST,
            f"Invalid Request: {_what_is_wrong(value)}",
            request_id,
            answer=not looks_like_response,
        )
    if isinstance(message, types.JSONRPCNotification) and "id" in value:
        # Parsed as a notification only because the id is unusable: nobody would answer it.
        return Rejection(types.INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    return message


def oversized(head: bytes, limit: int = MAX_MESSAGE_BYTES) -> Rejection:
    """The answer to a message over ``limit`` bytes, of which ``head`` was kept."""
    return Rejection(
        types.INVALID_REQUEST,
        f"Invalid Request: the message is larger than {limit // (1024 * 1024)} MiB and was discarded",
        _recover_id(head),
    )


def _parse_error(reason: str, raw: bytes) -> Rejection:
    return Rejection(types.PARSE_ERROR, f"Parse error: {reason}", _recover_id(raw))


def _recover_id(raw: bytes) -> int | str | None:
    match = _ID.search(raw)
    if match is None:
        return None
    try:
        return _usable_id(json.loads(match.group(1)))
    except ValueError:  # a bad escape inside the string
        return None


def _usable_id(value: Any) -> int | str | None:
    """An id we can echo: MCP ids are strings or integers (never booleans)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", str: "a string", int: "a number", float: "a number"}.get(
        type(value), "a value"
    )


def _what_is_wrong(value: dict[str, Any]) -> str:
    """The first thing a human would fix, in JSON-RPC's terms."""
    if value.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if "method" in value:
        if not isinstance(value["method"], str):
            return '"method" must be a string'
        if "id" in value and _usable_id(value["id"]) is None:
            return '"id" must be a string or an integer'
        if value.get("params") is not None and not isinstance(value["params"], dict):
            return '"params" must be an object'
        return "not a valid request or notification"
    if "result" in value or "error" in value:
        return "not a valid response"
    return 'no "method": not a request or notification'


class BodyCheck:
    """ASGI middleware for POSTs to the MCP endpoint: a body that is not a valid
    JSON-RPC message is answered 400 with the JSON-RPC error; everything else
    reaches the SDK's app unchanged, the body replayed.

    The SDK's own checks that come before it reads a body (Host, Origin,
    Content-Type, the size limit) keep deciding first: such requests pass
    straight through, and get the SDK's answer.
    """

    def __init__(
        self, app: ASGIApp, *, path: str, security: TransportSecuritySettings, max_body_bytes: int
    ) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app = app
        self.path = path
        self.max_body_bytes = max_body_bytes
        self._security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request

        request = Request(scope)
        declared = request.headers.get("content-length", "")
        if await self._security.validate_request(request, is_post=True) is not None or (
            declared.isdigit() and int(declared) > self.max_body_bytes
        ):
            await self.app(scope, receive, send)
            return
        body, replay = await self._read(receive)
        if replay is None:
            parsed = parse_message(body)
            if isinstance(parsed, Rejection):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": parsed.body()})
                return
            replay = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> Message:
            return replay.pop(0) if replay else await receive()

        await self.app(scope, replayed, send)

    async def _read(self, receive: Receive) -> tuple[bytes, list[Message] | None]:
        """The whole body, or, when it is over the limit or the client left, what
        was read as messages to replay (the SDK answers those cases itself)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"", [{"type": "http.request", "body": b"".join(chunks), "more_body": True}, message]
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            more = bool(message.get("more_body", False))
            if size > self.max_body_bytes:
                return b"", [{"type": "http.request", "body": b"".join(chunks), "more_body": more}]
            if not more:
                return b"".join(chunks), None
