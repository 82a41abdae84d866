"""The text encoder: an onnxruntime session over the model's own tokenizer, batches side by side.

:mod:`korg_bridge.recall.semantic.embed` decides which model to load and from where;
this module runs it. Why it looks like this:

* **Our own tokenisation.** Texts are cut into windows and like-length
  batches padded per batch (:mod:`korg_bridge.recall.semantic.windows`); the model's
  own ``tokenizer.json`` pads every text to 128 tokens.
* **One thread per operator, one batch per core.** Batches of a few hundred
  tokens split across cores by onnxruntime wait on each other (1.75x on two
  idle cores); whole batches run side by side (the session is thread-safe and
  releases the GIL) come close to 2x and cost less CPU per token. Worker
  threads that spin between operators are switched off: they burn a shared
  core for little gain.
* **Pooling as the model was trained**: mean over the attention mask, or the
  [CLS] token; rows L2-normalised, so a dot product is a cosine.

Imported only when a model is loaded: numpy, onnxruntime and tokenizers come
with it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import DependencyMissing
from korg_bridge.recall.semantic.model import (
    MANIFEST,
    MAX_MODEL_TOKENS,
    PULL_FIX,
    ModelSpec,
    missing_extra,
    positive_int,
    read_json,
)

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray

__all__ = ["OnnxEmbedder"]


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _max_tokens(spec: ModelSpec) -> int:
    """The longest input the model reads: its manifest, else its tokenizer config, else 512."""
    config = read_json(spec.directory / "tokenizer_config.json") or {}
    stated = spec.max_tokens or positive_int(config.get("model_max_length"))
    return min(stated or MAX_MODEL_TOKENS, MAX_MODEL_TOKENS)


class OnnxEmbedder:
    """:class:`Embedder` over an onnxruntime session and the model's own tokenizer.

    ``tokens`` counts the (unpadded) tokens read so far: benchmarks report
    throughput in events and tokens.
    """

    def __init__(self, spec: ModelSpec, *, threads: int | None = None) -> None:
        """Load the tokenizer and the ONNX session.

        Raises:
            DependencyMissing: a part of the ``[semantic]`` extra is missing, or the files cannot be loaded.
        """
        from korg_bridge.recall.semantic.windows import WINDOW_TOKENS, load_tokenizer

        try:
            import numpy  # noqa: F401  (checked here, used by every method)
            import onnxruntime as ort
        except ImportError as exc:
            raise missing_extra(exc.name) from exc
        self.model_id = spec.model_id
        self.pooling = spec.pooling or "mean"
        if self.pooling not in ("mean", "cls"):
            raise DependencyMissing(
                f'{spec.directory / MANIFEST} asks for pooling {self.pooling!r}; use "mean" or "cls"'
            )
        self.normalize = spec.normalize
        self.window = min(WINDOW_TOKENS, _max_tokens(spec))
        self.tokenizer, self.pad_id = load_tokenizer(spec.directory, self.window)
        self._last: tuple[str, NDArray[numpy.float32]] | None = None
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # One thread per operator, one batch per core: batches of a few hundred tokens split across
        # cores by onnxruntime waited on each other (1.75x on two idle cores); whole batches run side
        # by side (the session is thread-safe and releases the GIL) come close to 2x, and cost less CPU.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: korg-recall reports failures itself
        # Worker threads that spin between operators burn a shared core for little gain here.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        path = spec.directory / spec.model_file
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own non-OSError types for bad files
            raise DependencyMissing(
                f"cannot load embedding model {spec.model_id!r} from {spec.directory}: "
                f"{str(exc).splitlines()[0].rstrip('.') if str(exc) else type(exc).__name__}; "
                f"rebuild the directory or run `{PULL_FIX}` again"
            ) from exc
        self.inputs = {item.name for item in self.session.get_inputs()}
        outputs = self.session.get_outputs()
        token_level = [item for item in outputs if len(item.shape or ()) == 3]
        chosen = token_level[0] if token_level else outputs[0]
        self.output = chosen.name
        self.dim = spec.dim or positive_int((chosen.shape or [None])[-1]) or int(self.embed(["dim"]).shape[1])
        self.tokens = 0
        self.workers = max(1, threads or _cpus())
        self._pool: ThreadPoolExecutor | None = None

    def _forward(self, input_ids: NDArray[numpy.int64], mask: NDArray[numpy.int64]) -> NDArray[numpy.float32]:
        import numpy as np

        feed: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        out = np.asarray(self.session.run([self.output], feed)[0], dtype=np.float32)
        if out.ndim == 3 and self.pooling == "cls":
            pooled = out[:, 0, :]
        elif out.ndim == 3:
            weights = mask.astype(np.float32)
            pooled = np.matmul(weights[:, None, :], out)[:, 0, :] / np.maximum(
                weights.sum(1, keepdims=True), 1.0
            )
        else:
            pooled = out
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: NDArray[np.float32] = np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 0)
        return unit

    def embed_windows(
        self, texts: Sequence[str], max_windows: Sequence[int]
    ) -> tuple[NDArray[numpy.float32], NDArray[numpy.int64]]:
        """Unit vectors of each text's windows (see :mod:`korg_bridge.recall.semantic.windows`) and their owners."""
        import numpy as np

        from korg_bridge.recall.semantic.windows import batches, windows

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64)
        cut = windows(self.tokenizer, texts, max_windows)
        matrix = np.zeros((len(cut.ids), self.dim), dtype=np.float32)
        todo = list(batches(cut.ids, self.pad_id))
        if len(todo) > 1 and self.workers > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="korg-embed")
            results = list(self._pool.map(lambda b: self._forward(b.input_ids, b.attention_mask), todo))
        else:
            results = [self._forward(batch.input_ids, batch.attention_mask) for batch in todo]
        for batch, rows in zip(todo, results, strict=True):
            matrix[batch.rows] = rows
            self.tokens += int(batch.attention_mask.sum())
        return matrix, np.asarray(cut.owner, dtype=np.int64)

    def embed(self, texts: Sequence[str]) -> NDArray[numpy.float32]:
        """One unit vector per text: its first window (a query, a memory).

        The last single text is remembered: ``recall`` embeds its query for the history and
        again for the memories, and the second costs nothing."""
        if len(texts) == 1 and self._last is not None and self._last[0] == texts[0]:
            return self._last[1].copy()
        matrix, _ = self.embed_windows(texts, [1] * len(texts))
        if len(texts) == 1:
            self._last = (texts[0], matrix.copy())
        return matrix
