"""The tool catalogue: every served callable of every bridged binary.

A catalogue is immutable. Drift reload builds a new one and swaps the
reference, so a call in flight keeps the entry (and document) it started
with while ``tools/list`` already shows the new version.

It also owns what clients see of each tool besides the schema: the safe
name, the title, the description with capability tags, the ``_meta`` block,
an optional output schema, and annotations derived from the capabilities
(hints for clients that auto-approve reads; the policy gate stays the only
enforcement).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from korg_bridge.bridge.contract import CallableSpec, Document
from korg_bridge.bridge.policy import Policy
from korg_bridge.bridge.toolnames import assign_names
from korg_bridge.errors import ConfigError

META_PREFIX = "dev.korg/"


def capability_tags(spec: CallableSpec) -> str:
    caps = spec.capabilities
    long_running = "true" if caps.long_running else "false"
    return (
        f"[side_effects: {caps.side_effects or 'unspecified'}, "
        f"output_mode: {caps.output_mode or 'unspecified'}, long_running: {long_running}]"
    )


def tool_description(spec: CallableSpec) -> str:
    """The callable's description (or name), then its capability tags."""
    return f"{spec.description or spec.name} {capability_tags(spec)}"


def annotations_for(spec: CallableSpec) -> types.ToolAnnotations:
    """Client hints from ``side_effects``.

    ``none``/``fs_read`` are read-only and closed-world; ``fs_write`` is
    destructive; ``ledger_write`` writes but only appends; ``network`` reaches
    an open world. An unknown effect claims nothing reassuring.
    """
    effect = spec.capabilities.side_effects
    idempotent = spec.capabilities.raw.get("idempotent") is True
    common: dict[str, Any] = {"title": spec.name, "idempotent_hint": idempotent}
    if effect in ("none", "fs_read"):
        return types.ToolAnnotations(read_only_hint=True, open_world_hint=False, **common)
    if effect == "fs_write":
        return types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, open_world_hint=False, **common
        )
    if effect == "ledger_write":
        return types.ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False, **common
        )
    if effect == "network":
        return types.ToolAnnotations(read_only_hint=False, open_world_hint=True, **common)
    return types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True, **common)


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """``--include-tool`` / ``--exclude-tool`` globs, matched against ``command_id``."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def admits(self, command_id: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(command_id, g) for g in self.include):
            return False
        return not any(fnmatch.fnmatchcase(command_id, g) for g in self.exclude)


@dataclass(frozen=True, slots=True)
class Entry:
    """One served tool: its MCP name, its callable and document, and the policy verdict."""

    name: str
    spec: CallableSpec
    document: Document
    allowed: bool
    denial: str


class Catalogue:
    """The tools of one or more documents under one policy; lookup by name or command_id.

    Raises (from the constructor):
        ConfigError: two binaries declare the same ``command_id`` or map to
            the same tool name.
    """

    def __init__(
        self,
        documents: Document | Sequence[Document],
        policy: Policy,
        tool_names: str = "safe",
        tool_filter: ToolFilter | None = None,
    ) -> None:
        self.documents: tuple[Document, ...] = (
            (documents,) if isinstance(documents, Document) else tuple(documents)
        )
        self.policy = policy
        flt = tool_filter or ToolFilter()
        self.entries: list[Entry] = []
        self.excluded: list[tuple[Document, CallableSpec]] = []
        self._lookup: dict[str, Entry] = {}
        owner: dict[str, int] = {}
        for index, document in enumerate(self.documents):
            admitted = [c for c in document.callables if flt.admits(c.command_id)]
            self.excluded.extend((document, c) for c in document.callables if not flt.admits(c.command_id))
            names = assign_names((c.command_id for c in admitted), tool_names)
            for spec in admitted:
                name = names[spec.command_id]
                for key, what in ((spec.command_id, "command_id"), (name, "tool name")):
                    other = owner.get(key)
                    if other is not None and other != index:
                        raise ConfigError(
                            f"{what} {key!r} is declared by both {_label(self.documents[other])} and "
                            f"{_label(document)}; "
                            "bridge them in separate servers, or drop one with --exclude-tool."
                        )
                owner[spec.command_id] = index
                owner[name] = index
                decision = policy.check(spec)
                entry = Entry(name, spec, document, decision.allowed, decision.reason)
                self.entries.append(entry)
                self._lookup[name] = entry
        for entry in self.entries:
            # Either form is accepted; a tool name wins if it equals another's command_id.
            self._lookup.setdefault(entry.spec.command_id, entry)
        self._tools = [self._tool(entry) for entry in self.entries]
        self._resources: dict[str, Entry] = {}
        for entry in self.entries:
            resource = entry.spec.resource
            if resource is None or not entry.allowed:
                continue
            holder = self._resources.get(resource.uri)
            if holder is not None:
                raise ConfigError(
                    f"resource {resource.uri!r} is declared by both {holder.spec.command_id!r} and "
                    f"{entry.spec.command_id!r}; drop one with --exclude-tool."
                )
            self._resources[resource.uri] = entry

    def find(self, name: str) -> Entry | None:
        return self._lookup.get(name)

    def tools(self) -> list[types.Tool]:
        return list(self._tools)

    def resources(self) -> list[types.Resource]:
        """The optional v1 ``resource`` extension: each allowed callable declaring one."""
        out: list[types.Resource] = []
        for uri, entry in self._resources.items():
            resource = entry.spec.resource
            assert resource is not None
            out.append(
                types.Resource(
                    uri=uri,
                    name=resource.name,
                    description=resource.description or entry.spec.description,
                    mime_type=resource.mime_type,
                    _meta={f"{META_PREFIX}command_id": entry.spec.command_id},
                )
            )
        return out

    def find_resource(self, uri: str) -> Entry | None:
        return self._resources.get(uri)

    def _tool(self, entry: Entry) -> types.Tool:
        spec = entry.spec
        meta: dict[str, Any] = {
            f"{META_PREFIX}command_id": spec.command_id,
            f"{META_PREFIX}binary": entry.document.binary,
            f"{META_PREFIX}side_effects": spec.capabilities.side_effects,
            f"{META_PREFIX}output_mode": spec.capabilities.output_mode,
            f"{META_PREFIX}allowed": entry.allowed,
        }
        if not entry.allowed:
            meta[f"{META_PREFIX}denied"] = entry.denial
        return types.Tool(
            name=entry.name,
            title=spec.command_id,
            description=tool_description(spec),
            input_schema=spec.input_schema,
            output_schema=spec.output_schema,
            annotations=annotations_for(spec),
            _meta=meta,
        )


def _label(document: Document) -> str:
    return f"{document.binary!r} ({document.path})" if document.path else repr(document.binary)
