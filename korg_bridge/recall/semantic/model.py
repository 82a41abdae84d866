"""Which embedding model the environment means, and whether it is on disk: files only, no heavy import.

Every korg-recall process asks this (is ``auto`` hybrid? which model id do stored vectors
need?), keyword-only ones included, so it reads small JSON files and directory entries and
imports nothing of numpy, onnxruntime or fastembed. Loading the model is
:mod:`korg_bridge.recall.semantic.embed`; running it, :mod:`korg_bridge.recall.semantic.encoder`.

Model resolution, first match wins:

1. ``KORG_RECALL_MODEL_DIR=DIR`` -- a local directory with ``model.onnx``,
   ``tokenizer.json`` and ``tokenizer_config.json`` (``config.json`` and
   ``special_tokens_map.json`` optional). Its ``korg-model.json``, if present,
   gives ``model_id``, ``dim``, ``pooling`` and ``normalize`` (this is what
   ``.ci/build_model_dir.py`` writes). Without one, a ``KORG_RECALL_MODEL``
   naming a fastembed model says what the directory holds; otherwise it is read
   as a mean-pooled sentence-transformers export (CLS if ``1_Pooling`` says so).
2. ``KORG_RECALL_MODEL`` (default :data:`DEFAULT_MODEL`) as pulled into
   :func:`model_cache_dir`; :func:`pull_model` leaves a small manifest there
   that records where fastembed put the files and how the model pools.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from korg_bridge._fs.safe_read import read_head, read_regular
from korg_bridge.config import ENV_RECALL_MODEL_DIR, model_name
from korg_bridge.errors import DependencyMissing
from korg_bridge.recall.paths import model_cache_dir, model_dir_setting

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray


DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
"""fastembed's default: small (67 MB int8), 384 dimensions, good English retrieval."""


MANIFEST = "korg-model.json"


INSTALL_FIX = "pip install 'korg-bridge[semantic]'"


PULL_FIX = "korg-recall model pull"


BACKEND_MODULES = ("numpy", "onnxruntime", "tokenizers")
"""What loading a model imports: the ``[semantic]`` extra minus fastembed (needed for pulls only)."""


MAX_MODEL_TOKENS = 512
"""The longest input any supported encoder reads; a config claiming more is not believed."""


_REQUIRED_FILES = ("tokenizer.json", "tokenizer_config.json")


class Embedder(Protocol):
    """Turns texts into unit vectors; ``model_id`` and ``dim`` are stored with each vector."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> NDArray[numpy.float32]:
        """float32 array of shape ``(len(texts), dim)`` with L2-normalized rows (each text's first window)."""
        ...

    def embed_windows(
        self, texts: Sequence[str], max_windows: Sequence[int]
    ) -> tuple[NDArray[numpy.float32], NDArray[numpy.int64]]:
        """Unit vectors of up to ``max_windows[i]`` windows of each text, and each row's text position."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What to load, worked out from the environment and files on disk only."""

    model_id: str
    """Stored beside every vector; a change of id means re-embedding."""
    directory: Path
    """The directory holding the ONNX file and the tokenizer."""
    fastembed_name: str | None
    """A model fastembed knows by name (its facts fill what the files leave open), or None."""
    model_file: str = "model.onnx"
    dim: int | None = None
    pooling: str | None = "mean"
    """``mean`` or ``cls``; None: ask fastembed (a pulled model recorded before pooling was)."""
    normalize: bool = True
    max_tokens: int | None = None
    """The longest input the model reads (korg-model.json's ``max_seq_length``), when known."""


def _named_model(env: Mapping[str, str]) -> str:
    return model_name(env) or DEFAULT_MODEL


def _pull_manifest(env: Mapping[str, str], model: str) -> Path:
    return model_cache_dir(env) / (model.replace("/", "--") + "." + MANIFEST)


JSON_CAP = 16 * 1024 * 1024
"""Bytes read of a model folder's JSON file: its configs are a few KB, a tokenizer a few MB."""


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in the regular file ``path``; None when it is missing, not a regular file
    (a FIFO there must not hang a command that only asks whether a model is present), over
    :data:`JSON_CAP`, or not a JSON object."""
    try:
        got = read_regular(path, JSON_CAP)
        value = json.loads(got.data.decode("utf-8")) if not got.over else None
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _fingerprint(path: Path) -> str:
    """A cheap, copy-stable identity for an undescribed ONNX file: its size and first MiB."""
    try:
        head = read_head(path, 1 << 20)
        size = path.stat().st_size
    except OSError:
        return "unreadable"
    return hashlib.sha256(str(size).encode() + head).hexdigest()[:12]


def _dir_spec(directory: Path, env: Mapping[str, str]) -> ModelSpec:
    manifest = read_json(directory / MANIFEST)
    if manifest is not None:
        return ModelSpec(
            model_id=str(manifest.get("model_id") or f"local/{directory.name}"),
            directory=directory,
            fastembed_name=None,
            model_file=str(manifest.get("model_file") or "model.onnx"),
            dim=positive_int(manifest.get("dim")),
            pooling=str(manifest.get("pooling") or "mean").lower(),
            normalize=bool(manifest.get("normalize", True)),
            max_tokens=positive_int(manifest.get("max_seq_length")),
        )
    named = model_name(env)
    if named:
        # fastembed knows this model's file name, pooling and dimension.
        return ModelSpec(
            model_id=named, directory=directory, fastembed_name=named, model_file="", pooling=None
        )
    pooling_cfg = read_json(directory / "1_Pooling" / "config.json") or {}
    config = read_json(directory / "config.json") or {}
    return ModelSpec(
        model_id=f"local/{directory.name}@{_fingerprint(directory / 'model.onnx')}",
        directory=directory,
        fastembed_name=None,
        dim=positive_int(config.get("hidden_size")),
        pooling="cls" if pooling_cfg.get("pooling_mode_cls_token") else "mean",
    )


def resolve_model(env: Mapping[str, str]) -> ModelSpec | None:
    """The model the environment selects, or None when its files are not on disk.

    Reads only small JSON files and directory entries: safe on the cold path.
    """
    raw_dir = model_dir_setting(env)
    if raw_dir:
        directory = Path(raw_dir).expanduser()
        spec = _dir_spec(directory, env)
        files = [*_REQUIRED_FILES, spec.model_file] if spec.model_file else list(_REQUIRED_FILES)
        if not all((directory / name).is_file() for name in files):
            return None
        if not spec.model_file and not any(directory.rglob("*.onnx")):
            return None
        return spec
    model = _named_model(env)
    pulled = read_json(_pull_manifest(env, model))
    if pulled is None or not isinstance(pulled.get("path"), str):
        return None
    directory = Path(pulled["path"])
    model_file = str(pulled.get("model_file") or "")
    if not model_file or not (directory / model_file).is_file():
        return None
    pooling = pulled.get("pooling")
    return ModelSpec(
        model_id=model,
        directory=directory,
        fastembed_name=model,
        model_file=model_file,
        dim=positive_int(pulled.get("dim")),
        pooling=str(pooling).lower() if isinstance(pooling, str) else None,
    )


def _backend_installed() -> bool:
    # find_spec locates the packages without running them: no heavy import here.
    return all(importlib.util.find_spec(name) is not None for name in BACKEND_MODULES)


def model_available(env: Mapping[str, str]) -> bool:
    """True when a semantic query could load a model now, judged from disk alone.

    Both halves are checked (the ``[semantic]`` extra is installed and the
    model's files are present) so a caller choosing between keyword and hybrid
    search never picks a path that then fails.
    """
    return _backend_installed() and resolve_model(env) is not None


def _missing_model_message(env: Mapping[str, str]) -> str:
    raw_dir = model_dir_setting(env)
    if raw_dir:
        return (
            f"{ENV_RECALL_MODEL_DIR}={raw_dir} holds no usable model (needs model.onnx, tokenizer.json, "
            f"tokenizer_config.json); point it at a model directory, or unset it and run `{PULL_FIX}`"
        )
    model = _named_model(env)
    return (
        f"embedding model {model!r} is not downloaded to {model_cache_dir(env)}; run `{PULL_FIX}` "
        f"(or set {ENV_RECALL_MODEL_DIR} to a local model directory)"
    )


def missing_extra(name: str | None) -> DependencyMissing:
    return DependencyMissing(
        f"semantic search needs the [semantic] extra ({name or 'a part of it'} is not installed); "
        f"run `{INSTALL_FIX}`"
    )
