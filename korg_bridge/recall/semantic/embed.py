"""Text embeddings for korg-recall's semantic search, loaded only when asked for.

Why it looks like this:

* **Cold start.** Keyword and substring queries must stay fast, so this module
  imports nothing heavy at import time: numpy, onnxruntime and tokenizers are
  imported inside :func:`load_embedder`, fastembed inside :func:`pull_model`
  only. :func:`model_available` answers from the file system alone.
* **Offline by construction.** Only :func:`pull_model` (``korg-recall model
  pull``, the one callable declared ``network``) may reach the network; no
  ``fs_read`` callable calls it, so the default policy never lets a model
  trigger a download. Loading reads a local directory and nothing else, so an
  offline machine with no model gets a
  :class:`~korg_bridge.errors.DependencyMissing` (exit 7) at once.
* **onnxruntime directly, fastembed for downloads.** Embedding throughput is
  tokens (see :mod:`korg_bridge.recall.semantic.windows`), so the model is run by
  :mod:`korg_bridge.recall.semantic.encoder` with our own tokenisation: windows instead
  of cuts, batches of like lengths padded per batch, side by side, full graph
  optimisation. A fresh process loads the packaged int8 MiniLM in about
  0.3 s this way (fastembed: about 0.8 s, its import included). fastembed
  (the ``[semantic]`` extra) is kept for what it does well: knowing which
  files, pooling and size each named model has, and downloading them.
* **Model identity.** Every vector is stored beside ``Embedder.model_id`` and
  ``Embedder.dim``; vectors of different models are never compared.

Which model is meant, and whether one is on disk, is :mod:`korg_bridge.recall.semantic.model` (no heavy
import there).
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge._fs.durable import replace_ours
from korg_bridge.config import ENV_RECALL_MODEL_DIR
from korg_bridge.errors import DependencyMissing, NetworkError
from korg_bridge.recall.paths import model_cache_dir
from korg_bridge.recall.semantic.model import (
    BACKEND_MODULES,
    DEFAULT_MODEL,
    Embedder,
    ModelSpec,
    _missing_model_message,
    _named_model,
    _pull_manifest,
    missing_extra,
    positive_int,
    resolve_model,
)

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_POOLING_OF_CLASS = {
    "OnnxTextEmbedding": "cls",
    "PooledNormalizedEmbedding": "mean",
    "PooledEmbedding": "mean",
}
"""fastembed's model families this loader runs, by how they pool (the others need their own code)."""


def _import_fastembed() -> Any:
    try:
        from fastembed import TextEmbedding
    except ImportError as exc:
        raise missing_extra(exc.name or "fastembed") from exc
    # korg-recall reports failures itself, in one line; fastembed would print
    # its own multi-line loguru records to stderr.
    try:
        from loguru import logger
    except ImportError:  # a fastembed that no longer logs through loguru
        pass
    else:
        logger.disable("fastembed")
    return TextEmbedding


def _fastembed_facts(name: str) -> tuple[Any, Any]:
    """fastembed's model class and description for ``name``.

    Raises:
        DependencyMissing: fastembed is not installed or does not know ``name``.
    """
    text_embedding = _import_fastembed()
    for embedding_cls in text_embedding.EMBEDDINGS_REGISTRY:
        for description in embedding_cls._list_supported_models():
            if description.model.lower() == name.lower():
                return embedding_cls, description
    raise DependencyMissing(
        f"fastembed does not know the model {name!r}; pick one from "
        f"`TextEmbedding.list_supported_models()` or set {ENV_RECALL_MODEL_DIR} to a local model directory"
    )


def _pooling_of(embedding_cls: Any, name: str) -> str:
    pooling = _POOLING_OF_CLASS.get(embedding_cls.__name__)
    if pooling is None:
        raise DependencyMissing(
            f"korg-recall cannot run {name!r} (a {embedding_cls.__name__} model); pick a CLS- or "
            f"mean-pooled text encoder such as {DEFAULT_MODEL!r}"
        )
    return pooling


def _completed(spec: ModelSpec) -> ModelSpec:
    """``spec`` with what only fastembed knows filled in (a named model without a full manifest)."""
    if spec.fastembed_name is None or (spec.pooling and spec.dim and spec.model_file):
        return spec
    embedding_cls, description = _fastembed_facts(spec.fastembed_name)
    model_file = spec.model_file
    if not model_file:
        wanted = Path(str(description.model_file)).name
        found = sorted(spec.directory.rglob(wanted)) or sorted(spec.directory.rglob("*.onnx"))
        model_file = str(found[0].relative_to(spec.directory)) if found else str(description.model_file)
    return replace(
        spec,
        model_file=model_file,
        dim=spec.dim or positive_int(description.dim),
        pooling=spec.pooling or _pooling_of(embedding_cls, spec.fastembed_name),
    )


def load_embedder(env: Mapping[str, str], *, threads: int | None = None) -> Embedder:
    """Load the selected model from local files; never touches the network.

    ``threads``: batches run at once (default: one per core this process may use).

    Raises:
        DependencyMissing: the ``[semantic]`` extra is not installed, or the
            model is not on disk (the message names the command that fixes it),
            or its files cannot be loaded.
    """
    spec = resolve_model(env)
    if spec is None:
        raise DependencyMissing(_missing_model_message(env))
    missing = [name for name in BACKEND_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise missing_extra(missing[0])
    from korg_bridge.recall.semantic.encoder import OnnxEmbedder

    embedder = OnnxEmbedder(_completed(spec), threads=threads)
    announce(embedder, spec.directory)
    return embedder


def announce(embedder: Embedder, directory: Path) -> None:
    """The debug line of a model loaded for this call (also said by an engine's child, whose
    engine loaded it before the call: ``--debug`` shows the same lines either way)."""
    log.debug("loaded embedding model %s (dim %d) from %s", embedder.model_id, embedder.dim, directory)


def pull_model(env: Mapping[str, str], model: str | None = None) -> Path:
    """Download ``model`` (default: ``KORG_RECALL_MODEL`` or :data:`DEFAULT_MODEL`) into the cache.

    The only function here that uses the network. It records where fastembed
    put the files, and how the model pools, in a manifest beside them, which is
    what :func:`model_available` and :func:`load_embedder` look for. Pulling a
    model that is already cached finishes without a download.

    Raises:
        DependencyMissing: the ``[semantic]`` extra is not installed, fastembed
            does not know ``model`` (or korg-recall cannot run it), or the cache cannot be written.
        NetworkError: no download source could be reached (offline, a proxy, the hub down).
    """
    name = (model or "").strip() or _named_model(env)
    embedding_cls, description = _fastembed_facts(name)
    pooling = _pooling_of(embedding_cls, name)
    cache = model_cache_dir(env)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        # One attempt: an explicit step should fail in seconds and say so, not sleep 40 s.
        directory = Path(embedding_cls.download_model(description, str(cache), retries=1))
    except (ValueError, ConnectionError, TimeoutError) as exc:
        # fastembed tries every source, logs each failure and raises ValueError when none answered.
        raise NetworkError(
            f"could not download embedding model {name!r}: no download source could be reached "
            f"({str(exc).rstrip('.')}). Check the network (and HTTPS_PROXY); offline, copy a model folder "
            f"(model.onnx and tokenizer.json) from a machine that has one and set {ENV_RECALL_MODEL_DIR} to it"
        ) from exc
    except OSError as exc:
        raise DependencyMissing(
            f"could not download embedding model {name!r} into {cache}: {str(exc).rstrip('.')}; "
            f"free space or permissions, or bring the model as a directory with {ENV_RECALL_MODEL_DIR}"
        ) from exc
    manifest = {
        "format": "korg-model@1",
        "model_id": name,
        "dim": description.dim,
        "path": str(directory),
        "model_file": description.model_file,
        "pooling": pooling,
    }
    try:
        replace_ours(_pull_manifest(env, name), (json.dumps(manifest, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise DependencyMissing(f"cannot record the pulled model in {cache}: {exc}") from exc
    return directory
