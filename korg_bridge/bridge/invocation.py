"""One tool call, start to finish: gate, coerce, validate, build argv, run, format.

The order matters: the policy is consulted and the arguments checked before
anything is executed, so a refused call has no side effect at all. Everything
that can refuse a call lives in :func:`prepare_call`, which the server runs
before it starts anything else (progress forwarding, the process), so a
refusal is always a plain tool error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from korg_bridge.bridge.advice import report, summary
from korg_bridge.bridge.argv import build_argv, check_command_line
from korg_bridge.bridge.coercion import coerce_arguments
from korg_bridge.bridge.contract import MAX_DEPTH, CallableSpec, Document, json_depth_exceeds
from korg_bridge.bridge.output import CallResult, build_result
from korg_bridge.bridge.policy import Policy
from korg_bridge.bridge.process import DEFAULT_OUTPUT_CAP, ChunkCallback, run_process
from korg_bridge.bridge.validation import VALIDATION_TIME_LIMIT, validate
from korg_bridge.errors import ArgumentError, PolicyDenied

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 300.0
"""Seconds one call may run before its process group is terminated."""


class CallOptions(TypedDict, total=False):
    """How one call runs, once it is allowed (:func:`invoke`, :func:`run_prepared`)."""

    timeout: float
    """Seconds the process may run (default :data:`DEFAULT_CALL_TIMEOUT`); also bounds validation."""
    output_cap: int
    """Bytes kept of stdout and of stderr each (default :data:`~korg_bridge.bridge.process.DEFAULT_OUTPUT_CAP`)."""
    env: Mapping[str, str] | None
    cwd: str | None
    on_stdout: ChunkCallback | None
    """Called with each chunk of stdout as it arrives (progress forwarding)."""


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """A call that passed every check: what will run, and the arguments as validated."""

    spec: CallableSpec
    arguments: dict[str, Any]
    """After coercion: what was validated, what the audit records, what argv holds."""
    argv: list[str]


async def validate_arguments(
    spec: CallableSpec, arguments: Mapping[str, Any], *, time_limit: float = VALIDATION_TIME_LIMIT
) -> None:
    """Check arguments against the callable's ``input_schema`` (defaults are not injected),
    and that each one is declared, off the event loop and within ``time_limit`` seconds.

    Raises:
        ArgumentError: every problem in one message, the clearest first;
            or validation took too long or could not be done.
    """
    if json_depth_exceeds(dict(arguments), MAX_DEPTH):
        # Checked here, iteratively: validating such a value would recurse past Python's limit.
        raise ArgumentError(
            f"the arguments for {spec.command_id} are nested deeper than {MAX_DEPTH} levels; "
            "flatten them. Nothing was run."
        )
    try:
        errors = await validate(spec.validator, dict(arguments), time_limit=time_limit)
    except ArgumentError as exc:
        raise ArgumentError(
            f"cannot check the arguments for {spec.command_id}: {exc.message}; nothing was run"
        ) from exc
    known = list(spec.properties)
    unknown = [name for name in arguments if name not in spec.properties]
    if not errors and not unknown:
        return
    raise ArgumentError(
        f"invalid arguments for {spec.command_id} (nothing was run): "
        + summary(report(errors, unknown, known))
    )


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


async def prepare_call(
    document: Document,
    spec: CallableSpec,
    arguments: Mapping[str, Any] | None,
    policy: Policy,
    *,
    env: Mapping[str, str] | None = None,
    time_limit: float = VALIDATION_TIME_LIMIT,
) -> PreparedCall:
    """Everything that can refuse a call without running it.

    Raises:
        PolicyDenied: the side effect is not allowed, or the callable is a session.
        ArgumentError: the arguments fail the schema, are undeclared, or cannot
            be argv (NUL, too long for the system).
    """
    decision = policy.check(spec)
    if not decision.allowed:
        raise PolicyDenied(decision.reason)
    args = coerce_arguments(spec.properties, arguments)
    await validate_arguments(spec, args, time_limit=time_limit)
    argv = build_argv(document, spec, args)
    check_command_line(argv, env)
    return PreparedCall(spec, args, argv)


async def run_prepared(
    document: Document,
    prepared: PreparedCall,
    *,
    timeout: float = DEFAULT_CALL_TIMEOUT,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    on_stdout: ChunkCallback | None = None,
) -> CallResult:
    """Run a prepared call and format its output.

    Raises:
        OSError: the executable could not be started.
    """
    log.debug("running %s", prepared.argv)
    result = await run_process(
        prepared.argv,
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
        output_mode=prepared.spec.capabilities.output_mode,
        exit_meaning=document.exit_meaning(code) if code is not None else "unknown",
        timeout=timeout,
    )


async def invoke(
    document: Document,
    command_id: str | CallableSpec,
    arguments: Mapping[str, Any] | None = None,
    *,
    policy: Policy | None = None,
    **options: Unpack[CallOptions],
) -> CallResult:
    """Run one callable of a discovered binary and format its output.

    ``policy`` defaults to the one ``KORG_INTROSPECT_MCP_ALLOW`` describes, so
    a library caller is as safe by default as the server. ``options``
    (:class:`CallOptions`): ``timeout``, ``output_cap``, ``env``, ``cwd``, ``on_stdout``.

    Raises:
        PolicyDenied: refused by the policy (nothing ran).
        ArgumentError: invalid arguments or unknown callable (nothing ran).
        OSError: the executable could not be started.
    """
    spec = resolve_callable(document, command_id)
    prepared = await prepare_call(
        document,
        spec,
        arguments,
        policy if policy is not None else Policy.from_env(),
        env=options.get("env"),
        time_limit=min(VALIDATION_TIME_LIMIT, options.get("timeout", DEFAULT_CALL_TIMEOUT)),
    )
    return await run_prepared(document, prepared, **options)
