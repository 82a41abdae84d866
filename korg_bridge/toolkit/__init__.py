"""Make any Python tool bridgeable: declare each callable once, get both the
``--introspect`` document and a command-line parser derived from the same
schema, with exactly the bridge's argv convention.

::

    kit = Toolkit("thump", "1.0.0")

    @kit.command(
        "thump.greet",
        description="Say hello.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        side_effects="none",
        output_mode="stream",
    )
    def greet(args: dict[str, Any]) -> int:
        print(f"hello {args.get('name', 'world')}")
        return 0

    if __name__ == "__main__":
        raise SystemExit(kit.main())

Because the parser is generated from the schema the bridge serves, the CLI
and the schema cannot drift. Deliberately light on imports (no jsonschema,
no MCP SDK): toolkit binaries start as a fresh process on every tool call.

Two conveniences exist for people at a terminal only; the bridge never uses
them, so the argv convention stays flags only:

* ``positional="ref"`` on :meth:`Toolkit.command` also takes that property
  from bare words (``korg-recall show e12`` = ``--ref e12``); for an array
  property each word is one more item;
* ``--debug`` anywhere before a ``--`` shows the traceback of an internal
  error (and debug logs); no callable may declare a ``debug`` property.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from korg_bridge.errors import EXIT_CODES, KorgError, UsageError
from korg_bridge.toolkit.schemacheck import check_arguments, flag_name, show

Handler = Callable[[dict[str, Any]], "int | None"]

USER_INTERRUPT = 6
"""``error.user_interrupt`` in the exit-code table."""
DEFAULT_ON_INTERRUPT = "nothing is left half-done: run it again to finish."
"""A callable's :attr:`Command.on_interrupt` unless it says more."""


@dataclass(slots=True)
class Command:
    """One declared callable and the function that runs it."""

    command_id: str
    name: str
    description: str
    input_schema: dict[str, Any]
    capabilities: dict[str, Any]
    handler: Handler
    extra: dict[str, Any] = field(default_factory=dict)
    positional: str | None = None
    """A property also given as bare words on the command line (never by the bridge)."""
    surfaces: tuple[str, ...] = ("cli", "mcp")
    """Where the callable is offered. Without ``mcp`` the entry also says ``cli_only: true``, the
    marker the bridge honours (``surfaces`` alone is informational: see docs/introspect-v1.md)."""
    cli_properties: dict[str, Any] = field(default_factory=dict)
    """Flags only the command line takes (JSON Schema properties kept out of ``input_schema``, so
    no tool call can pass them): acts reserved for a person at a terminal."""
    on_interrupt: str = DEFAULT_ON_INTERRUPT
    """What a person who pressed Ctrl-C needs to know next: what was kept, and what the next run does."""

    def cli_schema(self) -> dict[str, Any]:
        """``input_schema`` plus :attr:`cli_properties`: what the command line parses and checks."""
        if not self.cli_properties:
            return self.input_schema
        props = {**(self.input_schema.get("properties") or {}), **self.cli_properties}
        return {**self.input_schema, "properties": props}

    def to_document(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "command_id": self.command_id,
            "name": self.name,
            "description": self.description,
            "surfaces": list(self.surfaces),
            **({} if "mcp" in self.surfaces else {"cli_only": True}),
            "input_schema": self.input_schema,
            "capabilities": self.capabilities,
        }
        entry.update(self.extra)
        return entry


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


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so every
    error goes through the one handler and stays one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise usage_error(self.prog, message)


def _help_text(text: str | None) -> str | None:
    """A description as argparse help. argparse %-formats every help string (for ``%(default)s``), so
    a schema's literal ``%`` ("90 % of events") must be doubled, or ``--help`` raises a TypeError."""
    return None if text is None else text.replace("%", "%%")


def _description_text(text: str | None) -> str | None:
    """A description as an argparse parser description, which argparse %-formats only when it holds
    ``%(prog)``: then every ``%`` is doubled, as in :func:`_help_text`; otherwise it is printed as is."""
    return text.replace("%", "%%") if text is not None and "%(prog)" in text else text


def _primary_type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        return kinds[0] if kinds else None
    return kind if isinstance(kind, str) else None


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


def _allows_array(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


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
        shown = _help_text(sub.get("description") if isinstance(sub.get("description"), str) else None)
        kind = "array" if _allows_array(sub) else _primary_type(sub)
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
        kind = "array" if _allows_array(sub) else _primary_type(sub)
        try:
            if kind == "array" and isinstance(value, list):
                items = sub.get("items")
                convert = _CONVERTERS.get(_primary_type(items) if isinstance(items, dict) else None, str)
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


def _shield_dashes(word: str) -> str:
    flag, eq, value = word.partition("=")
    return f"{flag}={_DASHES}" if eq and value == "--" and flag.startswith("--") else word


def _unshield(value: Any) -> Any:
    if value == _DASHES:
        return "--"
    if isinstance(value, list):
        return [_unshield(item) for item in value]
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


class Toolkit:
    """A binary's callables, its ``--introspect`` document and its CLI, from one declaration."""

    def __init__(
        self,
        binary: str,
        version: str,
        *,
        description: str | None = None,
        exit_codes: Mapping[int, str] | None = None,
    ) -> None:
        self.binary = binary
        self.version = version
        self.description = description
        self.exit_codes = dict(EXIT_CODES)
        self.exit_codes.update(exit_codes or {})
        self.commands: list[Command] = []

    def command(
        self,
        command_id: str,
        *,
        description: str,
        input_schema: dict[str, Any],
        side_effects: str,
        output_mode: str,
        name: str | None = None,
        long_running: bool = False,
        extra: Mapping[str, Any] | None = None,
        positional: str | None = None,
        surfaces: Sequence[str] = ("cli", "mcp"),
        cli_properties: Mapping[str, Any] | None = None,
        on_interrupt: str = DEFAULT_ON_INTERRUPT,
        **capabilities: Any,
    ) -> Callable[[Handler], Handler]:
        """Declare a callable; the decorated function receives the parsed arguments
        (schema defaults filled in) and returns an exit code.

        ``positional`` names a string or array property that the command line
        also takes as bare words (see the module docstring). ``surfaces=["cli"]``
        declares a command-line-only callable (marked ``cli_only``: the bridge does
        not serve it); ``cli_properties`` are flags the command line takes but
        ``input_schema`` leaves out. ``on_interrupt`` ends the one line a Ctrl-C
        prints (``BINARY: interrupted: COMMAND stopped; …``): what the next run does.

        Raises:
            ValueError: ``positional`` is not a string or array property, or the
                schema declares ``debug`` (the toolkit's own flag).
        """
        props = input_schema.get("properties") or {}
        if "debug" in props:
            raise ValueError(f"{command_id}: 'debug' is reserved for the toolkit's --debug flag")
        if positional is not None:
            sub = props.get(positional)
            if not isinstance(sub, dict) or not (_allows_array(sub) or _primary_type(sub) == "string"):
                raise ValueError(
                    f"{command_id}: positional {positional!r} must be a string or array property"
                )

        def register(handler: Handler) -> Handler:
            caps: dict[str, Any] = {
                "output_mode": output_mode,
                "side_effects": side_effects,
                "requires_project": False,
                "long_running": long_running,
                "stateful": False,
                "reads_stdin": False,
                "supports_output_path": False,
            }
            caps.update(capabilities)
            self.commands.append(
                Command(
                    command_id=command_id,
                    name=name or command_id.rsplit(".", 1)[-1],
                    description=description,
                    input_schema=input_schema,
                    capabilities=caps,
                    handler=handler,
                    extra=dict(extra or {}),
                    positional=positional,
                    surfaces=tuple(surfaces),
                    cli_properties=dict(cli_properties or {}),
                    on_interrupt=on_interrupt,
                )
            )
            return handler

        return register

    def document(self) -> dict[str, Any]:
        """The ``korg:introspect@v1`` document of this binary."""
        return {
            "schema": "korg:introspect@v1",
            "binary": self.binary,
            "version": self.version,
            "callables_declared": True,
            "callables": [c.to_document() for c in self.commands],
            "exit_codes": {str(k): v for k, v in sorted(self.exit_codes.items())},
        }

    def _path(self, command: Command) -> list[str]:
        segments = command.command_id.split(".")
        return segments[1:] if segments[0] == self.binary else segments

    def parser(self, commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
        """The argparse tree: one nested subcommand per command_id segment
        (of ``commands``, by default all of them)."""
        root = _Parser(prog=self.binary, description=_description_text(self.description), allow_abbrev=False)
        root.add_argument("--introspect", action="store_true", help="print the korg:introspect@v1 document")
        root.add_argument("--version", action="store_true", help="print the version")
        root.add_argument(
            "--debug", action="store_true", help="tracebacks and debug logs on stderr (anywhere before --)"
        )
        subparsers: dict[tuple[str, ...], Any] = {}
        parsers: dict[tuple[str, ...], argparse.ArgumentParser] = {(): root}
        for command in self.commands if commands is None else commands:
            path = tuple(self._path(command))
            for depth in range(1, len(path) + 1):
                prefix = path[:depth]
                if prefix in parsers:
                    continue
                parent = path[: depth - 1]
                if parent not in subparsers:
                    subparsers[parent] = parsers[parent].add_subparsers(
                        dest=f"_cmd{depth}", metavar="COMMAND"
                    )
                is_leaf = depth == len(path)
                child = subparsers[parent].add_parser(
                    prefix[-1],
                    help=_help_text(command.description.split(". ")[0]) if is_leaf else None,
                    description=_description_text(command.description) if is_leaf else None,
                    allow_abbrev=False,
                )
                parsers[prefix] = child
            leaf = parsers[path]
            add_schema_arguments(leaf, command.cli_schema())
            if command.positional is not None:
                leaf.add_argument(
                    "_positional",
                    nargs="*",
                    metavar=command.positional.upper(),
                    help=f"the same as --{command.positional.replace('_', '-')}",
                )
            leaf.set_defaults(_command=command)
        return root

    def parse(self, argv: Sequence[str]) -> tuple[Command, dict[str, Any]]:
        """argv (without the program name) → the command and its arguments.

        Only flags that were given appear, exactly as the bridge sent them;
        schema defaults are not filled in here.

        Raises:
            UsageError: unknown subcommand or flag, a value of the wrong type,
                or arguments that break the schema.
        """
        # Build only the subcommand argv names (a fresh process per tool call
        # should not pay for every other command's parser); anything else gets
        # the full tree, for its error message and help.
        words = [_shield_dashes(word) for word in argv]
        chosen = [c for c in self.commands if words[: len(self._path(c))] == self._path(c)]
        chosen = [c for c in chosen if len(self._path(c)) == max(len(self._path(x)) for x in chosen)]
        namespace, extra = self.parser(chosen or None).parse_known_args(words)
        command: Command | None = getattr(namespace, "_command", None)
        if command is None:
            if extra:
                raise UsageError(f"{'; '.join(unknown_words(extra, ()))}. See '{self.binary} --help'.")
            raise UsageError(f"missing command. See '{self.binary} --help'.")
        schema = command.cli_schema()
        props = schema.get("properties") or {}
        raw = {
            name: _unshield(getattr(namespace, name))
            for name in props
            if getattr(namespace, name, None) is not None
        }
        bare: list[str] = getattr(namespace, "_positional", None) or []
        if command.positional is not None and bare:
            name = command.positional
            if _allows_array(props[name]):
                raw[name] = [*raw.get(name, []), *bare]
            elif name in raw or len(bare) > 1:
                raise UsageError(
                    f"{flag_name(name)} takes one value; give it once, as {flag_name(name)} or as a bare word. "
                    f"See '{self.binary} --help'."
                )
            else:
                raw[name] = bare[0]
        args, problems = convert_arguments(schema, raw)
        problems += check_arguments(schema, args, skip=raw.keys() - args.keys())
        problems += unknown_words(extra, [flag_name(name) for name in props])
        if problems:
            prog = " ".join([self.binary, *self._path(command)])
            raise UsageError(f"invalid arguments for {prog}: {'; '.join(problems)}. See '{prog} --help'.")
        return command, args

    def with_defaults(self, command: Command, args: Mapping[str, Any]) -> dict[str, Any]:
        """Fill schema defaults in: the binary owns its defaults, not the bridge."""
        filled = dict(args)
        for name, sub in (command.input_schema.get("properties") or {}).items():
            if name not in filled and isinstance(sub, dict) and "default" in sub:
                filled[name] = sub["default"]
        return filled

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Run the CLI; returns the exit code (one-line errors on stderr)."""
        args_in = list(sys.argv[1:] if argv is None else argv)
        # A bare --debug can never be a value: the bridge attaches values starting with "-".
        end = args_in.index("--") if "--" in args_in else len(args_in)
        debug = "--debug" in args_in[:end]
        if debug:
            args_in = [word for word in args_in[:end] if word != "--debug"] + args_in[end:]
            logging.basicConfig(
                level=logging.DEBUG, format=f"{self.binary}: %(levelname)s %(name)s: %(message)s"
            )
        return run_guarded(self.binary, lambda: self._dispatch(args_in), debug=debug)

    def _dispatch(self, args_in: list[str]) -> int:
        try:
            if args_in[:1] == ["--introspect"]:
                sys.stdout.write(json.dumps(self.document(), indent=2, ensure_ascii=False) + "\n")
                return 0
            if args_in[:1] == ["--version"]:
                sys.stdout.write(f"{self.binary} {self.version}\n")
                return 0
            if not args_in:
                self.parser().print_help(sys.stderr)
                return 2
            command, args = self.parse(args_in)
            try:
                code = command.handler(self.with_defaults(command, args))
            except KeyboardInterrupt:
                # One line for the person who pressed Ctrl-C (run_guarded stays quiet for the rest).
                name = " ".join(self._path(command))
                sys.stderr.write(f"\n{self.binary}: interrupted: {name} stopped; {command.on_interrupt}\n")
                return USER_INTERRUPT
            sys.stdout.flush()
            return int(code or 0)
        except SystemExit as exc:  # argparse --help
            return exc.code if isinstance(exc.code, int) else 0


def run_guarded(prog: str, work: Callable[[], int], *, debug: bool = False) -> int:
    """The one top-level handler of every korg command: domain errors become
    ``PROG: error: …`` and their exit code, Ctrl-C and a closed pipe end
    quietly, and nothing else reaches the user as a traceback unless ``debug``."""
    try:
        return work()
    except BaseExceptionGroup as group:
        inner = unwrap(group)
        if inner is group:
            return _internal(prog, group, debug)
        return run_guarded(prog, _reraise(inner), debug=debug)
    except KorgError as exc:
        if debug:
            logging.getLogger(prog).exception("failed")
        sys.stderr.write(f"{prog}: error: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return USER_INTERRUPT
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): nothing left to say to anyone.
        silence_stdout()
        return 0
    except Exception as exc:  # the last line of defence
        return _internal(prog, exc, debug)


def _reraise(exc: BaseException) -> Callable[[], int]:
    def again() -> int:
        raise exc

    return again


def _internal(prog: str, exc: BaseException, debug: bool) -> int:
    if debug:
        raise exc
    sys.stderr.write(
        f"{prog}: error: internal error: {type(exc).__name__}: {exc}. Rerun with --debug for details.\n"
    )
    return 1


def unwrap(exc: BaseException) -> BaseException:
    """Task groups wrap errors in exception groups; the user needs the one inside."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's own
    final flush cannot raise again and print a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
