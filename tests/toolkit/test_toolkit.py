"""The introspect toolkit: one declaration gives the document and the CLI."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from korg_bridge.bridge.contract import contract_schema, parse_document
from korg_bridge.errors import ConfigError, UsageError
from korg_bridge.toolkit import Toolkit

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to find"},
        "top_n": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
        "loud": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"type": "string", "enum": ["a", "b"]},
    },
    "required": ["query"],
}


def make_kit(calls: list[dict[str, Any]]) -> Toolkit:
    kit = Toolkit("demo", "1.0", description="A demo.", exit_codes={9: "error.demo"})

    @kit.command(
        "demo.find",
        description="Find things.",
        input_schema=SCHEMA,
        side_effects="fs_read",
        output_mode="stream",
    )
    def find(args: dict[str, Any]) -> int:
        calls.append(args)
        print("found", args["query"])
        return 0

    @kit.command(
        "demo.model.pull",
        description="Pull a model.",
        input_schema={"type": "object"},
        side_effects="network",
        output_mode="envelope",
        long_running=True,
    )
    def pull(args: dict[str, Any]) -> int:
        raise ConfigError("no network here. Try again online.")

    return kit


def test_document_validates_against_the_bridge_contract() -> None:
    kit = make_kit([])
    document = kit.document()
    jsonschema.validate(document, contract_schema())
    parsed = parse_document(document)
    assert [c.command_id for c in parsed.callables] == ["demo.find", "demo.model.pull"]
    assert parsed.exit_meaning(9) == "error.demo"
    assert parsed.callables[1].capabilities.long_running


def test_introspect_and_version_print_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    kit = make_kit([])
    assert kit.main(["--introspect"]) == 0
    assert json.loads(capsys.readouterr().out) == kit.document()
    assert kit.main(["--version"]) == 0
    assert capsys.readouterr().out == "demo 1.0\n"


def test_handler_gets_parsed_arguments_with_schema_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[dict[str, Any]] = []
    assert make_kit(calls).main(["find", "--query=-x", "--tags", "a", "--tags=-b", "--loud"]) == 0
    assert calls == [{"query": "-x", "tags": ["a", "-b"], "loud": True, "top_n": 5}]
    assert capsys.readouterr().out == "found -x\n"


def test_nested_command_ids_become_nested_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert make_kit([]).main(["model", "pull"]) == 3
    err = capsys.readouterr().err
    assert err == "demo: error: no network here. Try again online.\n"


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["find"], "--query is required"),
        (["find", "--query", "x", "--top-n", "0"], "--top-n must be at least 1, got 0"),
        (["find", "--query", "x", "--top-n", "abc"], '--top-n must be an integer, got "abc"'),
        (["find", "--query", "x", "--mode", "c"], '--mode must be one of a, b, got "c"'),
        (["find", "--query", "x", "--top", "3"], "unknown option --top (did you mean --top-n?)"),
        (["nope"], 'unknown command "nope"'),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(
    argv: list[str], phrase: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert make_kit([]).main(argv) == 2
    err = capsys.readouterr().err
    assert phrase in err and err.count("\n") == 1 and err.startswith("demo: error:")


def test_parse_raises_usage_error_without_a_command() -> None:
    with pytest.raises(UsageError):
        make_kit([]).parse(["--loud"])


def test_no_arguments_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert make_kit([]).main([]) == 2
    assert "find" in capsys.readouterr().err


def test_toolkit_import_stays_light() -> None:
    import subprocess
    import sys

    code = "import sys, korg_bridge.toolkit; print(sorted(m for m in ('jsonschema', 'mcp', 'anyio') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "text", ["At least 90 % of events.", "100%", "%(prog)s and 50 %", "%o %d %(default)s %%"]
)
def test_help_shows_descriptions_with_percent_signs_as_written(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kit = Toolkit("pct", "1.0", description=f"Root: {text}")

    @kit.command(
        "pct.run",
        description=f"Run it. {text}",
        input_schema={"type": "object", "properties": {"level": {"type": "string", "description": text}}},
        side_effects="none",
        output_mode="stream",
    )
    def run(args: dict[str, Any]) -> int:
        return 0

    for argv in (["--help"], ["run", "--help"]):
        assert kit.main(argv) == 0
        out = capsys.readouterr().out
        assert " ".join(text.split()) in " ".join(out.split()), out
