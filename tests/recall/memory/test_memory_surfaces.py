"""What only a person at a terminal may do stays off the bridge: command-line-only callables
(``cli_only``) and command-line-only flags, as the toolkit declares them and the bridge reads them."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from korg_bridge.bridge.argv import arguments_to_flags
from korg_bridge.bridge.contract import contract_schema, parse_document
from korg_bridge.errors import ArgumentError
from korg_bridge.recall.cli.app import kit as korg_recall
from korg_bridge.toolkit import Toolkit

pytestmark = pytest.mark.no_store


def make_kit(calls: list[dict[str, Any]]) -> Toolkit:
    kit = Toolkit("demo", "1.0")

    @kit.command(
        "demo.list",
        description="List things.",
        input_schema={"type": "object", "properties": {"kind": {"type": "string"}}},
        side_effects="fs_read",
        output_mode="envelope",
        cli_properties={"approve": {"type": "array", "items": {"type": "string"}}},
    )
    def listing(args: dict[str, Any]) -> int:
        calls.append(args)
        return 0

    @kit.command(
        "demo.restore",
        description="A person's act.",
        input_schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        side_effects="fs_write",
        output_mode="envelope",
        surfaces=["cli"],
    )
    def restore(args: dict[str, Any]) -> int:
        calls.append(args)
        return 0

    return kit


def test_a_cli_only_callable_is_marked_and_skipped_by_the_bridge() -> None:
    document = make_kit([]).document()
    jsonschema.validate(document, contract_schema())
    entry = next(c for c in document["callables"] if c["command_id"] == "demo.restore")
    assert (entry["surfaces"], entry["cli_only"]) == (["cli"], True)
    parsed = parse_document(document)
    assert [c.command_id for c in parsed.callables] == ["demo.list"]
    assert [(s.command_id, s.reason) for s in parsed.skipped] == [
        ("demo.restore", "offered on the cli surface only")
    ]


def test_surfaces_cli_alone_does_not_stop_the_bridge_from_serving_a_callable() -> None:
    # The ecosystem's binaries (korg, korgex, the fixtures) say surfaces ["cli"] on the very
    # callables the bridge exists to serve; only the explicit marker keeps one off.
    document = make_kit([]).document()
    for entry in document["callables"]:
        entry.pop("cli_only", None)
        entry["surfaces"] = ["cli"]
    assert [c.command_id for c in parse_document(document).callables] == ["demo.list", "demo.restore"]


def test_cli_only_flags_parse_on_the_command_line_and_stay_out_of_the_schema() -> None:
    calls: list[dict[str, Any]] = []
    kit = make_kit(calls)
    assert kit.main(["list", "--approve", "a", "--approve", "b"]) == 0
    assert calls == [{"approve": ["a", "b"]}]
    document = parse_document(kit.document())
    spec = document.get("demo.list")
    assert spec is not None and set(spec.properties) == {"kind"}
    with pytest.raises(ArgumentError, match="unknown argument"):
        arguments_to_flags(spec, {"approve": ["a"]})


def test_korg_recall_serves_four_memory_tools_and_keeps_approval_restore_export_import_for_people() -> None:
    document = parse_document(korg_recall.document())
    served = {c.command_id for c in document.callables}
    assert {
        "korg-recall.remember",
        "korg-recall.revise",
        "korg-recall.forget",
        "korg-recall.memories",
    } <= served
    assert [(s.command_id, s.reason) for s in document.skipped] == [
        (f"korg-recall.{name}", "offered on the cli surface only")
        for name in (
            "restore",
            "store.migrate",
            "export",
            "import",
            "hooks.install",
            "hooks.uninstall",
            "sync",
            "sync.init",
            "sync.status",
            "sync.config",
            "serve",
            "engine",
        )
    ]
    memories = document.get("korg-recall.memories")
    assert memories is not None and not set(memories.properties) & {"approve", "pending", "stats"}
    sides = {c.command_id: c.capabilities.side_effects for c in document.callables}
    assert [sides[f"korg-recall.{n}"] for n in ("remember", "revise", "forget", "memories")] == [
        "fs_write", "fs_write", "fs_write", "fs_read",
    ]  # fmt: skip


def test_importing_the_memory_package_pulls_in_no_heavy_module() -> None:
    import subprocess
    import sys

    code = (
        "import sys, korg_bridge.recall.cli.app\n"
        "import korg_bridge.recall.memory.operations, korg_bridge.recall.memory.forget\n"
        "import korg_bridge.recall.memory.stats, korg_bridge.recall.memory.listing\n"
        "import korg_bridge.recall.memory.transfer.importer, korg_bridge.recall.memory.transfer.export\n"
        "import korg_bridge.recall.memory.recall_view\n"
        "heavy = [m for m in ('numpy', 'jsonschema', 'mcp', 'fastembed', 'psycopg') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""
