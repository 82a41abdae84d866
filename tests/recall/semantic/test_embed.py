"""The embedder contract, against a real model directory when one is provided.

CI builds the directory with ``.ci/build_model_dir.py`` (all-MiniLM-L6-v2, int8
ONNX, from PyPI) and exports ``KORG_RECALL_MODEL_DIR``. The variable is read at
import time, before any fixture strips ``KORG_*`` from the environment; every
call then gets an explicit env mapping.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from korg_bridge.config import ENV_RECALL_MODEL, ENV_RECALL_MODEL_DIR
from korg_bridge.errors import DependencyMissing
from korg_bridge.recall.semantic import embed, model
from tests.helpers.models import MODEL_DIR, lay_out_hub_cache, needs_fastembed, needs_model
from tests.helpers.paths import REPO

# A subprocess must import the checkout under test, whether or not it is installed.
SUBPROCESS_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def model_env() -> dict[str, str]:
    return {ENV_RECALL_MODEL_DIR: MODEL_DIR}


@pytest.fixture(scope="module")
def embedder() -> model.Embedder:
    return embed.load_embedder(model_env())


def cosine(a: object, b: object) -> float:
    import numpy as np

    return float(np.dot(np.asarray(a), np.asarray(b)))


# --- contract that holds without a model -------------------------------------------------


def test_importing_embed_loads_no_embedding_stack() -> None:
    code = (
        "import sys, korg_bridge.recall.semantic.embed\n"
        "print([m for m in ('numpy', 'fastembed', 'onnxruntime', 'tokenizers') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=SUBPROCESS_ENV,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_model_cache_is_persistent_under_xdg_cache_home(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert model.model_cache_dir(env) == tmp_path / "xdg" / "korg-recall" / "models"
    del env["XDG_CACHE_HOME"]
    assert model.model_cache_dir(env) == tmp_path / "home" / ".cache" / "korg-recall" / "models"


def test_an_empty_model_directory_is_not_available(tmp_path: Path) -> None:
    env = {ENV_RECALL_MODEL_DIR: str(tmp_path)}
    assert model.model_available(env) is False
    with pytest.raises(DependencyMissing) as info:
        embed.load_embedder(env)
    assert info.value.exit_code == 7
    assert f"{ENV_RECALL_MODEL_DIR}={tmp_path}" in info.value.message
    assert "korg-recall model pull" in info.value.message


def test_a_model_never_pulled_names_the_pull_command(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert model.model_available(env) is False
    with pytest.raises(DependencyMissing) as info:
        embed.load_embedder(env)
    assert info.value.exit_code == 7
    assert "run `korg-recall model pull`" in info.value.message
    assert model.DEFAULT_MODEL in info.value.message
    assert "\n" not in info.value.message


@needs_model
def test_missing_semantic_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what an install without the extra looks like
    assert model.model_available(model_env()) is False
    with pytest.raises(DependencyMissing) as info:
        embed.load_embedder(model_env())
    assert info.value.exit_code == 7
    assert "pip install 'korg-bridge[semantic]'" in info.value.message


@needs_fastembed
def test_pulling_a_model_fastembed_does_not_know_fails_without_network(tmp_path: Path) -> None:
    with pytest.raises(DependencyMissing, match="does not know the model 'no-such/model'"):
        embed.pull_model({"XDG_CACHE_HOME": str(tmp_path)}, "no-such/model")


# --- the real model ------------------------------------------------------------------------


@needs_model
def test_model_dir_is_available_and_loads_with_its_manifest_identity(embedder: model.Embedder) -> None:
    assert model.model_available(model_env()) is True
    assert embedder.dim == 384
    manifest = json.loads((Path(MODEL_DIR) / "korg-model.json").read_text(encoding="utf-8"))
    assert embedder.model_id == manifest["model_id"]


@needs_model
def test_vectors_are_float32_unit_rows_of_the_model_dimension(embedder: model.Embedder) -> None:
    import numpy as np

    texts = ["x" * 200, "tool call failed: exit code 2", "ünïcödé and emoji 🚀", ""]
    vectors = embedder.embed(texts)
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


@needs_model
def test_a_text_gets_the_same_vector_alone_or_padded_in_a_batch(embedder: model.Embedder) -> None:
    import numpy as np

    short = "short"
    texts = [short, "a much longer sentence about migrations that ran before the database was ready " * 3]
    together = embedder.embed(texts)
    assert np.array_equal(together, embedder.embed(texts))
    np.testing.assert_allclose(together[0], embedder.embed([short])[0], atol=1e-5)


@needs_model
def test_a_long_text_is_read_in_overlapping_windows_up_to_the_limit(embedder: model.Embedder) -> None:
    import numpy as np

    long_text = " ".join(f"sentence {n} about the deployment." for n in range(200))
    matrix, owner = embedder.embed_windows(["short text", long_text, long_text], [8, 8, 2])
    assert owner.tolist() == [0] + [1] * 8 + [2] * 2
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(matrix[1:3], matrix[9:11], atol=1e-5)  # the same first two windows
    assert float(matrix[1] @ matrix[8]) < 0.999  # later windows read other words


@needs_model
def test_related_incidents_are_closer_than_unrelated_chores(embedder: model.Embedder) -> None:
    query, related, unrelated = embedder.embed(
        [
            "the database wasn't up when CI started",
            "postgres container is not ready when migrations start",
            "updated the README typo",
        ]
    )
    assert cosine(query, related) > cosine(query, unrelated)


@needs_model
def test_a_directory_without_manifest_gets_a_content_derived_id(tmp_path: Path) -> None:
    for name in ("model.onnx", "tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copyfile(Path(MODEL_DIR) / name, tmp_path / name)
    loaded = embed.load_embedder({ENV_RECALL_MODEL_DIR: str(tmp_path)})
    assert loaded.dim == 384  # from config.json's hidden_size
    assert loaded.model_id.startswith(f"local/{tmp_path.name}@")
    assert loaded.embed(["hello"]).shape == (1, 384)


@needs_model
def test_a_corrupt_model_file_is_a_dependency_error_not_a_crash(tmp_path: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "korg-model.json"):
        shutil.copyfile(Path(MODEL_DIR) / name, tmp_path / name)
    (tmp_path / "model.onnx").write_bytes(b"not an onnx graph")
    with pytest.raises(DependencyMissing) as info:
        embed.load_embedder({ENV_RECALL_MODEL_DIR: str(tmp_path)})
    assert info.value.exit_code == 7
    assert str(tmp_path) in info.value.message


@needs_model
def test_pull_records_a_cached_named_model_that_then_loads_offline(tmp_path: Path) -> None:
    snapshot = lay_out_hub_cache(tmp_path / "korg-recall" / "models")
    env = {"XDG_CACHE_HOME": str(tmp_path), ENV_RECALL_MODEL: "sentence-transformers/all-MiniLM-L6-v2"}

    assert model.model_available(env) is False
    assert embed.pull_model(env) == snapshot
    assert model.model_available(env) is True
    loaded = embed.load_embedder(env)
    assert (loaded.model_id, loaded.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    reference = embed.load_embedder(model_env())
    text = ["migrations ran before postgres was ready"]
    assert cosine(loaded.embed(text)[0], reference.embed(text)[0]) > 0.999


@needs_model
def test_build_script_is_idempotent_on_a_verified_directory() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "build_model_dir.py"), MODEL_DIR],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=True,
    )
    assert "nothing to do" in out.stdout
    assert out.stdout.count("\n") == 1


@needs_model
def test_a_directory_named_by_a_fastembed_model_takes_its_pooling_from_fastembed(tmp_path: Path) -> None:
    for name in ("model.onnx", "tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copyfile(Path(MODEL_DIR) / name, tmp_path / name)
    env = {ENV_RECALL_MODEL_DIR: str(tmp_path), ENV_RECALL_MODEL: "sentence-transformers/all-MiniLM-L6-v2"}
    loaded = embed.load_embedder(env)
    assert (loaded.model_id, loaded.dim) == ("sentence-transformers/all-MiniLM-L6-v2", 384)
    text = ["migrations ran before postgres was ready"]
    assert cosine(loaded.embed(text)[0], embed.load_embedder(model_env()).embed(text)[0]) > 0.999


@needs_model
def test_an_unreadable_tokenizer_is_a_dependency_error(tmp_path: Path) -> None:
    for name in ("model.onnx", "tokenizer_config.json", "korg-model.json"):
        shutil.copyfile(Path(MODEL_DIR) / name, tmp_path / name)
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(DependencyMissing) as info:
        embed.load_embedder({ENV_RECALL_MODEL_DIR: str(tmp_path)})
    assert info.value.exit_code == 7
    assert "tokenizer" in info.value.message


@needs_model
def test_a_pooling_korg_recall_cannot_run_is_refused_with_the_fix(tmp_path: Path) -> None:
    shutil.copytree(MODEL_DIR, tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / model.MANIFEST).read_text(encoding="utf-8"))
    (tmp_path / "m" / model.MANIFEST).write_text(
        json.dumps({**manifest, "pooling": "last"}), encoding="utf-8"
    )
    with pytest.raises(DependencyMissing, match='use "mean" or "cls"'):
        embed.load_embedder({ENV_RECALL_MODEL_DIR: str(tmp_path / "m")})


@needs_model
def test_a_pulled_model_folder_copied_to_an_offline_machine_loads_from_model_dir(tmp_path: Path) -> None:
    """The README's offline recipe: copy the folder `model pull` reports, set MODEL_DIR and MODEL."""
    online = {
        "XDG_CACHE_HOME": str(tmp_path / "online"),
        ENV_RECALL_MODEL: "sentence-transformers/all-MiniLM-L6-v2",
    }
    lay_out_hub_cache(tmp_path / "online" / "korg-recall" / "models")
    pulled = embed.pull_model(online)
    copied = tmp_path / "usb-stick" / "all-MiniLM-L6-v2"
    shutil.copytree(pulled, copied)
    offline = {
        "XDG_CACHE_HOME": str(tmp_path / "offline"),
        ENV_RECALL_MODEL_DIR: str(copied),
        ENV_RECALL_MODEL: "sentence-transformers/all-MiniLM-L6-v2",
    }
    assert model.model_available(offline) is True
    loaded = embed.load_embedder(offline)
    text = ["migrations ran before postgres was ready"]
    assert cosine(loaded.embed(text)[0], embed.load_embedder(model_env()).embed(text)[0]) > 0.999
