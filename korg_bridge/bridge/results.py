"""What a client receives for one call: the MCP ``CallToolResult``.

Every outcome of a call becomes a result here - output with or without
``structuredContent``, output checked against a declared ``output_schema``,
and the error results for calls that could not start. A client that was
promised structure (an ``output_schema``) must get it or an error, never a
bare text result: the SDK's client, for one, raises on a success without
``structuredContent``.
"""

from __future__ import annotations

import errno
from typing import Any

import mcp_types as types
from jsonschema.exceptions import relevance

from korg_bridge.bridge.contract import CallableSpec, Document
from korg_bridge.bridge.output import CallResult
from korg_bridge.bridge.validation import validate
from korg_bridge.errors import ToolCallError

OUTPUT_CHECK_LIMIT = 10.0
"""Seconds checking a result against its ``output_schema`` may take (never more
than the call's timeout): output can be megabytes, so it gets more room than
arguments do."""


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def start_failure(document: Document, exc: OSError) -> str:
    """Why ``exec`` failed, and what to do about it."""
    binary = document.path or document.binary
    if exc.errno == errno.E2BIG:
        return (
            f"could not start {binary}: the command line is too long for the system "
            f"({exc.strerror or exc}). Pass less data in the arguments; nothing was run."
        )
    return f"could not start {binary}: {exc.strerror or exc}. Check that the binary still exists and is executable."


async def finish(spec: CallableSpec, result: CallResult, *, timeout: float) -> types.CallToolResult:
    """Text for every client; ``structuredContent`` for envelope objects; the output schema enforced.

    ``timeout`` is the call's: the output check never gets longer.
    """
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text)]
    if result.is_error:
        return types.CallToolResult(content=content, is_error=True)
    if spec.output_validator is not None:
        if result.structured is None:
            unstructured = result.details.get("unstructured")
            why = (
                f"printed a JSON object that cannot be returned as structured content ({unstructured})"
                if unstructured
                else "did not print a JSON object"
            )
            return error_result(f"{spec.command_id} declares an output_schema but {why}:\n{result.text}")
        try:
            problems = await output_problems(spec, result.structured, min(OUTPUT_CHECK_LIMIT, timeout))
        except ToolCallError as exc:
            return error_result(
                f"{spec.command_id} ran and exited 0, but its output could not be checked against "
                f"its output_schema: {exc.message}. The output, unchecked:\n{result.text}"
            )
        if problems:
            return error_result(
                f"{spec.command_id} printed output that does not match its output_schema: {problems}\n"
                f"{result.text}"
            )
    if result.structured is not None and spec.capabilities.output_mode == "envelope":
        return types.CallToolResult(content=content, structured_content=result.structured)
    return types.CallToolResult(content=content)


async def output_problems(spec: CallableSpec, value: dict[str, Any], time_limit: float) -> str:
    """The clearest violation of the output schema, or ``""``.

    Raises:
        ToolCallError: the check itself failed or took too long.
    """
    assert spec.output_validator is not None
    errors = await validate(
        spec.output_validator,
        value,
        time_limit=time_limit,
        subject="checking the output",
        schema_name="output_schema",
    )
    if not errors:
        return ""
    first = max(errors, key=relevance)
    where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first.message}{more}"
