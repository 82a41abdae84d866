"""The optional v1 ``resource`` extension: a read-only callable's stdout served as an MCP resource,
through the SDK's real client (in process) and a real binary (korg-recall's ``context``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from korg_bridge import BridgeOptions, build_server, discover
from korg_bridge.bridge.contract import parse_document
from korg_bridge.recall.cli.app import main as korg_recall_main
from tests.helpers.cli import recall_script
from tests.helpers.paths import FIXTURE_BINS

pytestmark = pytest.mark.anyio


def korg_recall() -> str:
    return str(recall_script())


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "shop"
    repo.mkdir()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, timeout=30)
    monkeypatch.chdir(repo)
    return repo


def document_with(resource: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "command_id": "lamp.brief",
        "name": "brief",
        "input_schema": {"type": "object", "properties": {"budget": {"type": "integer"}}},
        "capabilities": {"side_effects": "fs_read", "output_mode": "stream"},
        "resource": resource,
    }
    entry.update(overrides)
    return {"schema": "korg:introspect@v1", "binary": "lamp", "callables": [entry]}


async def test_korg_recall_serves_its_brief_as_the_korg_context_resource(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        korg_recall_main(["remember", "--content", "Deploys need two approvals.", "--type", "feedback"]) == 0
    )
    capsys.readouterr()
    document = await discover(korg_recall())
    async with Client(build_server(document, BridgeOptions(cwd=str(project), reload=False))) as client:
        assert client.server_capabilities.resources is not None
        listed = (await client.list_resources()).resources
        assert [(r.uri, r.name, r.mime_type) for r in listed] == [("korg://context", "context", "text/plain")]
        read = await client.read_resource("korg://context")
        (content,) = read.contents
        assert content.uri == "korg://context"
        assert "Deploys need two approvals." in content.text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("korg://nothing-here")
        assert unknown.value.error.code == -32002


async def test_a_resource_whose_callable_fails_is_a_protocol_error_naming_why(project: Path) -> None:
    store = Path(os.environ["XDG_DATA_HOME"]) / "korg-recall" / "memory.sqlite"
    store.parent.mkdir(parents=True)
    store.write_bytes(b"someone's notes, not a database")
    document = await discover(korg_recall())
    async with Client(build_server(document, BridgeOptions(cwd=str(project), reload=False))) as client:
        with pytest.raises(MCPError) as failed:
            await client.read_resource("korg://context")
    assert "reading korg://context failed" in failed.value.error.message
    assert "is not a SQLite database" in failed.value.error.message


async def test_a_binary_without_resources_advertises_none() -> None:
    document = await discover(str(FIXTURE_BINS / "thump"))
    async with Client(build_server(document, BridgeOptions(reload=False))) as client:
        assert client.server_capabilities.resources is None


def test_a_resource_is_parsed_with_its_defaults() -> None:
    parsed = parse_document(document_with({"uri": "lamp://brief"}))
    spec = parsed.get("lamp.brief")
    assert spec is not None and spec.resource is not None
    assert (spec.resource.uri, spec.resource.name, spec.resource.mime_type) == (
        "lamp://brief",
        "brief",
        "text/plain",
    )


@pytest.mark.parametrize(
    ("resource", "overrides", "reason"),
    [
        (
            {"uri": "lamp://brief"},
            {"capabilities": {"side_effects": "fs_write", "output_mode": "stream"}},
            "changes nothing",
        ),
        (
            {"uri": "lamp://brief"},
            {"input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}},
            "no required properties",
        ),
        ({"uri": "no scheme"}, {}, "does not match"),
        ({"name": "brief"}, {}, "'uri' is a required property"),
    ],
)
def test_a_resource_that_cannot_be_read_safely_skips_its_callable(
    resource: dict[str, Any], overrides: dict[str, Any], reason: str
) -> None:
    parsed = parse_document(document_with(resource, **overrides))
    assert parsed.callables == ()
    (skipped,) = parsed.skipped
    assert skipped.command_id == "lamp.brief" and reason in skipped.reason
