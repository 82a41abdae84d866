"""The korg:introspect@v1 contract: what sinks a document, what skips one callable."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from korg_bridge.bridge.contract import contract_schema, parse_document
from korg_bridge.errors import DocumentError


def good_callable(command_id: str = "thump.run", **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "command_id": command_id,
        "name": command_id.rsplit(".", 1)[-1],
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        "capabilities": {"side_effects": "none", "output_mode": "stream"},
    }
    entry.update(overrides)
    return entry


def doc(*callables: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"schema": "korg:introspect@v1", "binary": "thump", "callables": list(callables), **top}


def test_shipped_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(contract_schema())


def test_peer_documents_validate_and_parse_fully(peers: Path) -> None:
    counts = {"korg": 13, "korgex": 7, "korg-recall-mcp": 1}
    for name, expected in counts.items():
        data = json.loads((peers / "introspect" / f"{name}.introspect.json").read_text())
        jsonschema.validate(data, contract_schema())
        parsed = parse_document(data)
        assert len(parsed.callables) == expected and not parsed.skipped
        assert parsed.binary == name
        for spec, raw in zip(parsed.callables, data["callables"], strict=True):
            assert spec.input_schema == raw["input_schema"]


def test_unknown_extra_keys_are_allowed_everywhere() -> None:
    data = doc(
        good_callable(future_field=1, capabilities={"side_effects": "none", "new": True}), extra={"x": 1}
    )
    jsonschema.validate(data, contract_schema())
    assert len(parse_document(data).callables) == 1


@pytest.mark.parametrize(
    ("data", "phrase"),
    [
        ([], "not an object"),
        ("text", "not an object"),
        ({"schema": "korg:introspect@v0", "callables": []}, "unsupported introspect schema"),
        ({"callables": []}, "unsupported introspect schema"),
        ({"schema": "korg:introspect@v1"}, "no 'callables' array"),
        ({"schema": "korg:introspect@v1", "callables": {}}, "no 'callables' array"),
        (doc(good_callable(), "x"), "callables[1] is a string"),
        (
            doc(good_callable(), {"command_id": "thump.x", "name": "x", "capabilities": {}}),
            "missing required field 'input_schema'",
        ),
        (doc(good_callable(name=5)), "callables[0].name must be a string"),
        (doc(good_callable(), good_callable()), "duplicate command_id 'thump.run'"),
    ],
)
def test_structural_faults_sink_the_document(data: Any, phrase: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_document(data, label="thump")
    assert phrase in info.value.message
    assert info.value.message.startswith("thump:")
    assert info.value.exit_code == 3
    assert "\n" not in info.value.message


def test_too_deep_documents_are_refused_without_recursing() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(5000):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(DocumentError, match="nested deeper"):
        parse_document(doc(good_callable(input_schema=schema)))


@pytest.mark.parametrize(
    ("entry", "phrase"),
    [
        (good_callable("thump.bad id!"), "segment 'bad id!'"),
        (good_callable("thump..x"), "segment ''"),
        (good_callable("thump.-rf"), "segment '-rf'"),
        (good_callable(input_schema={"type": "array"}), "type 'object'"),
        (good_callable(input_schema={"properties": {}}), "type 'object'"),
        (
            good_callable(input_schema={"type": "object", "properties": {"x": {"type": "nonsense"}}}),
            "not a valid JSON Schema",
        ),
        (
            good_callable(input_schema={"type": "object", "properties": {"bad name": {}}}),
            "cannot be a command-line flag",
        ),
        (
            good_callable(input_schema={"type": "object", "properties": {"-x": {}}}),
            "cannot be a command-line flag",
        ),
        (
            good_callable(input_schema={"type": "object", "properties": {"a=b": {}}}),
            "cannot be a command-line flag",
        ),
        (
            good_callable(input_schema={"type": "object", "properties": {"top_n": {}, "top-n": {}}}),
            "both map to flag --top-n",
        ),
        (good_callable(capabilities={"side_effects": 5}), "side_effects"),
        (good_callable(capabilities={"long_running": "yes"}), "long_running"),
    ],
)
def test_one_bad_callable_is_skipped_with_a_reason(entry: dict[str, Any], phrase: str) -> None:
    other = good_callable("thump.ok")
    parsed = parse_document(doc(entry, other))
    assert [c.command_id for c in parsed.callables] == ["thump.ok"]
    assert len(parsed.skipped) == 1
    assert phrase in parsed.skipped[0].reason


def test_validators_are_compiled_once_per_callable() -> None:
    parsed = parse_document(doc(good_callable()))
    spec = parsed.callables[0]
    assert spec.validator.is_valid({"q": "x"})
    assert not spec.validator.is_valid({"q": 1})


def test_exit_codes_merge_document_table_over_the_standard_one() -> None:
    parsed = parse_document(doc(good_callable(), exit_codes={"9": "error.custom", "2": "error.usage"}))
    assert parsed.exit_meaning(9) == "error.custom"
    assert parsed.exit_meaning(7) == "error.dependency_missing"
    assert parsed.exit_meaning(42) == "unknown"


def test_binary_name_falls_back_to_the_executable_file_name() -> None:
    data = doc(good_callable())
    del data["binary"]
    assert parse_document(copy.deepcopy(data), path="/usr/bin/thump").binary == "thump"
