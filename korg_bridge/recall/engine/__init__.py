"""The resident engine: ``korg-recall`` hands each call to a long-lived process that has every
module (and the embedding model) loaded, and forks a child per call.

* :mod:`~korg_bridge.recall.engine.front` -- the ``korg-recall`` console script: the standard
  library only, it hands the call over or runs it itself;
* :mod:`~korg_bridge.recall.engine.server` -- the engine: listens, forks, reaps, exits when idle;
* :mod:`~korg_bridge.recall.engine.child` -- one call inside a forked child;
* :mod:`~korg_bridge.recall.engine.command` -- ``korg-recall engine [--status|--stop]``.

This ``__init__`` is imported by every ``korg-recall`` process, so it imports nothing.
See docs/engine.md.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on the engine's front path
if TYPE_CHECKING:
    from typing import Any

_serving: dict[str, Any] | None = None
"""Set in an engine's child for the call it runs: which engine answered (``stats`` says so)."""


def answered() -> dict[str, Any]:
    """Whether this call is answered by an engine (``{"answered": true, "pid": …}``) or not."""
    return {"answered": _serving is not None, **(_serving or {})}
