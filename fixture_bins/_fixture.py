"""Shared code for the fixture executables that korg-bridge's tests spawn.

Why one module: every fixture must read argv exactly the way the bridge writes
it (kebab-case flags, repeated flags for arrays, compact JSON for objects,
``--flag=-x`` for values starting with a dash) and print documents shaped like
the real peers' ``korg:introspect@v1`` output. Keeping both halves here means a
convention is stated once, so a test failure points at the bridge, not at a
fixture that drifted.

Stdlib only: the fixtures run under whatever ``python3`` is first on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

SCHEMA_ID = "korg:introspect@v1"

STANDARD_EXIT_CODES: dict[str, str] = {
    "0": "success",
    "1": "error.generic",
    "2": "error.usage",
    "3": "error.config",
    "4": "error.io",
    "5": "error.network",
    "6": "error.user_interrupt",
    "7": "error.dependency_missing",
}

Handler = Callable[[dict[str, Any]], int | None]


def _should_not_run(_values: dict[str, Any]) -> int:
    """Body of every callable the bridge is meant to skip at discovery."""
    print("SHOULD NOT RUN")
    return 0


SHOULD_NOT_RUN: Handler = _should_not_run
"""Handler for skippable callables; ``run`` calls it without parsing flags,
because their schemas are deliberately unusable."""


def capabilities(
    output_mode: str,
    side_effects: str | None = "none",
    *,
    long_running: bool = False,
    stateful: bool = False,
    reads_stdin: bool = False,
) -> dict[str, Any]:
    """Capabilities in the peers' key order; ``side_effects=None`` omits the key."""
    caps: dict[str, Any] = {"output_mode": output_mode}
    if side_effects is not None:
        caps["side_effects"] = side_effects
    caps.update(
        requires_project=False,
        long_running=long_running,
        stateful=stateful,
        reads_stdin=reads_stdin,
        supports_output_path=False,
    )
    return caps


def object_schema(
    properties: dict[str, Any] | None = None, required: list[str] | None = None
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties or {})}
    if required:
        schema["required"] = list(required)
    return schema


def entry(
    command_id: str,
    description: str,
    input_schema: dict[str, Any],
    caps: dict[str, Any],
    name: str | None = None,
) -> dict[str, Any]:
    """One callable, with the fields in the same order the peers print them."""
    return {
        "command_id": command_id,
        "name": name if name is not None else command_id.split(".")[-1],
        "description": description,
        "surfaces": ["cli"],
        "input_schema": input_schema,
        "capabilities": caps,
    }


def document(
    binary: str,
    version: str,
    callables: list[dict[str, Any]],
    extra_exit_codes: dict[str, str] | None = None,
) -> dict[str, Any]:
    exit_codes = dict(STANDARD_EXIT_CODES)
    exit_codes.update(extra_exit_codes or {})
    return {
        "schema": SCHEMA_ID,
        "binary": binary,
        "version": version,
        "callables_declared": True,
        "callables": callables,
        "exit_codes": exit_codes,
    }


def hello_entry(binary: str) -> dict[str, Any]:
    """The one harmless callable most broken-document fixtures carry."""
    return entry(binary + ".hello", "Print hello.", object_schema(), capabilities("stream", "none"))


def hello(_values: dict[str, Any]) -> int:
    print("hello")
    return 0


def subcommand_path(binary: str, command_id: str) -> list[str]:
    """The argv path the bridge builds: drop the binary's own name if it leads."""
    segments = command_id.split(".")
    return segments[1:] if segments[0] == binary else segments


def flag_for(prop: str) -> str:
    return "--" + prop.replace("_", "-")


def parse_number(text: str) -> Any:
    """JSON number from argv, keeping ints as ints so ``5`` does not become ``5.0``."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def _json_type(spec: dict[str, Any]) -> str:
    kind = spec.get("type", "string")
    if isinstance(kind, list):  # e.g. ["integer", "null"]: the non-null one decides
        kind = next((k for k in kind if k != "null"), "string")
    return str(kind)


def _converter(spec: dict[str, Any]) -> Callable[[str], Any]:
    kind = _json_type(spec)
    if kind == "integer":
        return int
    if kind == "number":
        return parse_number
    if kind in ("object", "array"):
        return json.loads
    return str


def build_parser(prog: str, schema: dict[str, Any]) -> argparse.ArgumentParser:
    """An argparse parser that accepts exactly the argv the bridge builds for ``schema``."""
    # No -h and no prefix matching: "--top" must not silently mean "--top-n".
    parser = argparse.ArgumentParser(prog=prog, add_help=False, allow_abbrev=False)
    required = set(schema.get("required", []))
    for prop, spec in schema.get("properties", {}).items():
        kind = _json_type(spec)
        kwargs: dict[str, Any] = {"dest": prop, "default": spec.get("default")}
        if kind == "boolean":
            kwargs["action"] = "store_true"
            kwargs["default"] = None  # absent and false both arrive as "not passed"
        elif kind == "array":
            kwargs["action"] = "append"
            kwargs["default"] = None  # a list default would be appended to, not replaced
            kwargs["type"] = _converter(spec.get("items", {}))
        else:
            kwargs["type"] = _converter(spec)
            kwargs["required"] = prop in required
            if "enum" in spec:
                kwargs["choices"] = spec["enum"]
        parser.add_argument(flag_for(prop), **kwargs)
    return parser


def write_pid_file(path: str, pid: int) -> None:
    """Write atomically so a test polling for the file never reads it half-written."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(f"{pid}\n")
    os.replace(tmp, path)


def _usage(doc: dict[str, Any], handlers: dict[str, Handler]) -> str:
    binary = doc["binary"]
    paths = [
        " ".join(subcommand_path(binary, c["command_id"]))
        for c in doc["callables"]
        if handlers.get(c["command_id"], SHOULD_NOT_RUN) is not SHOULD_NOT_RUN
    ]
    return (
        f"usage: {binary} <command> [flags]\n"
        f"       {binary} --introspect | --version\n"
        f"commands: {', '.join(paths)}\n"
    )


def run(doc: dict[str, Any], handlers: dict[str, Handler], argv: list[str] | None = None) -> None:
    """Serve ``--introspect``/``--version`` or dispatch to the callable named by argv; exits."""
    args = sys.argv[1:] if argv is None else argv
    binary = doc["binary"]
    if args[:1] == ["--introspect"]:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.exit(0)
    if args[:1] == ["--version"]:
        sys.stdout.write(f"{binary} {doc['version']}\n")
        sys.exit(0)

    # Longest subcommand path wins, so "bun script run" is not mistaken for "bun".
    best: dict[str, Any] | None = None
    best_len = -1
    for callable_ in doc["callables"]:
        command_id = callable_["command_id"]
        path = subcommand_path(binary, command_id)
        if command_id in handlers and args[: len(path)] == path and len(path) > best_len:
            best, best_len = callable_, len(path)
    if best is None:
        sys.stderr.write(f"{binary}: unknown command: {' '.join(args)!r}\n{_usage(doc, handlers)}")
        sys.exit(2)

    handler = handlers[best["command_id"]]
    if handler is SHOULD_NOT_RUN:
        sys.exit(handler({}) or 0)
    prog = " ".join([binary, *args[:best_len]])
    values = vars(build_parser(prog, best["input_schema"]).parse_args(args[best_len:]))
    code = handler(values)
    sys.stdout.flush()
    sys.exit(code or 0)
