"""Property: what the bridge puts in argv, a parser built from the same schema reads back.

Two parsers are checked: a plain argparse parser built by the convention
(the issue's contract for any binary), and the toolkit's own parser (what
korg-recall uses), so the CLI and the schema cannot drift.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from korg_bridge.bridge.argv import build_argv
from korg_bridge.bridge.contract import parse_document
from korg_bridge.toolkit import Toolkit

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "top_n": {"type": "integer"},
        "ratio": {"type": "number"},
        "quiet": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "array", "items": {"type": "integer"}},
        "config": {"type": "object"},
        "mode": {"type": "string", "enum": ["fast", "-slow", "--x=y"]},
    },
}

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
arguments = st.fixed_dictionaries(
    {},
    optional={
        "query": text,
        "top_n": st.integers(),
        "ratio": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**6), 10**6),
        "quiet": st.just(True),
        "tags": st.lists(text, min_size=1, max_size=4),
        "counts": st.lists(st.integers(), min_size=1, max_size=4),
        "config": st.dictionaries(text, json_values, max_size=4),
        "mode": st.sampled_from(["fast", "-slow", "--x=y"]),
    },
)

KIT = Toolkit("thump", "0")


@KIT.command("thump.run", description="Run.", input_schema=SCHEMA, side_effects="none", output_mode="stream")
def _run(args: dict[str, Any]) -> int:
    return 0


DOC = parse_document(KIT.document(), path="/bin/thump")


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def convention_parser() -> argparse.ArgumentParser:
    """A parser any binary author would write by reading the argv table."""
    parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    parser.add_argument("--query")
    parser.add_argument("--top-n", dest="top_n", type=int)
    parser.add_argument("--ratio", type=_number)
    parser.add_argument("--quiet", action="store_true", default=None)
    parser.add_argument("--tags", action="append")
    parser.add_argument("--counts", action="append", type=int)
    parser.add_argument("--config", type=json.loads)
    parser.add_argument("--mode")
    return parser


def same(sent: dict[str, Any], got: dict[str, Any]) -> bool:
    # Floats are compared by value: the bridge sends 5.0 as "5".
    return json.dumps(sent, sort_keys=True) == json.dumps(got, sort_keys=True) or sent == got


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(arguments)
def test_convention_parser_reads_back_exactly_the_arguments_sent(args: dict[str, Any]) -> None:
    argv = build_argv(DOC, "thump.run", args)
    assert argv[:2] == ["/bin/thump", "run"]
    namespace = convention_parser().parse_args(argv[2:])
    got = {k: v for k, v in vars(namespace).items() if v is not None}
    assert same(args, got), (args, argv, got)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(arguments)
def test_toolkit_parser_reads_back_exactly_the_arguments_sent(args: dict[str, Any]) -> None:
    argv = build_argv(DOC, "thump.run", args)
    command, got = KIT.parse(argv[1:])
    assert command.command_id == "thump.run"
    assert same(args, got), (args, argv, got)


def test_a_value_of_two_dashes_reads_back_as_two_dashes() -> None:
    """Python 3.11's argparse drops an attached ``--`` (``--query=--`` read as ``[]``): the
    toolkit keeps it, alone and in an array."""
    _, got = KIT.parse(["run", "--query=--", "--tags=--", "--tags=x"])
    assert got == {"query": "--", "tags": ["--", "x"]}
