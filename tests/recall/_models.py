"""The offline embedding model the semantic tests share: where it is, and a skip when it is absent.

CI builds the model directory from PyPI (``.ci/build_model_dir.py``) and
exports ``KORG_RECALL_MODEL_DIR``. It is read here, at import: the autouse
fixture strips ``KORG_*`` variables from every test's environment.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

MODEL_DIR = os.environ.get("KORG_RECALL_MODEL_DIR", "")
HAVE_FASTEMBED = importlib.util.find_spec("fastembed") is not None
HAVE_MODEL = bool(MODEL_DIR and Path(MODEL_DIR).is_dir() and HAVE_FASTEMBED)

needs_model = pytest.mark.skipif(
    not HAVE_MODEL,
    reason="needs KORG_RECALL_MODEL_DIR (build it: python .ci/build_model_dir.py DIR) "
    "and the [semantic] extra (pip install -e '.[semantic]')",
)
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
