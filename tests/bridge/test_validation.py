"""Schemas checked whole at discovery, so validation at call time can neither recurse
forever, fetch anything, nor take a name that ends in a newline."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from korg_bridge.bridge.contract import parse_document
from korg_bridge.bridge.toolnames import SAFE_NAME_RE, is_safe_name
from korg_bridge.bridge.validation import compile_schema, validate
from korg_bridge.errors import ArgumentError, DocumentError


def _doc(*callables: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "korg:introspect@v1", "binary": "thump", "callables": list(callables)}


def _callable(command_id: str = "thump.run", **schema: Any) -> dict[str, Any]:
    return {
        "command_id": command_id,
        "name": "run",
        "input_schema": {"type": "object", **schema},
        "capabilities": {"side_effects": "none", "output_mode": "stream"},
    }


@pytest.mark.parametrize(
    ("schema", "phrase"),
    [
        (
            {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}},
            "refers back to itself",
        ),
        ({"anyOf": [{"type": "string"}, {"$ref": "#"}]}, "refers back to itself"),
        ({"properties": {"x": {"$ref": "#/$defs/missing"}}}, "cannot be resolved"),
        ({"properties": {"x": {"$ref": "http://127.0.0.1:9/never.json"}}}, "cannot be resolved"),
        ({"properties": {"x": {"type": "string", "pattern": "a{99999999999}"}}}, "at most 10,000"),
        ({"patternProperties": {"(": {}}}, "not a valid regular expression"),
    ],
)
def test_schema_faults_are_found_at_discovery(schema: dict[str, Any], phrase: str) -> None:
    with pytest.raises(DocumentError) as info:
        compile_schema({"type": "object", **schema}, "input_schema")
    assert phrase in info.value.message


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"tree": {"$ref": "#"}}},  # recursion that consumes the value is fine
        {
            "$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}},
            "properties": {"x": {"$ref": "#/$defs/n"}},
        },
        {"properties": {"s": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}},
        {
            "$id": "https://example.com/root",
            "$defs": {"a": {"$id": "a", "type": "string"}},
            "properties": {"x": {"$ref": "a"}},
        },
        {"properties": {"pattern": {"type": "string"}, "properties": {"type": "integer"}}},
    ],
)
def test_sound_schemas_compile(schema: dict[str, Any]) -> None:
    compile_schema({"type": "object", **schema}, "input_schema")


def test_ordinary_validation_reports_the_same_violations_as_before() -> None:
    validator = compile_schema(
        {
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
        },
        "input_schema",
    )
    good = {"code": "ABC", "x-count": 1}
    bad = {"code": "abcd", "x-count": "1", "other": 2}
    assert not list(validator.iter_errors(good))
    kinds = sorted(e.validator for e in validator.iter_errors(bad))
    assert kinds == ["additionalProperties", "pattern", "type"]


@pytest.mark.anyio
async def test_validation_that_runs_out_of_time_is_an_argument_error() -> None:
    validator = compile_schema(
        {"type": "object", "properties": {"s": {"pattern": "^(a|aa)+(?=b)"}}}, "input_schema"
    )
    with anyio.fail_after(30), pytest.raises(ArgumentError) as info:
        await validate(validator, {"s": "a" * 40 + "!"}, time_limit=0.3)
    assert info.value.message.startswith(
        "argument validation took longer than 0.3 s (pattern '^(a|aa)+(?=b)'"
    )


def test_names_ending_in_a_newline_skip_the_callable() -> None:
    parsed = parse_document(
        _doc(
            _callable("thump.run\n"),
            _callable("thump.prop", properties={"q\n": {"type": "string"}}),
            _callable("thump.ok", properties={"q": {"type": "string"}}),
        )
    )
    assert [c.command_id for c in parsed.callables] == ["thump.ok"]
    reasons = {s.command_id: s.reason for s in parsed.skipped}
    assert "not a safe subcommand word" in reasons["thump.run\n"]
    assert "cannot be a command-line flag" in reasons["thump.prop"]


def test_a_tool_name_ending_in_a_newline_is_not_safe() -> None:
    assert is_safe_name("thump_run") and not is_safe_name("thump_run\n")
    assert SAFE_NAME_RE.fullmatch("x" * 64) and not SAFE_NAME_RE.fullmatch("x" * 65)


def test_one_callables_bad_schema_leaves_the_others_served() -> None:
    parsed = parse_document(
        _doc(
            _callable("thump.bad", properties={"x": {"type": "string", "pattern": "(" * 5000}}),
            _callable("thump.worse", properties={"x": {"$ref": "#/nowhere"}}),
            _callable("thump.good"),
        )
    )
    assert [c.command_id for c in parsed.callables] == ["thump.good"]
    assert {s.command_id for s in parsed.skipped} == {"thump.bad", "thump.worse"}
