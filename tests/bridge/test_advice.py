"""Each kind of violation worded as the fix, with JSON values and plain paths."""

from __future__ import annotations

from typing import Any

import pytest

from korg_bridge.bridge.advice import render, report, summary
from korg_bridge.bridge.validation import compile_schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "level": {"const": "max"},
        "step": {"type": "integer", "multipleOf": 5},
        "ids": {"type": "array", "uniqueItems": True, "minItems": 1},
        "name": {"not": {"const": "root"}},
        "nothing": False,
        "either": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]},
        "one": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        "ratio": {"type": "number", "exclusiveMaximum": 1},
        "meta": {"type": "object", "additionalProperties": False, "properties": {"a": {}}},
    },
}


@pytest.mark.parametrize(
    ("arguments", "phrase"),
    [
        ({"level": "min"}, 'level must be "max", got "min"'),
        ({"step": 7}, "step must be a multiple of 5, got 7"),
        ({"ids": [1, 1]}, "ids must not repeat items"),
        ({"ids": []}, "ids must have at least 1 item, got 0"),
        ({"name": "root"}, 'name must not be "root"'),
        ({"nothing": 1}, "1 is not allowed here"),
        ({"either": "long"}, "either does not match any of the allowed forms (closest: "),
        ({"one": 3}, "one matches more than one of the allowed forms; make it match exactly one"),
        ({"ratio": 1}, "ratio must be less than 1, got 1"),
        ({"meta": {"a": 1, "b": 2}}, "meta: Additional properties are not allowed ('b' was unexpected)"),
    ],
)
def test_each_violation_reads_as_its_fix(arguments: dict[str, Any], phrase: str) -> None:
    validator = compile_schema(SCHEMA, "input_schema")
    phrases = report(list(validator.iter_errors(arguments)), [], list(SCHEMA["properties"]))
    assert any(p.startswith(phrase) for p in phrases), phrases


def test_the_schemas_own_complaint_about_undeclared_arguments_is_not_repeated() -> None:
    validator = compile_schema({**SCHEMA, "additionalProperties": False}, "input_schema")
    phrases = report(list(validator.iter_errors({"bogus": 1})), ["bogus"], ["level", "step"])
    assert phrases == ['unknown argument "bogus" (known: level, step)']


def test_values_are_json_and_long_ones_are_cut() -> None:
    assert render(None) == "null" and render(True) == "true" and render("é") == '"é"'
    assert render("x" * 100) == '"' + "x" * 38 + "…"


def test_a_long_report_counts_what_it_leaves_out() -> None:
    assert summary([f"p{i}" for i in range(25)]).endswith("; p19; and 5 more")
