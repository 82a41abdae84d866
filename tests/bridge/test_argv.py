"""Argv mapping: the ecosystem convention, plus the cases the references get wrong."""

from __future__ import annotations

from typing import Any

import pytest

from korg_bridge.bridge.argv import build_argv, flag_name, format_scalar, subcommand_path
from korg_bridge.bridge.contract import Document, parse_document
from korg_bridge.errors import ArgumentError


def make_doc(properties: dict[str, Any], command_id: str = "thump.run", binary: str = "thump") -> Document:
    return parse_document(
        {
            "schema": "korg:introspect@v1",
            "binary": binary,
            "callables": [
                {
                    "command_id": command_id,
                    "name": "run",
                    "input_schema": {"type": "object", "properties": properties},
                    "capabilities": {"side_effects": "none", "output_mode": "stream"},
                }
            ],
        },
        path=f"/opt/bin/{binary}",
    )


ALL = {
    "query": {"type": "string"},
    "top_n": {"type": "integer"},
    "quiet": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "config": {"type": "object"},
    "ratio": {"type": "number"},
}


def flags(arguments: dict[str, Any]) -> list[str]:
    return build_argv(make_doc(ALL), "thump.run", arguments)[2:]


def test_string_becomes_separate_flag_and_value() -> None:
    assert flags({"query": "x"}) == ["--query", "x"]


def test_underscores_become_hyphens() -> None:
    assert flags({"top_n": 5}) == ["--top-n", "5"]
    assert flag_name("a_b_c") == "--a-b-c"


def test_true_is_a_bare_flag_and_false_or_null_is_omitted() -> None:
    assert flags({"quiet": True}) == ["--quiet"]
    assert flags({"quiet": False}) == []
    assert flags({"query": None}) == []


def test_arrays_repeat_the_flag() -> None:
    assert flags({"tags": ["a", "b"]}) == ["--tags", "a", "--tags", "b"]
    assert flags({"tags": []}) == []


def test_objects_become_compact_json() -> None:
    assert flags({"config": {"a": [1, 2], "b": "ü"}}) == ["--config", '{"a":[1,2],"b":"ü"}']


@pytest.mark.parametrize("value", ["-x", "--rm -rf", "--c=d", "-", "--", "-5"])
def test_value_starting_with_dash_cannot_become_a_flag(value: str) -> None:
    assert flags({"query": value}) == [f"--query={value}"]


def test_negative_numbers_use_the_attached_form() -> None:
    assert flags({"top_n": -3}) == ["--top-n=-3"]
    assert flags({"ratio": -0.5}) == ["--ratio=-0.5"]


def test_numbers_keep_their_exact_value() -> None:
    assert flags({"ratio": 0.1}) == ["--ratio", "0.1"]
    assert flags({"ratio": 1e-7}) == ["--ratio", "1e-07"]
    assert flags({"top_n": 12345678901234567890}) == ["--top-n", "12345678901234567890"]
    assert flags({"ratio": 5.0}) == ["--ratio", "5"]
    assert float(flags({"ratio": 1e300})[1]) == 1e300


def test_flags_follow_schema_order_not_argument_order() -> None:
    assert flags({"quiet": True, "query": "q"}) == ["--query", "q", "--quiet"]


def test_nul_in_a_value_is_refused() -> None:
    with pytest.raises(ArgumentError, match="NUL"):
        flags({"query": "a\x00b"})
    with pytest.raises(ArgumentError, match=r"tags\[1\]"):
        flags({"tags": ["ok", "b\x00"]})


def test_non_finite_numbers_are_refused() -> None:
    with pytest.raises(ArgumentError, match="finite"):
        flags({"ratio": float("nan")})


def test_only_declared_properties_may_become_flags() -> None:
    with pytest.raises(ArgumentError, match="unknown argument") as info:
        flags({"query": "x", "rm": True})
    assert "'rm'" in info.value.message
    assert info.value.exit_code == 2


def test_command_id_starting_with_binary_drops_it() -> None:
    assert subcommand_path("thump.bun.script.run", "thump") == ["bun", "script", "run"]


def test_command_id_not_starting_with_binary_keeps_all_segments() -> None:
    assert subcommand_path("other.tool", "thump") == ["other", "tool"]
    doc = make_doc({}, command_id="other.tool")
    assert build_argv(doc, "other.tool", {}) == ["/opt/bin/thump", "other", "tool"]


def test_executable_file_name_also_counts_as_the_binary_name() -> None:
    doc = make_doc({}, command_id="thump-dev.run", binary="thump")
    doc = Document(doc.binary, doc.version, doc.callables, doc.skipped, doc.exit_codes, "/x/thump-dev")
    assert build_argv(doc, "thump-dev.run", {}) == ["/x/thump-dev", "run"]


def test_scalar_formatting_inside_arrays() -> None:
    assert format_scalar(True, "x") == "true"
    assert format_scalar({"k": None}, "x") == '{"k":null}'
    assert format_scalar([1, "a"], "x") == '[1,"a"]'


def test_unknown_command_id_is_an_argument_error() -> None:
    with pytest.raises(ArgumentError, match="unknown command_id"):
        build_argv(make_doc({}), "thump.nope", {})
