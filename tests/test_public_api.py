"""The public API is a tested contract: the exported names, and the library example of docs/bridge.md."""

from __future__ import annotations

import re
import subprocess
import sys
from types import ModuleType

import korg_bridge
import korg_bridge.toolkit
from tests.helpers.cli import python_env
from tests.helpers.paths import REPO

EXPECTED = [
    "ArgumentError",
    "BinaryNotFound",
    "BridgeOptions",
    "CallResult",
    "CallableSpec",
    "Capabilities",
    "ConfigError",
    "DependencyMissing",
    "DiscoveryError",
    "Document",
    "DocumentError",
    "KorgError",
    "NetworkError",
    "Policy",
    "PolicyDenied",
    "Skipped",
    "ToolCallError",
    "UsageError",
    "__version__",
    "build_argv",
    "build_server",
    "discover",
    "invoke",
    "parse_document",
    "serve_stdio",
]


def test_exported_members_are_pinned() -> None:
    assert sorted(korg_bridge.__all__) == sorted(EXPECTED)
    for name in EXPECTED:
        assert getattr(korg_bridge, name) is not None, name


TOOLKIT_EXPECTED = [
    "Command",
    "CommandOptions",
    "DEFAULT_ON_INTERRUPT",
    "Handler",
    "Toolkit",
    "USER_INTERRUPT",
    "add_schema_arguments",
    "convert_arguments",
    "run_guarded",
    "silence_stdout",
    "unknown_words",
    "unwrap",
    "usage_error",
    "usage_message",
]


def test_toolkit_exported_members_are_pinned() -> None:
    assert sorted(korg_bridge.toolkit.__all__) == sorted(TOOLKIT_EXPECTED)
    for name in TOOLKIT_EXPECTED:
        assert getattr(korg_bridge.toolkit, name) is not None, name


def test_toolkit_exports_every_public_name_it_holds() -> None:
    """As httpx's test_exported_members: a public name in the namespace that is not in ``__all__``
    is either a forgotten export or a leak; the submodules the kit is split into are the exception."""
    submodules = {name for name, value in vars(korg_bridge.toolkit).items() if isinstance(value, ModuleType)}
    public = {name for name in vars(korg_bridge.toolkit) if not name.startswith("_")} - submodules
    assert public - {"annotations"} == set(korg_bridge.toolkit.__all__)


def test_every_error_carries_an_exit_code() -> None:
    for name in EXPECTED:
        obj = getattr(korg_bridge, name)
        if isinstance(obj, type) and issubclass(obj, korg_bridge.KorgError):
            assert obj("x").exit_code in range(1, 8)


def test_the_docs_library_example_runs_and_prints_what_it_says() -> None:
    readme = (REPO / "docs" / "bridge.md").read_text()
    match = re.search(
        r"<!-- example: library -->\n```python\n(.*?)```\n\nprints\n\n```\n(.*?)```", readme, re.S
    )
    assert match, "docs/bridge.md lost its library example"
    code, expected = match.groups()
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=python_env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
