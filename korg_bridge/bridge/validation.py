"""JSON Schema validation that can neither crash nor block the bridge.

A binary's schemas and an agent's arguments are both untrusted, and
jsonschema as it comes can be turned against the server: a pattern Python
cannot compile aborts startup, ``^(a+)+$`` holds the GIL for minutes, a
``$ref`` cycle recurses until ``RecursionError``, a remote ``$ref`` is fetched
over the network with no timeout. So:

* **At discovery** (:func:`compile_schema`) each schema is checked against its
  metaschema, then walked iteratively (no recursion on hostile depth): every
  ``pattern`` and ``patternProperties`` key is compiled with the bounded
  engines of :mod:`korg_bridge.bridge.patterns`, every ``$ref`` resolved (only
  within the schema and the standard metaschemas: nothing is fetched), and a
  ``$ref`` cycle that would recurse without consuming input is refused. Any
  fault raises :class:`~korg_bridge.errors.DocumentError`, which
  :mod:`korg_bridge.bridge.contract` turns into that callable's skip reason.
* **At call time** (:func:`validate`) the validator runs in a worker thread
  under a deadline (:data:`VALIDATION_TIME_LIMIT`) that every keyword checks,
  and every pattern search is bounded by what is left of it. Running out is
  an :class:`~korg_bridge.errors.ArgumentError` naming the pattern and where
  it was applied; nothing is run.

The validator classes are jsonschema's own, extended
(``jsonschema.validators.extend``) with ``pattern``, ``patternProperties``,
``additionalProperties`` and the ``regex`` format re-implemented on the
bounded engines. jsonschema's ``unevaluatedProperties`` matches
``patternProperties`` keys with Python's ``re`` internally, so a schema
combining the two is refused at discovery.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import jsonschema
import referencing.jsonschema
from jsonschema import FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing.exceptions import Unresolvable

from korg_bridge.bridge.patterns import Pattern, check_pattern, compile_pattern, short
from korg_bridge.errors import ArgumentError, DocumentError, OutOfTime

VALIDATION_TIME_LIMIT = 2.0
"""Seconds argument validation may take: real schemas validate in
milliseconds, so only a pathological pattern or value gets near this, and an
agent learns of it before its client gives up on the request."""

OVERRUN_GRACE = 2.0
"""Seconds past the deadline before the worker thread is abandoned: every
keyword checks the deadline, and ``regex`` notices its timeout late by up to
a second on a busy machine; only one long step (a huge ``uniqueItems``)
outlasts this."""

MAX_COLLECTED = 100
"""Violations kept per validation; the report shows the clearest ones."""

_SINGLE: tuple[str, ...] = ("additionalProperties", "additionalItems", "unevaluatedProperties")
_SINGLE += ("unevaluatedItems", "items", "contains", "propertyNames", "not", "if", "then", "else")
_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_IN_PLACE = frozenset(
    {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"}
)
"""Keywords that apply a subschema to the same value: a cycle through them
(and ``$ref``) recurses forever."""


@dataclass(slots=True)
class _Budget:
    deadline: float
    expired: bool = False
    pattern: str | None = None
    """The pattern whose search ran out of time, or is running when the thread is abandoned."""
    text: str | None = None
    """The string it was searching: found again in the value, it says where."""


_local = threading.local()


def _budget() -> _Budget | None:
    budget: _Budget | None = getattr(_local, "budget", None)
    return budget


def _search(source: str, text: str) -> bool:
    """A schema pattern applied to one string, bounded by the current deadline.

    Raises:
        OutOfTime: the search ran out of time (the budget is marked expired).
    """
    pattern: Pattern = compile_pattern(source)
    budget = _budget()
    if budget is None:
        return pattern.search(text, VALIDATION_TIME_LIMIT)
    budget.pattern, budget.text = source, text
    try:
        matched = pattern.search(text, budget.deadline - time.monotonic())
    except TimeoutError as exc:
        budget.expired = True
        raise OutOfTime from exc
    budget.pattern = budget.text = None
    return matched


def _locate(value: Any, target: str) -> tuple[Any, ...] | None:
    """Where the very string ``target`` sits in ``value`` (a property name: its object)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            if any(key is target for key in node):
                return path
            stack.extend((v, (*path, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))
    return None


def _pattern(validator: Any, source: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(source, instance):
        yield ValidationError(f"{instance!r} does not match {source!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for source, subschema in patterns.items():
        for key, value in instance.items():
            if _search(source, key):
                yield from validator.descend(value, subschema, path=key, schema_path=source)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for key in instance:
        if key in declared:
            continue
        if not any(_search(source, key) for source in patterns):
            extras.append(key)
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif not additional and extras:
        listed = ", ".join(repr(k) for k in sorted(extras, key=str))
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


Keyword = Callable[[Any, Any, Any, Any], Any]


def _checked(keyword: Keyword) -> Keyword:
    """Every keyword first checks the deadline, so a long validation stops soon after it."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        budget = _budget()
        if budget is not None and (budget.expired or time.monotonic() > budget.deadline):
            budget.expired = True
            raise OutOfTime
        errors = keyword(validator, value, instance, schema)
        if errors:
            yield from errors

    return check


@functools.cache
def _hardened(base: Any) -> Any:
    """``base`` (a jsonschema validator class) with bounded patterns and deadline checks."""
    keywords: dict[str, Keyword] = dict(base.VALIDATORS)
    for name, replacement in (
        ("pattern", _pattern),
        ("patternProperties", _pattern_properties),
        ("additionalProperties", _additional_properties),
    ):
        if name in keywords:
            keywords[name] = replacement
    checker = FormatChecker(formats=())
    checker.checkers = dict(base.FORMAT_CHECKER.checkers)
    # The cause (which engine refused it, and why) becomes the skip reason at discovery.
    checker.checks("regex", raises=DocumentError)(check_pattern)
    extend: Any = jsonschema.validators.extend
    return extend(base, {name: _checked(fn) for name, fn in keywords.items()}, format_checker=checker)


def compile_schema(schema: Any, where: str) -> Validator:
    """Check one schema and build its bounded validator; ``where`` names it in messages.

    Raises:
        DocumentError: the schema fails its metaschema, holds a pattern no
            engine accepts (or that repeats too much), a ``$ref`` that does not
            resolve, a ``$ref`` cycle, or a combination we cannot bound.
    """
    base: Any = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = _hardened(base)
    try:
        base.check_schema(schema, format_checker=cls.FORMAT_CHECKER)
    except SchemaError as exc:
        problem = exc.cause if isinstance(exc.cause, DocumentError) else exc.message
        raise DocumentError(
            f"{where} is not a valid JSON Schema: {json_path((where, *exc.path))}: {problem}"
        ) from exc
    except RecursionError as exc:
        raise DocumentError(f"{where} is nested too deeply to check") from exc
    _walk(schema, base, where)
    validator: Validator = cls(schema, registry=SPECIFICATIONS, format_checker=cls.FORMAT_CHECKER)
    return validator


def _children(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Any, str]]:
    """``(keyword, subschema, path)`` for every subschema of ``node``."""
    for key in _SINGLE:
        if isinstance(node.get(key), dict):
            yield key, node[key], f"{path}.{key}"
    for key in _LISTS:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield key, sub, f"{path}.{key}[{i}]"
    for key in _MAPS:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield key, sub, f"{path}.{key}.{name}"


def _walk(schema: Any, base: Any, where: str) -> None:
    """Compile every pattern, resolve every ``$ref``, refuse in-place cycles (iteratively)."""
    specification = referencing.jsonschema.specification_with(
        base.ID_OF(base.META_SCHEMA) or "", default=referencing.jsonschema.DRAFT202012
    )
    ours = _ids_within(schema)
    paths: dict[int, str] = {}
    edges: dict[int, list[int]] = {}
    flags = {"unevaluatedProperties": False, "patternProperties": False}
    stack = [(schema, SPECIFICATIONS.resolver_with_root(specification.create_resource(schema)), where)]
    pending: list[tuple[Any, Any, str]] = []
    while stack or pending:
        if not stack:
            stack.append(pending.pop())
        node, resolver, path = stack.pop()
        if not isinstance(node, dict) or id(node) in paths:
            continue
        paths[id(node)] = path
        resolver = resolver.in_subresource(specification.create_resource(node))
        out = edges.setdefault(id(node), [])
        _compile_patterns(node, path)
        for flag in flags:
            flags[flag] |= flag in node
        for key in _REFS:
            ref = node.get(key)
            if not isinstance(ref, str):
                continue
            try:
                resolved = resolver.lookup(ref)
            except Unresolvable as exc:
                raise DocumentError(
                    f"{path}.{key} {ref!r} cannot be resolved ({type(exc).__name__}); "
                    "only references within the schema and to the standard metaschemas work"
                ) from exc
            target = resolved.contents
            if id(target) in ours:  # the standard metaschemas are known to be sound
                out.append(id(target))
                pending.append((target, resolved.resolver, f"{path}.{key}"))
        for key, sub, sub_path in _children(node, path):
            if key in _IN_PLACE and isinstance(sub, dict):
                out.append(id(sub))
            stack.append((sub, resolver, sub_path))
    if all(flags.values()):
        raise DocumentError(
            f"{where} combines unevaluatedProperties with patternProperties, which korg-bridge "
            "cannot evaluate within a time limit; use additionalProperties instead"
        )
    _refuse_cycles(edges, paths)


def _compile_patterns(node: Mapping[str, Any], path: str) -> None:
    sources = [(node["pattern"], f"{path}.pattern")] if isinstance(node.get("pattern"), str) else []
    if isinstance(node.get("patternProperties"), dict):
        sources += [(key, f"{path}.patternProperties") for key in node["patternProperties"]]
    for source, where in sources:
        try:
            compile_pattern(source)
        except DocumentError as exc:
            raise DocumentError(f"{where}: {exc.message}") from exc


def _ids_within(schema: Any) -> set[int]:
    seen: set[int] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list) and id(node) not in seen:
            seen.add(id(node))
            stack.extend(node.values() if isinstance(node, dict) else node)
    return seen


def _refuse_cycles(edges: Mapping[int, list[int]], paths: Mapping[int, str]) -> None:
    """Depth-first (with an explicit stack) over in-place edges; a back edge is a cycle."""
    state: dict[int, int] = {}  # 1 on the current path, 2 done
    for start in edges:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(edges[start]))]
        while stack:
            node, rest = stack[-1]
            nxt = next(rest, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                raise DocumentError(
                    f"{paths.get(nxt, 'a subschema')} refers back to itself through $ref without "
                    "descending into the value; validation would never end"
                )
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(edges.get(nxt, ()))))


async def validate(
    validator: Validator,
    instance: Any,
    *,
    time_limit: float = VALIDATION_TIME_LIMIT,
    subject: str = "argument validation",
    schema_name: str = "input_schema",
) -> list[ValidationError]:
    """All violations of ``instance`` (at most :data:`MAX_COLLECTED`), off the event loop.

    ``subject`` and ``schema_name`` word the messages (the output check reuses this).

    Raises:
        ArgumentError: validation ran out of time, or the schema could not be
            applied (deep recursion, an unresolvable reference, a bad pattern).
    """
    budget = _Budget(time.monotonic() + time_limit)

    def work() -> list[ValidationError]:
        _local.budget = budget
        errors: list[ValidationError] = []
        try:
            for error in validator.iter_errors(instance):
                errors.append(error)
                if len(errors) >= MAX_COLLECTED:
                    break
        except OutOfTime:
            pass
        except RecursionError as exc:
            raise ArgumentError(
                f"the value is nested too deeply for the {schema_name} to be checked"
            ) from exc
        except Unresolvable as exc:
            raise ArgumentError(f"the {schema_name} has a reference that cannot be resolved: {exc}") from exc
        except (DocumentError, re.error, ValueError, OverflowError) as exc:
            raise ArgumentError(f"the {schema_name} cannot be applied: {exc}") from exc
        finally:
            _local.budget = None
        return errors

    errors: list[ValidationError] = []
    with anyio.move_on_after(time_limit + OVERRUN_GRACE):
        errors = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        if not budget.expired:
            return errors
    # Out of time, whether the thread noticed (expired) or was abandoned.
    if budget.pattern is None or budget.text is None:
        raise ArgumentError(f"{subject} took longer than {time_limit:g} s")
    path = _locate(instance, budget.text)
    where = f" at {dotted(path)}" if path is not None else ""
    raise ArgumentError(
        f"{subject} took longer than {time_limit:g} s (pattern "
        f"{short(budget.pattern)}{where} is too expensive for this value)"
    )


def dotted(parts: Any) -> str:
    """A value's place for a person: ``config.depth``, ``tags[1]``; ``arguments`` for the whole."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "arguments"


def json_path(parts: tuple[Any, ...]) -> str:
    out = str(parts[0])
    for part in parts[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
