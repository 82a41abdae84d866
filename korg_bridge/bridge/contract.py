"""The ``korg:introspect@v1`` contract: parsing a document into callables.

A document is checked in two tiers. Structural faults (not an object, wrong
``schema``, no ``callables`` array, a callable missing a required field,
duplicate ``command_id``) mean we cannot trust anything in it, so they raise
:class:`~korg_bridge.errors.DocumentError`. Faults confined to one callable
(an unsafe ``command_id`` segment, a property name that cannot be a flag, an
``input_schema`` that fails its metaschema) skip only that callable, with a
reason, because one bad entry must not hide a binary's other tools. Whatever
goes wrong while one callable is examined - even an error nobody foresaw -
skips that callable: startup never dies of one entry.

Schemas are checked and their (bounded) validators compiled here, once, at
discovery, by :func:`korg_bridge.bridge.validation.compile_schema`.

Names are matched whole (``fullmatch``): ``$`` would also match before a
final newline, and ``"run\n"`` must never become an argv word or a flag.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from korg_bridge.bridge.validation import compile_schema, json_path
from korg_bridge.errors import EXIT_CODES, DocumentError

SCHEMA_ID = "korg:introspect@v1"

SIDE_EFFECTS = ("none", "fs_read", "fs_write", "network", "ledger_write")
OUTPUT_MODES = ("none", "stream", "envelope", "session")

SEGMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")
"""A command_id segment becomes an argv word: it must not look like a flag
(always used with ``fullmatch``)."""

PROPERTY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")
"""A property name becomes ``--kebab-name``: no spaces, no leading dash, no ``=``,
no newline (always used with ``fullmatch``)."""

MAX_DEPTH = 64
"""Deeper documents are refused: real schemas nest a handful of levels, while
a hostile one can exhaust recursion in every tool that walks it later."""

_REQUIRED_FIELDS: tuple[tuple[str, type, str], ...] = (
    ("command_id", str, "a string"),
    ("name", str, "a string"),
    ("input_schema", dict, "an object"),
    ("capabilities", dict, "an object"),
)


@cache
def contract_schema() -> dict[str, Any]:
    """The shipped JSON Schema of ``korg:introspect@v1`` (also published in docs/)."""
    text = resources.files("korg_bridge").joinpath("schemas/introspect-v1.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _callable_validator() -> Validator:
    schema = contract_schema()
    sub = {"$defs": schema["$defs"], **schema["$defs"]["callable"]}
    return jsonschema.Draft202012Validator(sub)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a callable declares about itself; missing values stay ``None``."""

    side_effects: str | None
    output_mode: str | None
    long_running: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """An optional v1 extension: the callable's stdout, run with no arguments, read as a resource."""

    uri: str
    name: str
    description: str | None
    mime_type: str


RESOURCE_EFFECTS = ("none", "fs_read")
"""A resource read must not change anything: only callables with these side effects may be one."""


@dataclass(frozen=True, slots=True)
class CallableSpec:
    """One servable callable, with its input validator compiled once."""

    command_id: str
    name: str
    description: str | None
    input_schema: dict[str, Any]
    capabilities: Capabilities
    validator: Validator = field(repr=False, compare=False)
    output_schema: dict[str, Any] | None = None
    output_validator: Validator | None = field(default=None, repr=False, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    resource: ResourceSpec | None = None

    @property
    def properties(self) -> dict[str, Any]:
        props = self.input_schema.get("properties")
        return props if isinstance(props, dict) else {}


@dataclass(frozen=True, slots=True)
class Skipped:
    """A callable left out of the catalogue, and why (shown by ``--list-tools``)."""

    command_id: str
    reason: str
    cli_only: bool = False
    """Declared ``cli_only``: left out on purpose, not a fault of the binary."""


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed ``--introspect`` document."""

    binary: str
    version: str | None
    callables: tuple[CallableSpec, ...]
    skipped: tuple[Skipped, ...]
    exit_codes: Mapping[int, str]
    path: str | None = None
    """The executable the document came from, when discovered from one."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def get(self, command_id: str) -> CallableSpec | None:
        for spec in self.callables:
            if spec.command_id == command_id:
                return spec
        return None

    def exit_meaning(self, code: int) -> str:
        return self.exit_codes.get(code) or EXIT_CODES.get(code) or "unknown"


def json_depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Iterative depth check, so checking a hostile value cannot itself recurse."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


def parse_document(data: Any, *, label: str = "document", path: str | None = None) -> Document:
    """Turn a decoded ``--introspect`` JSON value into a :class:`Document`.

    ``label`` names the source in messages (usually the binary as the user typed it).

    Raises:
        DocumentError: the document as a whole cannot be used.
    """
    if json_depth_exceeds(data):
        raise DocumentError(
            f"{label}: introspect document is nested deeper than {MAX_DEPTH} levels; "
            "flatten its input_schema definitions."
        )
    if not isinstance(data, dict):
        raise DocumentError(
            f"{label}: introspect document is {_json_type(data)}, not an object; "
            f"it must be a JSON object with schema {SCHEMA_ID!r}."
        )
    schema = data.get("schema")
    if schema != SCHEMA_ID:
        raise DocumentError(
            f"{label}: unsupported introspect schema {schema!r}; korg-bridge reads {SCHEMA_ID!r}."
        )
    callables = data.get("callables")
    if not isinstance(callables, list):
        got = "missing" if callables is None else _json_type(callables)
        raise DocumentError(f"{label}: introspect document has no 'callables' array ({got}).")

    binary = data.get("binary")
    binary_name = binary if isinstance(binary, str) and binary else _basename(path or label)
    version = data.get("version") if isinstance(data.get("version"), str) else None

    seen: set[str] = set()
    good: list[CallableSpec] = []
    skipped: list[Skipped] = []
    for i, entry in enumerate(callables):
        _check_required(entry, i, label)
        command_id: str = entry["command_id"]
        if command_id in seen:
            raise DocumentError(f"{label}: duplicate command_id {command_id!r} in callables[{i}].")
        seen.add(command_id)
        cli_only = entry.get("cli_only") is True
        try:
            good.append(_build_spec(entry))
        except DocumentError as exc:
            skipped.append(Skipped(command_id, exc.message, cli_only))
        except Exception as exc:  # one callable's unforeseen fault must not sink the rest
            skipped.append(Skipped(command_id, f"cannot be served: {type(exc).__name__}: {exc}", cli_only))

    return Document(
        binary=binary_name,
        version=version,
        callables=tuple(good),
        skipped=tuple(skipped),
        exit_codes=_exit_codes(data.get("exit_codes")),
        path=path,
        raw=data,
    )


def _check_required(entry: Any, i: int, label: str) -> None:
    if not isinstance(entry, dict):
        raise DocumentError(f"{label}: callables[{i}] is {_json_type(entry)}, not an object.")
    for name, typ, desc in _REQUIRED_FIELDS:
        if name not in entry:
            raise DocumentError(f"{label}: callables[{i}] is missing required field {name!r}.")
        if not isinstance(entry[name], typ):
            raise DocumentError(
                f"{label}: callables[{i}].{name} must be {desc}, got {_json_type(entry[name])}."
            )


def _check_names(entry: dict[str, Any]) -> None:
    """Raises: DocumentError: a command_id segment or property name that cannot be argv."""
    command_id: str = entry["command_id"]
    for segment in command_id.split("."):
        if not SEGMENT_RE.fullmatch(segment):
            raise DocumentError(
                f"command_id segment {segment!r} is not a safe subcommand word (^[A-Za-z0-9][A-Za-z0-9_-]*$)"
            )
    violation = best_match(_callable_validator().iter_errors(entry))
    if violation is not None:
        raise DocumentError(f"{json_path(('callable', *violation.absolute_path))}: {violation.message}")
    if entry.get("cli_only") is True:
        # A person's act at a terminal (approving, restoring): never a tool a model can call.
        # ``surfaces: ["cli"]`` alone does not say this: the ecosystem's binaries list only
        # ``cli`` on the very callables the bridge exists to serve.
        raise DocumentError("offered on the cli surface only")
    schema: dict[str, Any] = entry["input_schema"]
    if schema.get("type") != "object":
        raise DocumentError(f"input_schema must have type 'object', got {schema.get('type')!r}")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise DocumentError("input_schema.properties must be an object")
    flags: dict[str, str] = {}
    for name in props:
        if not PROPERTY_RE.fullmatch(name):
            raise DocumentError(
                f"property {name!r} cannot be a command-line flag (^[A-Za-z0-9][A-Za-z0-9_-]*$)"
            )
        flag = name.replace("_", "-")
        if flag in flags:
            raise DocumentError(f"properties {flags[flag]!r} and {name!r} both map to flag --{flag}")
        flags[flag] = name


def _build_spec(entry: dict[str, Any]) -> CallableSpec:
    """One servable callable, its validators compiled.

    Raises:
        DocumentError: why this one callable cannot be served (its skip reason).
    """
    _check_names(entry)
    schema: dict[str, Any] = entry["input_schema"]
    validator = compile_schema(schema, "input_schema")
    output_schema = entry.get("output_schema")
    output_validator = None if output_schema is None else compile_schema(output_schema, "output_schema")
    caps: dict[str, Any] = entry["capabilities"]
    side = caps.get("side_effects")
    mode = caps.get("output_mode")
    description = entry.get("description")
    resource = _resource(entry, side if isinstance(side, str) else None)
    return CallableSpec(
        command_id=entry["command_id"],
        name=entry["name"],
        description=description if isinstance(description, str) else None,
        input_schema=schema,
        capabilities=Capabilities(
            side_effects=side if isinstance(side, str) else None,
            output_mode=mode if isinstance(mode, str) else None,
            long_running=caps.get("long_running") is True,
            raw=caps,
        ),
        validator=validator,
        output_schema=output_schema,
        output_validator=output_validator,
        raw=entry,
        resource=resource,
    )


def _resource(entry: dict[str, Any], side_effects: str | None) -> ResourceSpec | None:
    """The callable's ``resource`` (its shape was checked with the callable's).

    Raises:
        DocumentError: a resource on a callable that changes something or needs arguments.
    """
    raw = entry.get("resource")
    if not isinstance(raw, dict):
        return None
    required = entry["input_schema"].get("required") or []
    if side_effects not in RESOURCE_EFFECTS or required:
        raise DocumentError(
            f"resource {raw['uri']!r}: a resource is read with no arguments and changes nothing; its callable "
            f"must have side_effects none or fs_read and no required properties"
        )
    name, description, mime = raw.get("name"), raw.get("description"), raw.get("mime_type")
    return ResourceSpec(
        uri=raw["uri"],
        name=name if isinstance(name, str) else str(entry["name"]),
        description=description if isinstance(description, str) else None,
        mime_type=mime if isinstance(mime, str) else "text/plain",
    )


def _exit_codes(value: Any) -> dict[int, str]:
    table = dict(EXIT_CODES)
    if isinstance(value, dict):
        for key, meaning in value.items():
            if isinstance(key, str) and key.isdigit() and isinstance(meaning, str):
                table[int(key)] = meaning
    return table


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
