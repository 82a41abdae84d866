"""The public API is a tested contract: the exported names, and the library example of docs/bridge.md."""

from __future__ import annotations

import re
import subprocess
import sys

import korg_bridge
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
