"""MCP arguments → argv, by the korg ecosystem's convention.

=====================  ==============================
``"query": "x"``       ``--query x``
``"top_n": 5``         ``--top-n 5``
``"quiet": true``      ``--quiet``
``false`` / ``null``   omitted
``["a", "b"]``         ``--tags a --tags b``
``{"k": 1}``           ``--config {"k":1}`` (compact JSON)
``"-x"``               ``--opt=-x`` (attached form)
=====================  ==============================

The attached form is what keeps a value from ever being read as a flag:
argparse, clap and click all read ``--opt=-x`` as the value ``-x``, while
``--opt -x`` is "missing value" or, worse, another option.

The kernel bounds what ``exec`` accepts; a call over it is refused here,
naming the argument, instead of failing in ``exec`` with ``E2BIG``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from korg_bridge.bridge.contract import CallableSpec, Document
from korg_bridge.errors import ArgumentError


def flag_name(prop: str) -> str:
    """``top_n`` → ``--top-n``."""
    return "--" + prop.replace("_", "-")


def subcommand_path(command_id: str, binary: str | Sequence[str]) -> list[str]:
    """The argv words that select a callable: the command_id minus the binary name.

    ``binary`` may be several names (the document's ``binary`` field and the
    executable's file name); the first segment is dropped when it equals one.
    """
    names = [binary] if isinstance(binary, str) else list(binary)
    segments = command_id.split(".")
    if segments[0] in names:
        return segments[1:]
    return segments


def format_scalar(value: Any, where: str) -> str:
    """One argv word for a JSON value (strings verbatim, the rest as JSON).

    Raises:
        ArgumentError: the value contains NUL or is a non-finite number.
    """
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ArgumentError(f"argument {where}: {value!r} is not a finite number.")
        # JSON does not distinguish 5 from 5.0, and an integer parser rejects
        # "5.0"; repr round-trips every other float exactly.
        text = str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    elif value is None:
        text = "null"
    else:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if "\x00" in text:
        raise ArgumentError(f"argument {where} contains a NUL character, which cannot be passed in argv.")
    return text


MAX_ARG_STRLEN = 131072
"""Linux's bound on one argv string, its NUL included (32 pages); ``exec`` fails
with ``E2BIG`` beyond it however much room the whole command line has."""

POINTER_SIZE = 8
"""Bytes of the pointer the kernel copies for each argv and environment string."""


def _arg_bytes(text: str) -> int:
    return len(os.fsencode(text))


def _option(flag: str, value: str, where: str | None = None) -> list[str]:
    # Any value that starts with "-" goes in the attached form so that it can
    # never be parsed as a flag; "=" in the value is fine after the first "=".
    words = [f"{flag}={value}"] if value.startswith("-") else [flag, value]
    size = _arg_bytes(words[-1])
    if sys.platform.startswith("linux") and size >= MAX_ARG_STRLEN:
        raise ArgumentError(
            f"{where or flag} is {size} bytes; one command-line argument may be at most "
            f"{MAX_ARG_STRLEN - 1} bytes. Pass less data (or a path to a file, if the tool takes one); "
            "nothing was run."
        )
    return words


def check_command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    """Refuse a command line that ``exec`` would reject as a whole (``ARG_MAX``).

    ``env`` is the environment the child gets (``None``: this process's).

    Raises:
        ArgumentError: argv plus the environment exceed the system's limit.
    """
    try:
        limit = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        return
    if limit <= 0:
        return
    environ = os.environ if env is None else env
    size = sum(_arg_bytes(a) + 1 + POINTER_SIZE for a in argv)
    size += sum(_arg_bytes(k) + _arg_bytes(v) + 2 + POINTER_SIZE for k, v in environ.items())
    if size > limit:
        raise ArgumentError(
            f"the command line would be {size} bytes with its environment; the system allows "
            f"{limit} (ARG_MAX). Pass less data in the arguments; nothing was run."
        )


def build_argv(
    document: Document,
    spec: CallableSpec | str,
    arguments: Mapping[str, Any] | None,
    *,
    executable: str | None = None,
) -> list[str]:
    """The full argv for one call: executable, subcommand path, then flags.

    Flags follow the order of ``input_schema.properties`` so the same
    arguments always give the same argv.

    Raises:
        ArgumentError: an argument is not declared in the schema, or a value
            cannot be passed (NUL, non-finite number, longer than the system allows).
    """
    if isinstance(spec, str):
        found = document.get(spec)
        if found is None:
            raise ArgumentError(f"unknown command_id {spec!r}; it is not among the binary's callables.")
        spec = found
    exe = executable or document.path or document.binary
    names = [document.binary]
    if document.path:
        names.append(document.path.rsplit("/", 1)[-1])
    argv = [exe, *subcommand_path(spec.command_id, names)]
    argv.extend(arguments_to_flags(spec, arguments or {}))
    return argv


def arguments_to_flags(spec: CallableSpec, arguments: Mapping[str, Any]) -> list[str]:
    """Only names declared in ``input_schema.properties`` may become flags.

    Raises:
        ArgumentError: see :func:`build_argv`.
    """
    props = spec.properties
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        declared = ", ".join(props) or "none"
        raise ArgumentError(
            f"unknown argument(s) {', '.join(map(repr, unknown))} for {spec.command_id}; "
            f"declared properties: {declared}; nothing was run."
        )
    out: list[str] = []
    for name in props:
        if name not in arguments:
            continue
        value = arguments[name]
        flag = flag_name(name)
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if item is None:
                    continue
                out.extend(_option(flag, format_scalar(item, f"{name}[{i}]"), f"{flag} item {i}"))
        else:
            out.extend(_option(flag, format_scalar(value, name)))
    return out
