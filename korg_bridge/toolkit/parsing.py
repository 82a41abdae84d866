"""The command line of a toolkit binary: flags from a JSON Schema, by the bridge's argv convention.

Why argparse is wrapped, not used as is: its errors print usage and exit, and name flags in
Python terms; here every problem becomes one :class:`~korg_bridge.errors.UsageError` line in
flag terms, and values stay the strings typed until :func:`convert_arguments` turns them into
JSON values, so a wrong value is reported with every other problem.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NoReturn

from korg_bridge.errors import UsageError
from korg_bridge.toolkit.schemacheck import allows_array, flag_name, primary_type, show

__all__ = [
    "Parser",
    "add_schema_arguments",
    "convert_arguments",
    "description_text",
    "help_text",
    "shield_dashes",
    "unknown_words",
    "unshield",
    "usage_error",
    "usage_message",
]


def _terminal_width() -> int:
    """What ``shutil.get_terminal_size`` would say (``COLUMNS``, else the terminal, else 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, minus its ``import shutil`` (and bz2, lzma) to learn the
    terminal width: argparse builds one per ``add_argument``, and a fresh korg-recall
    process per tool call would pay ~4 ms for a width no call prints."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_width() - 2)


_ARGUMENT_ERROR = re.compile(r"argument (?P<flag>[^:]+): (?P<rest>.*)", re.DOTALL)
_INVALID_CHOICE = re.compile(r"invalid choice: (?P<value>.*?) \(choose from (?P<choices>.*)\)", re.DOTALL)


def _unquote(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def usage_message(message: str) -> str:
    """An argparse error rewritten as CLI advice in flag terms, without Python reprs.

    ``argument --top-n: must be an integer, got "x"`` becomes ``--top-n must be
    an integer, got "x"``; an invalid choice lists the choices plainly; a bad
    subcommand says ``unknown command``. Anything else passes through.
    """
    if message.startswith("unrecognized arguments: "):
        words = message.removeprefix("unrecognized arguments: ").split()
        flags = [w for w in words if w.startswith("-")]
        if flags and len(flags) == len(words):
            return f"unknown option{'s' if len(flags) > 1 else ''} {' '.join(flags)}"
        return f"unexpected argument{'s' if len(words) > 1 else ''}: {' '.join(words)}"
    found = _ARGUMENT_ERROR.fullmatch(message)
    if found is None:
        return message
    flag = found["flag"].split("/")[-1]  # argparse names "-h/--help"; users type the long form
    rest = found["rest"]
    choice = _INVALID_CHOICE.fullmatch(rest)
    if choice is not None:
        value = _unquote(choice["value"])
        choices = ", ".join(_unquote(c) for c in choice["choices"].split(", "))
        if not flag.startswith("-"):
            return f'unknown command "{value}"; choose from {choices}'
        return f'{flag} must be one of {choices}, got "{value}"'
    if rest == "expected one argument":
        return f"{flag} needs a value"
    if rest.startswith("ignored explicit argument "):
        return f'{flag} takes no value, got "{_unquote(rest.removeprefix("ignored explicit argument "))}"'
    if rest.startswith(("must ", "needs ", "takes ")):
        return f"{flag} {rest}"
    return f"{flag}: {rest}"


def usage_error(prog: str, message: str) -> UsageError:
    """The one-line usage error of a parser error (with where to read more)."""
    return UsageError(f"{usage_message(message)}. See '{prog} --help'.")


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so every
    error goes through the one handler and stays one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise usage_error(self.prog, message)


def help_text(text: str | None) -> str | None:
    """A description as argparse help. argparse %-formats every help string (for ``%(default)s``), so
    a schema's literal ``%`` ("90 % of events") must be doubled, or ``--help`` raises a TypeError."""
    return None if text is None else text.replace("%", "%%")


def description_text(text: str | None) -> str | None:
    """A description as an argparse parser description, which argparse %-formats only when it holds
    ``%(prog)``: then every ``%`` is doubled, as in :func:`help_text`; otherwise it is printed as is."""
    return text.replace("%", "%%") if text is not None and "%(prog)" in text else text


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number, got {show(text)}") from None
    if value != value or value in (float("inf"), float("-inf")):  # nan, inf: no schema bound holds
        raise ValueError(f"must be a finite number, got {show(text)}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"must be an integer, got {show(text)}") from None


def _json(text: str, kind: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"must be {kind}, got JSON nested too deeply to read") from None
    except ValueError:
        raise ValueError(f"must be {kind}, got {show(text)}") from None


def _json_object(text: str) -> dict[str, Any]:
    value = _json(text, "a JSON object")
    if not isinstance(value, dict):
        raise ValueError(f"must be a JSON object, got {show(text)}")
    return value


def _json_value(text: str) -> Any:
    return _json(text, "JSON")


def _boolean_word(text: str) -> bool:
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"must be true or false, got {show(text)}")


_CONVERTERS: dict[str | None, Callable[[str], Any]] = {
    "string": str,
    "integer": _integer,
    "number": _number,
    "object": _json_object,
    "array": _json_value,
    "boolean": _boolean_word,
    None: str,
}


def add_schema_arguments(parser: argparse.ArgumentParser, schema: Mapping[str, Any]) -> None:
    """One flag per property, by the bridge's convention (see :mod:`korg_bridge.bridge.argv`).

    Values are kept as the strings typed; :func:`convert_arguments` turns them
    into JSON values afterwards, so a wrong value is reported together with
    every other problem instead of stopping the parse. A property that may be
    an array (``"type": ["string", "array"]`` included) is a repeatable flag,
    as the bridge sends a list.
    """
    props = schema.get("properties") or {}
    for prop, sub in props.items():
        flag = flag_name(prop)
        sub = sub if isinstance(sub, dict) else {}
        shown = help_text(sub.get("description") if isinstance(sub.get("description"), str) else None)
        kind = "array" if allows_array(sub) else primary_type(sub)
        if kind == "boolean":
            parser.add_argument(flag, dest=prop, action="store_true", default=None, help=shown)
        elif kind == "array":
            parser.add_argument(flag, dest=prop, action="append", default=None, help=shown)
        else:
            parser.add_argument(flag, dest=prop, default=None, help=shown)


def convert_arguments(schema: Mapping[str, Any], raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The typed strings of ``raw`` as JSON values by ``schema``, and a message per value that is not one."""
    props = schema.get("properties") or {}
    args: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in raw.items():
        sub = props.get(name)
        sub = sub if isinstance(sub, dict) else {}
        kind = "array" if allows_array(sub) else primary_type(sub)
        try:
            if kind == "array" and isinstance(value, list):
                items = sub.get("items")
                convert = _CONVERTERS.get(primary_type(items) if isinstance(items, dict) else None, str)
                args[name] = [convert(item) for item in value]
            elif isinstance(value, str):
                args[name] = _CONVERTERS.get(kind, str)(value)
            else:
                args[name] = value  # a flag: True
        except ValueError as exc:
            problems.append(f"{flag_name(name)} {exc}")
    return args, problems


_DASHES = "\0"
"""Stands for an attached value ``--`` while argparse parses: Python 3.11's argparse drops a
``--`` it is given as a value (``--query=--`` read as an empty list). A NUL can never be in
argv, so it cannot be confused with anything a caller sent."""


def shield_dashes(word: str) -> str:
    flag, eq, value = word.partition("=")
    return f"{flag}={_DASHES}" if eq and value == "--" and flag.startswith("--") else word


def unshield(value: Any) -> Any:
    if value == _DASHES:
        return "--"
    if isinstance(value, list):
        return [unshield(item) for item in value]
    return value


def unknown_words(words: Sequence[str], known: Collection[str]) -> list[str]:
    """One message per word argparse could not place: an unknown option (its value skipped) or a stray word."""
    problems: list[str] = []
    after_option = False
    for word in words:
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            close = [flag for flag in known if flag.startswith(name) or name.startswith(flag)]
            if not close:
                import difflib  # an error path only: not worth a cold-start import

                close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]}?)" if len(close) == 1 else ""
            problems.append(f"unknown option {name}{hint}")
            after_option = "=" not in word
        elif after_option:
            after_option = False  # the value of the unknown option before it
        else:
            problems.append(f"unexpected argument {show(word)}")
    return problems
