"""The :class:`Toolkit`: a binary's callables, its ``--introspect`` document and its CLI, from one
declaration (see :mod:`korg_bridge.toolkit` for an example)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Unpack

from korg_bridge.errors import EXIT_CODES, UsageError
from korg_bridge.toolkit.declaration import (
    DEFAULT_ON_INTERRUPT,
    USER_INTERRUPT,
    Command,
    CommandOptions,
    Handler,
)
from korg_bridge.toolkit.guard import run_guarded
from korg_bridge.toolkit.parsing import (
    Parser,
    add_schema_arguments,
    convert_arguments,
    description_text,
    help_text,
    shield_dashes,
    unknown_words,
    unshield,
)
from korg_bridge.toolkit.schemacheck import allows_array, check_arguments, flag_name, primary_type

__all__ = ["Toolkit"]

_DECLARATION_KEYS = frozenset({"name", "extra", "positional", "surfaces", "cli_properties", "on_interrupt"})
"""The keywords of :meth:`Toolkit.command` that shape the declaration; the rest are capabilities."""


def _check_declaration(command_id: str, input_schema: Mapping[str, Any], positional: str | None) -> None:
    """Refuse, when the binary starts, a declaration the command line could not honour.

    Raises:
        ValueError: the schema declares ``debug``, or ``positional`` is not a string or array property.
    """
    props = input_schema.get("properties") or {}
    if "debug" in props:
        raise ValueError(f"{command_id}: 'debug' is reserved for the toolkit's --debug flag")
    if positional is not None:
        sub = props.get(positional)
        if not isinstance(sub, dict) or not (allows_array(sub) or primary_type(sub) == "string"):
            raise ValueError(f"{command_id}: positional {positional!r} must be a string or array property")


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
        self._built: dict[tuple[object, ...], argparse.ArgumentParser] = {}

    def command(
        self,
        command_id: str,
        *,
        description: str,
        input_schema: dict[str, Any],
        side_effects: str,
        output_mode: str,
        **options: Unpack[CommandOptions],
    ) -> Callable[[Handler], Handler]:
        """Declare a callable; the decorated function receives the parsed arguments
        (schema defaults filled in) and returns an exit code.

        ``positional`` names a string or array property that the command line
        also takes as bare words (see the module docstring). ``surfaces=["cli"]``
        declares a command-line-only callable (marked ``cli_only``: the bridge does
        not serve it); ``cli_properties`` are flags the command line takes but
        ``input_schema`` leaves out. ``on_interrupt`` ends the one line a Ctrl-C
        prints (``BINARY: interrupted: COMMAND stopped; …``): what the next run does.
        Every other keyword (:class:`CommandOptions`) is a capability field.

        Raises:
            ValueError: ``positional`` is not a string or array property, or the
                schema declares ``debug`` (the toolkit's own flag).
        """
        positional = options.get("positional")
        _check_declaration(command_id, input_schema, positional)
        capabilities = {key: value for key, value in options.items() if key not in _DECLARATION_KEYS}

        def register(handler: Handler) -> Handler:
            caps: dict[str, Any] = {
                "output_mode": output_mode,
                "side_effects": side_effects,
                "requires_project": False,
                "long_running": False,
                "stateful": False,
                "reads_stdin": False,
                "supports_output_path": False,
            }
            caps.update(capabilities)
            self.commands.append(
                Command(
                    command_id=command_id,
                    name=options.get("name") or command_id.rsplit(".", 1)[-1],
                    description=description,
                    input_schema=input_schema,
                    capabilities=caps,
                    handler=handler,
                    extra=dict(options.get("extra") or {}),
                    positional=positional,
                    surfaces=tuple(options.get("surfaces", ("cli", "mcp"))),
                    cli_properties=dict(options.get("cli_properties") or {}),
                    on_interrupt=options.get("on_interrupt", DEFAULT_ON_INTERRUPT),
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
        root = Parser(prog=self.binary, description=description_text(self.description), allow_abbrev=False)
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
                    help=help_text(command.description.split(". ")[0]) if is_leaf else None,
                    description=description_text(command.description) if is_leaf else None,
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

    def _parser_for(self, chosen: Sequence[Command]) -> argparse.ArgumentParser:
        """:meth:`parser` for ``chosen`` (none: every command), built once per process and locale.

        A resident engine builds each command's parser before it forks (:meth:`warm_parsers`), so
        a call does not spend milliseconds on argparse. argparse translates its words (``usage:``)
        as it builds, from the locale variables: a caller with other ones gets a parser of its own.
        """
        import os

        key = (
            tuple(id(command) for command in chosen),
            *(os.environ.get(name) for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")),
        )
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = self.parser(list(chosen) or None)
        return built

    def warm_parsers(self) -> None:
        """Build the parser of every command (and the full tree) for this process's locale."""
        for command in self.commands:
            self._parser_for([command])
        self._parser_for([])

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
        words = [shield_dashes(word) for word in argv]
        chosen = [c for c in self.commands if words[: len(self._path(c))] == self._path(c)]
        chosen = [c for c in chosen if len(self._path(c)) == max(len(self._path(x)) for x in chosen)]
        namespace, extra = self._parser_for(chosen).parse_known_args(words)
        command: Command | None = getattr(namespace, "_command", None)
        if command is None:
            if extra:
                raise UsageError(f"{'; '.join(unknown_words(extra, ()))}. See '{self.binary} --help'.")
            raise UsageError(f"missing command. See '{self.binary} --help'.")
        schema = command.cli_schema()
        props = schema.get("properties") or {}
        raw = {
            name: unshield(getattr(namespace, name))
            for name in props
            if getattr(namespace, name, None) is not None
        }
        bare: list[str] = getattr(namespace, "_positional", None) or []
        if command.positional is not None and bare:
            name = command.positional
            if allows_array(props[name]):
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
