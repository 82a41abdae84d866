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
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .errors import EXIT_CODES, KorgError, UsageError
from .schemacheck import check_value

Handler = Callable[[dict[str, Any]], "int | None"]

USER_INTERRUPT = 6
"""``error.user_interrupt`` in the exit-code table."""


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
    surfaces: tuple[str, ...] = ("cli", "mcp")
    """Where the callable is offered. Without ``mcp`` the entry also says ``cli_only: true``, the
    marker the bridge honours (``surfaces`` alone is informational: see docs/introspect-v1.md)."""
    cli_properties: dict[str, Any] = field(default_factory=dict)
    """Flags only the command line takes (JSON Schema properties kept out of ``input_schema``, so
    no tool call can pass them): acts reserved for a person at a terminal."""

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


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so every
    error goes through the one handler and stays one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}. See '{self.prog} --help'.")


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
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected JSON, got {text!r}") from None


def _boolean_word(text: str) -> bool:
    if text in ("true", "false"):
        return text == "true"
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


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
    """One flag per property, by the bridge's convention (see :mod:`korg_bridge.argv`)."""
    props = schema.get("properties") or {}
    for prop, sub in props.items():
        flag = "--" + prop.replace("_", "-")
        sub = sub if isinstance(sub, dict) else {}
        kind = _primary_type(sub)
        help_text = sub.get("description")
        if kind == "boolean":
            parser.add_argument(flag, dest=prop, action="store_true", default=None, help=help_text)
        elif kind == "array":
            raw_items = sub.get("items")
            items: Mapping[str, Any] = raw_items if isinstance(raw_items, dict) else {}
            convert = _CONVERTERS.get(_primary_type(items), str)
            parser.add_argument(flag, dest=prop, action="append", type=convert, default=None, help=help_text)
        else:
            parser.add_argument(
                flag, dest=prop, type=_CONVERTERS.get(kind, str), default=None, help=help_text
            )


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
        surfaces: Sequence[str] = ("cli", "mcp"),
        cli_properties: Mapping[str, Any] | None = None,
        **capabilities: Any,
    ) -> Callable[[Handler], Handler]:
        """Declare a callable; the decorated function receives the parsed arguments
        (schema defaults filled in) and returns an exit code.

        ``surfaces=["cli"]`` declares a command-line-only callable (marked ``cli_only``: the bridge
        does not serve it); ``cli_properties`` are flags the command line takes but ``input_schema``
        leaves out.
        """

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
                    surfaces=tuple(surfaces),
                    cli_properties=dict(cli_properties or {}),
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
        root = _Parser(prog=self.binary, description=self.description, allow_abbrev=False)
        root.add_argument("--introspect", action="store_true", help="print the korg:introspect@v1 document")
        root.add_argument("--version", action="store_true", help="print the version")
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
                    help=command.description.split(". ")[0] if is_leaf else None,
                    description=command.description if is_leaf else None,
                    allow_abbrev=False,
                )
                parsers[prefix] = child
            leaf = parsers[path]
            add_schema_arguments(leaf, command.cli_schema())
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
        words = list(argv)
        chosen = [c for c in self.commands if words[: len(self._path(c))] == self._path(c)]
        chosen = [c for c in chosen if len(self._path(c)) == max(len(self._path(x)) for x in chosen)]
        namespace = self.parser(chosen or None).parse_args(words)
        command: Command | None = getattr(namespace, "_command", None)
        if command is None:
            raise UsageError(f"missing command. See '{self.binary} --help'.")
        schema = command.cli_schema()
        props = schema.get("properties") or {}
        args = {
            name: getattr(namespace, name) for name in props if getattr(namespace, name, None) is not None
        }
        problems = check_value(schema, args)
        if problems:
            raise UsageError(f"invalid arguments for {command.command_id}: {'; '.join(problems)}")
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
        return run_guarded(self.binary, lambda: self._dispatch(args_in))

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
            code = command.handler(self.with_defaults(command, args))
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
