"""Which search mode a recall call really runs, and the embedding model it needs.

``auto`` means hybrid when a model is on disk **and** its vectors cover at
least :data:`AUTO_HYBRID_COVERAGE` of the index's events; otherwise keyword,
with a one-line note saying how far embedding has got (the background
indexer fills the rest). Below that, too many events would be ranked by one
kind of evidence and the rest by two; keyword ranking is the honest answer
until the vectors catch up. An explicit ``semantic`` or ``hybrid`` always
runs as asked (missing vectors: not searched, resp. ranked by their keyword
evidence alone); without a model it is a dependency error whose message names
the exact command that fixes it.

All of it is judged from the file system, the environment and two SQL
aggregates: a keyword or substring call imports nothing of the embedding
stack, and ``auto`` only looks for files and counts.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from korg_bridge.config import ENV_RECALL_MODEL_DIR
from korg_bridge.errors import DependencyMissing

if TYPE_CHECKING:
    from korg_bridge.recall.semantic.model import Embedder
    from korg_bridge.recall.semantic.vectors import Coverage

__all__ = [
    "AUTO_HYBRID_COVERAGE",
    "RECALL_MODES",
    "SEMANTIC_MODES",
    "auto_mode",
    "load_for_mode",
    "missing_model_message",
    "resolve_mode",
    "shared_embedder",
]

logger = logging.getLogger(__name__)

RECALL_MODES = ["auto", "substring", "keyword", "semantic", "hybrid"]
SEMANTIC_MODES = ("semantic", "hybrid")
AUTO_HYBRID_COVERAGE = 0.9
"""Share of the index's events that must have a current vector before ``auto`` ranks by hybrid.

Events are embedded newest first, so at 90 % the recent history, where most
targets are, is covered; the rest still ranks by its keyword evidence (never
penalised). Below it a fresh history stays on keyword search, which hybrid
must never be worse than."""


def resolve_mode(mode: str, env: Mapping[str, str] | None = None) -> str:
    """The mode a model on disk allows: ``auto`` is hybrid when one is, else keyword.

    Judged from the file system alone (:func:`~korg_bridge.recall.semantic.model.model_available`):
    nothing heavy is imported here. :func:`auto_mode` then looks at coverage.

    Raises:
        DependencyMissing: semantic or hybrid asked for explicitly without a
            model; the message gives the command that fixes it.
    """
    if mode != "auto" and mode not in SEMANTIC_MODES:
        return mode  # keyword and substring: not even the model lookup is imported
    from korg_bridge.recall.semantic.model import model_available

    env = os.environ if env is None else env
    if mode == "auto":
        return "hybrid" if model_available(env) else "keyword"
    if mode in SEMANTIC_MODES and not model_available(env):
        raise DependencyMissing(missing_model_message(mode, env))
    return mode


def auto_mode(requested: str, used: str, coverage: Coverage | None) -> tuple[str, str | None]:
    """``auto``'s final choice once coverage is known, and the note that explains a fallback.

    Hybrid stays hybrid at :data:`AUTO_HYBRID_COVERAGE` or more; below it,
    keyword, with a note such as ``4,210 of 20,000 events embedded (21 %)``.
    Explicit modes pass through unchanged.
    """
    if requested != "auto" or used != "hybrid" or coverage is None:
        return used, None
    if coverage.fraction >= AUTO_HYBRID_COVERAGE:
        return used, None
    share = int(100 * coverage.fraction)
    return "keyword", (
        f"searched by keyword: {coverage.embedded:,} of {coverage.events:,} events embedded so far "
        f"({share} %, hybrid from {int(AUTO_HYBRID_COVERAGE * 100)} %)"
    )


def missing_model_message(mode: str, env: Mapping[str, str]) -> str:
    """One line naming the fastest fix: the extra and a model, or whichever of them is missing."""
    from korg_bridge.recall.semantic import embed, model

    missing = [name for name in model.BACKEND_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        if model.resolve_model(env) is not None:
            return f"mode {mode!r} needs the [semantic] extra; run `{model.INSTALL_FIX}`"
        return (
            f"mode {mode!r} needs the [semantic] extra and an embedding model; run "
            f"`{model.INSTALL_FIX} && {model.PULL_FIX}` (or set {ENV_RECALL_MODEL_DIR} to a local model directory)"
        )
    try:
        embed.load_embedder(env)  # no model on disk: raises before importing anything, naming the fix
    except DependencyMissing as exc:
        return f"mode {mode!r} needs a local embedding model: {exc.message}"
    return f"mode {mode!r} needs a local embedding model; run `{model.PULL_FIX}`"


_LOADED: dict[tuple[str, str, str], Embedder] = {}
"""Models this process loaded, by id, directory and file: a recall ranks memories and history
with one session, and a write embeds its text and its neighbours with one."""


_LOADED_BY: dict[tuple[str, str, str], int] = {}
"""The process that loaded (or last announced) each model: a resident engine's children did not."""


def shared_embedder(env: Mapping[str, str]) -> Embedder:
    """The model ``env`` selects, loaded once per process.

    Raises:
        DependencyMissing: as :func:`~korg_bridge.recall.semantic.embed.load_embedder`.
    """
    from korg_bridge.recall.semantic.embed import load_embedder
    from korg_bridge.recall.semantic.model import resolve_model

    spec = resolve_model(env)
    key = ("", "", "") if spec is None else (spec.model_id, str(spec.directory), spec.model_file)
    found = _LOADED.get(key)
    if found is None:
        found = load_embedder(env)  # raises for a missing model, naming the fix
        _LOADED[key] = found
        _LOADED_BY[key] = os.getpid()
    elif (
        _LOADED_BY.get(key) != os.getpid() and spec is not None
    ):  # loaded by the engine this child forked from
        from korg_bridge.recall.semantic.embed import announce

        announce(found, spec.directory)
        _LOADED_BY[key] = os.getpid()
    return found


def load_for_mode(requested: str, used: str, env: Mapping[str, str]) -> tuple[Embedder | None, str]:
    """Load the model for ``used``; under ``auto`` a model that fails to load means keyword search.

    Raises:
        DependencyMissing: the model cannot be loaded and semantic or hybrid was asked for explicitly.
    """
    try:
        return shared_embedder(env), used
    except DependencyMissing as exc:
        if requested != "auto":
            raise
        logger.warning("korg-recall: %s; searching by keyword instead", exc.message)
        return None, "keyword"
