"""One tool call, start to finish: validate, gate, build argv, run, format.

The order matters: arguments are validated and the policy consulted before
anything is executed, so a refused call has no side effect at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from .argv import build_argv
from .contract import CallableSpec, Document
from .errors import ArgumentError, PolicyDenied
from .output import CallResult, build_result
from .policy import Policy
from .process import DEFAULT_OUTPUT_CAP, ChunkCallback, run_process

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds one call may run before its process group is terminated."""

MAX_REPORTED_VIOLATIONS = 20


def validate_arguments(spec: CallableSpec, arguments: Mapping[str, Any]) -> None:
    """Check arguments against the callable's ``input_schema``; defaults are not injected.

    Raises:
        ArgumentError: listing every violation with its JSON path, clearest first.
    """
    errors = list(spec.validator.iter_errors(dict(arguments)))
    if not errors:
        return
    first = best_match(errors)
    ordered = [first, *(e for e in errors if e is not first)] if first is not None else errors
    lines = [f"{_path(e)}: {e.message}" for e in ordered[:MAX_REPORTED_VIOLATIONS]]
    more = len(errors) - len(lines)
    suffix = f"; and {more} more" if more > 0 else ""
    raise ArgumentError(
        f"invalid arguments for {spec.command_id} ({len(errors)} violation(s), nothing was run): "
        + "; ".join(lines)
        + suffix
    )


def _path(error: ValidationError) -> str:
    out = "$"
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def resolve_callable(document: Document, command_id: str | CallableSpec) -> CallableSpec:
    """Raises: ArgumentError: no such callable in the document."""
    if isinstance(command_id, CallableSpec):
        return command_id
    spec = document.get(command_id)
    if spec is None:
        raise ArgumentError(f"unknown command_id {command_id!r}; known: {', '.join(document_ids(document))}.")
    return spec


def document_ids(document: Document) -> list[str]:
    return [c.command_id for c in document.callables]


def prepare_call(
    document: Document,
    spec: CallableSpec,
    arguments: Mapping[str, Any] | None,
    policy: Policy,
) -> list[str]:
    """Everything that can refuse a call without running it; returns the argv.

    Raises:
        PolicyDenied: the side effect is not allowed, or the callable is a session.
        ArgumentError: the arguments fail the schema or cannot be argv.
    """
    decision = policy.check(spec)
    if not decision.allowed:
        raise PolicyDenied(decision.reason)
    args = dict(arguments or {})
    validate_arguments(spec, args)
    return build_argv(document, spec, args)


async def invoke(
    document: Document,
    command_id: str | CallableSpec,
    arguments: Mapping[str, Any] | None = None,
    *,
    policy: Policy | None = None,
    timeout: float = DEFAULT_CALL_TIMEOUT,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    on_stdout: ChunkCallback | None = None,
) -> CallResult:
    """Run one callable of a discovered binary and format its output.

    ``policy`` defaults to the one ``KORG_INTROSPECT_MCP_ALLOW`` describes, so
    a library caller is as safe by default as the server.

    Raises:
        PolicyDenied: refused by the policy (nothing ran).
        ArgumentError: invalid arguments or unknown callable (nothing ran).
        OSError: the executable could not be started.
    """
    spec = resolve_callable(document, command_id)
    argv = prepare_call(document, spec, arguments, policy if policy is not None else Policy.from_env())
    log.debug("running %s", argv)
    result = await run_process(
        argv,
        timeout=timeout,
        stdout_cap=output_cap,
        stderr_cap=output_cap,
        env=env,
        cwd=cwd,
        on_stdout=on_stdout,
    )
    code = result.returncode
    return build_result(
        result,
        output_mode=spec.capabilities.output_mode,
        exit_meaning=document.exit_meaning(code) if code is not None else "unknown",
        timeout=timeout,
    )
