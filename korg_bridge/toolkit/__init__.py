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

The kit lives in modules by concept: :mod:`.declaration` (what a callable declares),
:mod:`.parsing` (flags from a schema, one-line usage errors), :mod:`.schemacheck` (checking
values without jsonschema), :mod:`.kit` (the :class:`Toolkit` that ties them) and
:mod:`.guard` (the one top-level handler). Import the public names from here.
"""

from __future__ import annotations

from korg_bridge.toolkit.declaration import (
    DEFAULT_ON_INTERRUPT,
    USER_INTERRUPT,
    Command,
    CommandOptions,
    Handler,
)
from korg_bridge.toolkit.guard import run_guarded, silence_stdout, unwrap
from korg_bridge.toolkit.kit import Toolkit
from korg_bridge.toolkit.parsing import (
    add_schema_arguments,
    convert_arguments,
    unknown_words,
    usage_error,
    usage_message,
)

__all__ = [
    "DEFAULT_ON_INTERRUPT",
    "USER_INTERRUPT",
    "Command",
    "CommandOptions",
    "Handler",
    "Toolkit",
    "add_schema_arguments",
    "convert_arguments",
    "run_guarded",
    "silence_stdout",
    "unknown_words",
    "unwrap",
    "usage_error",
    "usage_message",
]
