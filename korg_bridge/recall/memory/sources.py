"""Outside sources a read takes in first: files someone else owns whose memories the store copies.

A read of memories (``memories``, ``recall`` over memories) first takes in what changed
in its own mirror (:func:`~.mirror.readback.sync_mirror`), then in every outside source
registered here: today Claude Code's memory folders and instructions files
(:mod:`korg_bridge.recall.interop.claude.intake`), registered by korg-recall's composition
root (:mod:`korg_bridge.recall.cli.wiring`) -- so the memory package never imports the
code that reads those files. A source answers four questions:

* ``may_hold``: a first look, before the memory machinery loads, whether it has anything
  at all (a ``recall`` by someone who never remembered anything stops here);
* ``anything_to_read``: whether it holds something worth creating a store for (reading
  never creates an empty store);
* ``take_in``: bring its changes into the open store (a write of its own, logged);
  returns the problems worth a line;
* ``describe``: its section of ``stats`` (None: nothing to say for this store).

Without a registered source a read sees the store alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store, Tx
    from korg_bridge.recall.memory.scopes import Context

__all__ = [
    "Source",
    "add_source",
    "describe",
    "may_hold_memories",
    "open_for_reading",
    "open_store_for_reading",
    "take_in",
]


@dataclass(frozen=True, slots=True)
class Source:
    """An outside source of memories, as a read sees it (see the module's docstring)."""

    name: str
    """Its name, also the key of its section in ``stats``."""
    may_hold: Callable[[Mapping[str, str], Sequence[str]], bool]
    anything_to_read: Callable[[Context, Sequence[str]], bool]
    take_in: Callable[[Store, Context, Sequence[str]], list[str]]
    describe: Callable[[Store, Tx], dict[str, Any] | None]


_sources: dict[str, Source] = {}


def add_source(source: Source) -> None:
    """Take ``source`` in before every read (the composition root's call; a name added again
    replaces that source in its place)."""
    _sources[source.name] = source


def may_hold_memories(env: Mapping[str, str], scopes: Sequence[str]) -> bool:
    """A first look, before a read loads the memory machinery: False only when there is no store
    and no source has anything to take in."""
    from korg_bridge.recall.paths import store_location

    where = store_location(env)
    if where.path is None or where.path.exists():
        return True
    return any(source.may_hold(env, scopes) for source in list(_sources.values()))


def open_store_for_reading(ctx: Context, worth_creating: Callable[[], bool]) -> Store | None:
    """The memory store for a read: the existing one; a new one only when ``worth_creating()``
    (else None: reading never creates an empty store).

    Raises:
        ConfigError: the store path cannot be used, or a bad switch value.
    """
    from korg_bridge.recall.memory.backend.factory import open_store
    from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
    from korg_bridge.recall.paths import store_location

    where = store_location(ctx.env)
    if where.path is None:
        return open_store(ctx.env)  # a team store: always there, and never fed from one person's folders
    if where.path.exists() or worth_creating():
        return SqliteStore(where.path)
    return None


def open_for_reading(ctx: Context, scopes: Sequence[str]) -> Store | None:
    """The memory store for a read of ``scopes``: the existing one, or a new one when a source
    holds something to take in.

    Raises:
        ConfigError: the store path cannot be used, or a source's switch has a bad value.
    """
    return open_store_for_reading(
        ctx, lambda: any(source.anything_to_read(ctx, scopes) for source in list(_sources.values()))
    )


def take_in(store: Store, ctx: Context, scopes: Sequence[str]) -> list[str]:
    """Bring what changed in every source into ``store``; the problems worth a line.

    Raises:
        ConfigError: a source's switch has a bad value.
        KorgError: the store fails.
    """
    problems: list[str] = []
    for source in list(_sources.values()):
        problems += source.take_in(store, ctx, scopes)
    return problems


def describe(store: Store, conn: Tx) -> dict[str, dict[str, Any]]:
    """Each source's section of ``stats`` (by its name), for those with something to say."""
    sections: dict[str, dict[str, Any]] = {}
    for source in list(_sources.values()):
        section = source.describe(store, conn)
        if section is not None:
            sections[source.name] = section
    return sections
