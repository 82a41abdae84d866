"""Text embeddings for korg-recall's semantic search, loaded only when asked for.

Why it looks like this:

* **Cold start.** Keyword and substring queries must stay fast, so this module
  imports nothing heavy at import time: numpy, fastembed, onnxruntime and
  tokenizers are imported inside :func:`load_embedder` and :func:`pull_model`
  only. :func:`model_available` answers from the file system alone.
* **Offline by construction.** Only :func:`pull_model` (``korg-recall model
  pull``, the one callable declared ``network``) may reach the network; no
  ``fs_read`` callable calls it, so the default policy never lets a model
  trigger a download. Loading always goes
  through fastembed's ``specific_model_path``, which hands fastembed a directory
  and returns before any hub lookup, so an offline machine with no model gets a
  :class:`~korg_bridge.errors.DependencyMissing` (exit 7) at once instead of
  fastembed's ~40 s of retries.
* **One backend.** fastembed (the ``[semantic]`` extra) loads both the named
  models it knows and local model directories: for a directory described by a
  ``korg-model.json`` (or by nothing) the model is registered with fastembed
  as a custom model with the right pooling, so no second onnxruntime code path
  is needed. Measured: the int8 MiniLM directory loads in ~0.8 s in a fresh
  process, fastembed's import included.
* **Model identity.** Every vector is stored beside ``Embedder.model_id`` and
  ``Embedder.dim``; vectors of different models are never compared.

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
   that records where fastembed put the files.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from korg_bridge.errors import DependencyMissing

if TYPE_CHECKING:
    import numpy
    from fastembed import TextEmbedding
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"
"""fastembed's default: small (67 MB int8), 384 dimensions, good English retrieval."""
INDEX_BATCH_SIZE = 32
"""Texts per onnxruntime call while indexing: bounded memory, most of the throughput."""
MODEL_ENV = "KORG_RECALL_MODEL"
MODEL_DIR_ENV = "KORG_RECALL_MODEL_DIR"
MANIFEST = "korg-model.json"
INSTALL_FIX = "pip install 'korg-bridge[semantic]'"
PULL_FIX = "korg-recall model pull"
_REQUIRED_FILES = ("tokenizer.json", "tokenizer_config.json")


class Embedder(Protocol):
    """Turns texts into unit vectors; ``model_id`` and ``dim`` are stored with each vector."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str], *, batch_size: int = INDEX_BATCH_SIZE) -> NDArray[numpy.float32]:
        """float32 array of shape ``(len(texts), dim)`` with L2-normalized rows."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What to load, worked out from the environment and files on disk only."""

    model_id: str
    """Stored beside every vector; a change of id means re-embedding."""
    directory: Path
    """Directory handed to fastembed as ``specific_model_path``."""
    fastembed_name: str | None
    """A model fastembed knows by name, or None for a custom registration."""
    model_file: str = "model.onnx"
    dim: int | None = None
    pooling: str = "mean"
    normalize: bool = True


def model_cache_dir(env: Mapping[str, str]) -> Path:
    """The persistent model cache: ``$XDG_CACHE_HOME/korg-recall/models`` (default ``~/.cache``).

    Not the temp directory (fastembed's default), which is wiped on reboot and
    would turn every semantic query after one into a download.
    """
    xdg = env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".cache"
    return base / "korg-recall" / "models"


def _named_model(env: Mapping[str, str]) -> str:
    return env.get(MODEL_ENV, "").strip() or DEFAULT_MODEL


def _pull_manifest(env: Mapping[str, str], model: str) -> Path:
    return model_cache_dir(env) / (model.replace("/", "--") + "." + MANIFEST)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _fingerprint(path: Path) -> str:
    """A cheap, copy-stable identity for an undescribed ONNX file: its size and first MiB."""
    try:
        with path.open("rb") as fh:
            head = fh.read(1 << 20)
        size = path.stat().st_size
    except OSError:
        return "unreadable"
    return hashlib.sha256(str(size).encode() + head).hexdigest()[:12]


def _dir_spec(directory: Path, env: Mapping[str, str]) -> ModelSpec:
    manifest = _read_json(directory / MANIFEST)
    if manifest is not None:
        dim = manifest.get("dim")
        return ModelSpec(
            model_id=str(manifest.get("model_id") or f"local/{directory.name}"),
            directory=directory,
            fastembed_name=None,
            model_file=str(manifest.get("model_file") or "model.onnx"),
            dim=dim if isinstance(dim, int) else None,
            pooling=str(manifest.get("pooling") or "mean").lower(),
            normalize=bool(manifest.get("normalize", True)),
        )
    named = env.get(MODEL_ENV, "").strip()
    if named:
        # fastembed knows this model's file name, pooling and dimension.
        return ModelSpec(model_id=named, directory=directory, fastembed_name=named, model_file="")
    pooling_cfg = _read_json(directory / "1_Pooling" / "config.json") or {}
    config = _read_json(directory / "config.json") or {}
    hidden = config.get("hidden_size")
    return ModelSpec(
        model_id=f"local/{directory.name}@{_fingerprint(directory / 'model.onnx')}",
        directory=directory,
        fastembed_name=None,
        dim=hidden if isinstance(hidden, int) else None,
        pooling="cls" if pooling_cfg.get("pooling_mode_cls_token") else "mean",
    )


def resolve_model(env: Mapping[str, str]) -> ModelSpec | None:
    """The model the environment selects, or None when its files are not on disk.

    Reads only small JSON files and directory entries: safe on the cold path.
    """
    raw_dir = env.get(MODEL_DIR_ENV, "").strip()
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
    pulled = _read_json(_pull_manifest(env, model))
    if pulled is None or not isinstance(pulled.get("path"), str):
        return None
    directory = Path(pulled["path"])
    model_file = str(pulled.get("model_file") or "")
    if not model_file or not (directory / model_file).is_file():
        return None
    dim = pulled.get("dim")
    return ModelSpec(
        model_id=model,
        directory=directory,
        fastembed_name=model,
        model_file=model_file,
        dim=dim if isinstance(dim, int) else None,
    )


def _backend_installed() -> bool:
    # find_spec locates the package without running it: no heavy import here.
    return importlib.util.find_spec("fastembed") is not None


def model_available(env: Mapping[str, str]) -> bool:
    """True when a semantic query could load a model now, judged from disk alone.

    Both halves are checked (the ``[semantic]`` extra is installed and the
    model's files are present) so a caller choosing between keyword and hybrid
    search never picks a path that then fails.
    """
    return _backend_installed() and resolve_model(env) is not None


def _missing_model_message(env: Mapping[str, str]) -> str:
    raw_dir = env.get(MODEL_DIR_ENV, "").strip()
    if raw_dir:
        return (
            f"{MODEL_DIR_ENV}={raw_dir} holds no usable model (needs model.onnx, tokenizer.json, "
            f"tokenizer_config.json); point it at a model directory, or unset it and run `{PULL_FIX}`"
        )
    model = _named_model(env)
    return (
        f"embedding model {model!r} is not downloaded to {model_cache_dir(env)}; run `{PULL_FIX}` "
        f"(or set {MODEL_DIR_ENV} to a local model directory)"
    )


def _import_fastembed() -> type[TextEmbedding]:
    try:
        from fastembed import TextEmbedding as text_embedding
    except ImportError as exc:
        raise DependencyMissing(
            f"semantic search needs the [semantic] extra ({exc.name or 'fastembed'} is not installed); "
            f"run `{INSTALL_FIX}`"
        ) from exc
    # korg-recall reports failures itself, in one line; fastembed would print
    # its own multi-line loguru records to stderr.
    try:
        from loguru import logger
    except ImportError:  # a fastembed that no longer logs through loguru
        pass
    else:
        logger.disable("fastembed")
    loaded: type[TextEmbedding] = text_embedding
    return loaded


def _register_custom(text_embedding: type[TextEmbedding], spec: ModelSpec) -> str:
    """Register ``spec`` with fastembed (once per process) and return the name to load it by."""
    from fastembed.common.model_description import ModelSource, PoolingType

    if spec.dim is None:
        raise DependencyMissing(
            f"cannot tell the vector size of the model in {spec.directory}: add a {MANIFEST} with "
            '"dim" (and "pooling": "mean" or "cls"), or a config.json with "hidden_size"'
        )
    pooling = {"mean": PoolingType.MEAN, "cls": PoolingType.CLS}.get(spec.pooling)
    if pooling is None:
        raise DependencyMissing(
            f'{spec.directory / MANIFEST} asks for pooling {spec.pooling!r}; use "mean" or "cls"'
        )
    # The name encodes everything registered, so two directories with the same
    # model id but different settings can never share a registration.
    name = f"korg-recall/{spec.model_id}/{spec.model_file}/{spec.pooling}/{spec.dim}/{int(spec.normalize)}"
    known = {m["model"].lower() for m in text_embedding.list_supported_models()}
    if name.lower() not in known:
        text_embedding.add_custom_model(
            model=name,
            pooling=pooling,
            normalization=spec.normalize,
            sources=ModelSource(hf=f"korg-recall/{spec.directory.name}"),  # never fetched
            dim=spec.dim,
            model_file=spec.model_file,
        )
    return name


class FastEmbedEmbedder:
    """:class:`Embedder` over a loaded fastembed ``TextEmbedding``."""

    def __init__(self, model: TextEmbedding, model_id: str, dim: int) -> None:
        self._model = model
        self.model_id = model_id
        self.dim = dim

    def embed(self, texts: Sequence[str], *, batch_size: int = INDEX_BATCH_SIZE) -> NDArray[numpy.float32]:
        """Embed ``texts`` in batches of ``batch_size``; rows are float32 unit vectors."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = np.asarray(list(self._model.embed(list(texts), batch_size=batch_size)), dtype=np.float32)
        # fastembed normalizes for the models we load; renormalizing makes the
        # contract hold for any model and costs nothing next to the forward pass.
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        unit: NDArray[np.float32] = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
        return unit


def load_embedder(env: Mapping[str, str]) -> Embedder:
    """Load the selected model from local files; never touches the network.

    Raises:
        DependencyMissing: the ``[semantic]`` extra is not installed, or the
            model is not on disk (the message names the command that fixes it),
            or fastembed cannot load the files that are there.
    """
    spec = resolve_model(env)
    if spec is None:
        raise DependencyMissing(_missing_model_message(env))
    text_embedding = _import_fastembed()
    name = spec.fastembed_name or _register_custom(text_embedding, spec)
    try:
        model = text_embedding(
            model_name=name,
            cache_dir=str(spec.directory),
            specific_model_path=str(spec.directory),
            local_files_only=True,
        )
        dim = spec.dim or text_embedding.get_embedding_size(name)
    except ValueError as exc:  # fastembed's error for an unknown name or unloadable files
        raise DependencyMissing(
            f"cannot load embedding model {spec.model_id!r}: {str(exc).rstrip('.')}"
        ) from exc
    except Exception as exc:  # onnxruntime raises its own non-OSError types for bad files
        raise DependencyMissing(
            f"cannot load embedding model {spec.model_id!r} from {spec.directory}: {str(exc).rstrip('.')}; "
            f"rebuild the directory or run `{PULL_FIX}` again"
        ) from exc
    log.debug("loaded embedding model %s (dim %d) from %s", spec.model_id, dim, spec.directory)
    return FastEmbedEmbedder(model, spec.model_id, dim)


def pull_model(env: Mapping[str, str], model: str | None = None) -> Path:
    """Download ``model`` (default: ``KORG_RECALL_MODEL`` or :data:`DEFAULT_MODEL`) into the cache.

    The only function here that uses the network. It records where fastembed
    put the files in a manifest beside them, which is what
    :func:`model_available` and :func:`load_embedder` look for. Pulling a model
    that is already cached finishes without a download.

    Raises:
        DependencyMissing: the ``[semantic]`` extra is not installed, fastembed
            does not know ``model``, or the download failed.
    """
    name = (model or "").strip() or _named_model(env)
    text_embedding = _import_fastembed()
    cache = model_cache_dir(env)
    # Find the model's class and description the way TextEmbedding's constructor does.
    for embedding_cls in text_embedding.EMBEDDINGS_REGISTRY:
        description = next(
            (d for d in embedding_cls._list_supported_models() if d.model.lower() == name.lower()), None
        )
        if description is not None:
            break
    else:
        raise DependencyMissing(
            f"fastembed does not know the model {name!r}; pick one from "
            "`TextEmbedding.list_supported_models()` or set KORG_RECALL_MODEL_DIR to a local model directory"
        )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        # One attempt: an explicit step should fail in seconds and say so, not sleep 40 s.
        directory = Path(embedding_cls.download_model(description, str(cache), retries=1))
    except (OSError, ValueError) as exc:
        raise DependencyMissing(
            f"could not download embedding model {name!r} into {cache}: {str(exc).rstrip('.')}; "
            f"check the network, or bring the model as a directory with {MODEL_DIR_ENV}"
        ) from exc
    manifest = {
        "format": "korg-model@1",
        "model_id": name,
        "dim": description.dim,
        "path": str(directory),
        "model_file": description.model_file,
    }
    try:
        _pull_manifest(env, name).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise DependencyMissing(f"cannot record the pulled model in {cache}: {exc}") from exc
    return directory
