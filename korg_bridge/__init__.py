"""korg-bridge: serve any ``korg:introspect@v1`` binary as MCP tools.

The public API, for agents that embed the bridge::

    import anyio
    from korg_bridge import discover, invoke, Policy

    async def main() -> None:
        doc = await discover("thump")
        result = await invoke(doc, "thump.echo", {"query": "hi"}, policy=Policy.parse("fs_write"))
        print(result.text)

    anyio.run(main)

Everything not listed in ``__all__`` is private.
"""

from __future__ import annotations

from korg_bridge._version import __version__

TYPE_CHECKING = False
"""``typing.TYPE_CHECKING`` without importing ``typing``: every ``korg-recall`` process imports this
package first, and a call an engine answers has no time for it (docs/engine.md)."""

# Names resolve lazily: ``korg-recall`` imports this package on every cold
# start, and must not pay for the MCP SDK it never uses.
_LAZY: dict[str, str] = {
    "build_argv": "bridge.argv",
    "CallableSpec": "bridge.contract",
    "Capabilities": "bridge.contract",
    "Document": "bridge.contract",
    "Skipped": "bridge.contract",
    "parse_document": "bridge.contract",
    "discover": "bridge.discovery",
    "ArgumentError": "errors",
    "BinaryNotFound": "errors",
    "ConfigError": "errors",
    "DependencyMissing": "errors",
    "DiscoveryError": "errors",
    "DocumentError": "errors",
    "KorgError": "errors",
    "NetworkError": "errors",
    "PolicyDenied": "errors",
    "ToolCallError": "errors",
    "UsageError": "errors",
    "invoke": "bridge.invocation",
    "CallResult": "bridge.output",
    "Policy": "bridge.policy",
    "BridgeOptions": "serving.server",
    "build_server": "serving.server",
    "serve_stdio": "serving.server",
}

if TYPE_CHECKING:
    from typing import Any

    from korg_bridge.bridge.argv import build_argv
    from korg_bridge.bridge.contract import CallableSpec, Capabilities, Document, Skipped, parse_document
    from korg_bridge.bridge.discovery import discover
    from korg_bridge.bridge.invocation import invoke
    from korg_bridge.bridge.output import CallResult
    from korg_bridge.bridge.policy import Policy
    from korg_bridge.errors import (
        ArgumentError,
        BinaryNotFound,
        ConfigError,
        DependencyMissing,
        DiscoveryError,
        DocumentError,
        KorgError,
        NetworkError,
        PolicyDenied,
        ToolCallError,
        UsageError,
    )
    from korg_bridge.serving.server import BridgeOptions, build_server, serve_stdio


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'korg_bridge' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
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
