"""The toolkit's terminal conveniences: a declared positional property, and string-or-array flags.

The bridge only ever sends flags, so neither may change the ``--introspect`` document or
what a flag means; they only add ways for a person to type the same arguments.
"""

from __future__ import annotations

from typing import Any

import pytest

from korg_bridge.errors import UsageError
from korg_bridge.toolkit import Toolkit

REFS = {"type": ["string", "array"], "items": {"type": "string"}, "minItems": 1, "description": "Refs."}
NAME = {"type": "string", "description": "A name."}


def make_kit() -> Toolkit:
    kit = Toolkit("demo", "1.0")

    @kit.command(
        "demo.show",
        description="Show refs.",
        input_schema={"type": "object", "properties": {"ref": REFS, "context": {"type": "integer"}}},
        side_effects="none",
        output_mode="envelope",
        positional="ref",
    )
    def show(args: dict[str, Any]) -> int:
        return 0

    @kit.command(
        "demo.greet",
        description="Greet.",
        input_schema={"type": "object", "properties": {"name": NAME}},
        side_effects="none",
        output_mode="stream",
        positional="name",
    )
    def greet(args: dict[str, Any]) -> int:
        return 0

    return kit


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["show", "e1"], {"ref": ["e1"]}),
        (["show", "e1", "e2", "--context", "3"], {"ref": ["e1", "e2"], "context": 3}),
        (["show", "--ref", "e1", "e2"], {"ref": ["e1", "e2"]}),
        (["show", "--ref", "e1", "--ref", "e2"], {"ref": ["e1", "e2"]}),
        (["greet", "ada"], {"name": "ada"}),
        (["greet", "--name", "ada"], {"name": "ada"}),
    ],
)
def test_a_positional_fills_its_property_like_the_flag_does(
    argv: list[str], expected: dict[str, Any]
) -> None:
    assert make_kit().parse(argv)[1] == expected


@pytest.mark.parametrize("argv", [["greet", "ada", "bob"], ["greet", "--name", "ada", "bob"]])
def test_a_string_positional_takes_one_value(argv: list[str]) -> None:
    with pytest.raises(UsageError, match="name takes one value"):
        make_kit().parse(argv)


def test_the_document_is_the_same_with_or_without_a_positional() -> None:
    for entry in make_kit().document()["callables"]:
        assert "positional" not in entry
        assert "positional" not in entry["capabilities"]


@pytest.mark.parametrize("prop", ["missing", "context"])
def test_only_a_declared_string_or_array_property_can_be_positional(prop: str) -> None:
    with pytest.raises(ValueError, match="positional"):
        Toolkit("demo", "1").command(
            "demo.x",
            description="x",
            input_schema={"type": "object", "properties": {"context": {"type": "integer"}}},
            side_effects="none",
            output_mode="none",
            positional=prop,
        )


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_a_number_flag_refuses_values_no_bound_can_check(value: str) -> None:
    kit = Toolkit("demo", "1")

    @kit.command(
        "demo.n",
        description="n",
        input_schema={"type": "object", "properties": {"x": {"type": "number", "maximum": 1}}},
        side_effects="none",
        output_mode="none",
    )
    def n(args: dict[str, Any]) -> int:
        return 0

    with pytest.raises(UsageError, match="finite number"):
        kit.parse(["n", f"--x={value}"])
