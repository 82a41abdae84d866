"""The offline embedding model the semantic tests share: where it is, and a skip when it is absent.

CI builds the model directory from PyPI (``.ci/build_model_dir.py``) and
exports ``KORG_RECALL_MODEL_DIR``. It is read here, at import: the autouse
fixture strips ``KORG_*`` variables from every test's environment.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

MODEL_DIR = os.environ.get("KORG_RECALL_MODEL_DIR", "")
HAVE_FASTEMBED = importlib.util.find_spec("fastembed") is not None
HAVE_BACKEND = all(
    importlib.util.find_spec(name) is not None for name in ("numpy", "onnxruntime", "tokenizers")
)
HAVE_MODEL = bool(MODEL_DIR and Path(MODEL_DIR).is_dir() and HAVE_BACKEND)

needs_model = pytest.mark.skipif(
    not HAVE_MODEL,
    reason="needs KORG_RECALL_MODEL_DIR (build it: python .ci/build_model_dir.py DIR) "
    "and the [semantic] extra (pip install -e '.[semantic]')",
)


def require_semantic_backend() -> None:
    """Skip the calling test unless the [semantic] extra's runtime (numpy, onnxruntime, tokenizers) is installed."""
    for name in ("numpy", "onnxruntime", "tokenizers"):
        pytest.importorskip(name, reason=f"needs the [semantic] extra ({name}): pip install -e '.[semantic]'")


needs_fastembed = pytest.mark.skipif(not HAVE_FASTEMBED, reason="needs the [semantic] extra (fastembed)")

MODEL_FILES = (
    "model.onnx",
    "tokenizer.json",
    "tokenizer_config.json",
    "config.json",
    "special_tokens_map.json",
)


def lay_out_hub_cache(models: Path) -> Path:
    """Put the model under ``models`` as a huggingface_hub cache holds fastembed's
    sentence-transformers/all-MiniLM-L6-v2 download, so a pull finds it without the network."""
    repo = models / "models--Qdrant--all-MiniLM-L6-v2-onnx"
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd", encoding="utf-8")
    for name in MODEL_FILES:
        shutil.copyfile(Path(MODEL_DIR) / name, snapshot / name)
    return snapshot


class HashEmbedder:
    """A deterministic embedder for storage mechanics: one pseudo-random unit vector per text (or per
    window of ``window_words`` words), counting what it embeds. Ranking quality is tested with the
    real model."""

    def __init__(self, model_id: str = "test/hash", dim: int = 16, window_words: int = 10_000) -> None:
        self.model_id = model_id
        self.dim = dim
        self.window_words = window_words
        self.embedded: list[str] = []

    def vector(self, text: str) -> Any:
        import numpy as np

        seed = int.from_bytes(hashlib.sha256(f"{self.model_id}:{text}".encode()).digest()[:8], "little")
        row = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return row / np.linalg.norm(row)

    def windows(self, text: str, most: int) -> list[str]:
        words = text.split()
        cut = [" ".join(words[i : i + self.window_words]) for i in range(0, len(words), self.window_words)]
        return (cut or [""])[: max(1, most)]

    def embed_windows(self, texts: Sequence[str], max_windows: Sequence[int]) -> tuple[Any, Any]:
        import numpy as np

        rows: list[Any] = []
        owner: list[int] = []
        for position, (text, most) in enumerate(zip(texts, max_windows, strict=True)):
            self.embedded.append(text)
            for window in self.windows(text, most):
                rows.append(self.vector(window))
                owner.append(position)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(0, dtype=np.int64)
        return np.stack(rows), np.asarray(owner, dtype=np.int64)

    def embed(self, texts: Sequence[str]) -> Any:
        matrix, _ = self.embed_windows(texts, [1] * len(texts))
        return matrix
