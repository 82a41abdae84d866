"""Which search mode a recall call really runs, and the embedding model it needs.

``auto`` means hybrid when a model is on disk and keyword otherwise; an
explicit ``semantic`` or ``hybrid`` without a model is a dependency error
whose message names the exact command that fixes it. All of it is judged
from the file system and the environment: a keyword or substring call
imports nothing of the embedding stack, and ``auto`` only looks for files.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from korg_bridge.errors import DependencyMissing

if TYPE_CHECKING:
    from korg_bridge.recall.embed import Embedder

__all__ = ["RECALL_MODES", "SEMANTIC_MODES", "load_for_mode", "missing_model_message", "resolve_mode"]

logger = logging.getLogger(__name__)

RECALL_MODES = ["auto", "substring", "keyword", "semantic", "hybrid"]
SEMANTIC_MODES = ("semantic", "hybrid")


def resolve_mode(mode: str, env: Mapping[str, str] | None = None) -> str:
    """The mode actually used: ``auto`` is hybrid when a model is on disk, else keyword.

    Judged from the file system alone (:func:`~korg_bridge.recall.embed.model_available`):
    nothing heavy is imported here.

    Raises:
        DependencyMissing: semantic or hybrid asked for explicitly without a
            model; the message gives the command that fixes it.
    """
    if mode != "auto" and mode not in SEMANTIC_MODES:
        return mode  # keyword and substring: not even the model lookup is imported
    from korg_bridge.recall.embed import model_available

    env = os.environ if env is None else env
    if mode == "auto":
        return "hybrid" if model_available(env) else "keyword"
    if mode in SEMANTIC_MODES and not model_available(env):
        raise DependencyMissing(missing_model_message(mode, env))
    return mode


def missing_model_message(mode: str, env: Mapping[str, str]) -> str:
    """One line naming the fastest fix: the extra and a model, or whichever of them is missing."""
    from korg_bridge.recall import embed

    if importlib.util.find_spec("fastembed") is None:
        if embed.resolve_model(env) is not None:
            return f"mode {mode!r} needs the [semantic] extra; run `{embed.INSTALL_FIX}`"
        return (
            f"mode {mode!r} needs the [semantic] extra and an embedding model; run "
            f"`{embed.INSTALL_FIX} && {embed.PULL_FIX}` (or set {embed.MODEL_DIR_ENV} to a local model directory)"
        )
    try:
        embed.load_embedder(env)  # no model on disk: raises before importing anything, naming the fix
    except DependencyMissing as exc:
        return f"mode {mode!r} needs a local embedding model: {exc.message}"
    return f"mode {mode!r} needs a local embedding model; run `{embed.PULL_FIX}`"


def load_for_mode(requested: str, used: str, env: Mapping[str, str]) -> tuple[Embedder | None, str]:
    """Load the model for ``used``; under ``auto`` a model that fails to load means keyword search.

    Raises:
        DependencyMissing: the model cannot be loaded and semantic or hybrid was asked for explicitly.
    """
    from korg_bridge.recall.embed import load_embedder

    try:
        return load_embedder(env), used
    except DependencyMissing as exc:
        if requested != "auto":
            raise
        logger.warning("korg-recall: %s; searching by keyword instead", exc.message)
        return None, "keyword"
