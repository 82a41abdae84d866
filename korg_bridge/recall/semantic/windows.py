"""Texts → token windows → padded batches: what the embedding model is fed, and no more.

Measured on two cores (int8 all-MiniLM-L6-v2, which runs its matrix
products in float32 after loading): the model costs about 0.3 ms of CPU per
token, whatever the text, so throughput is tokens, and every token that
carries no meaning is waste. Three rules follow:

* **No fixed padding.** The model's ``tokenizer.json`` pads every text to 128
  tokens; a 10-token prompt would pay for 128. Padding is switched off and
  each batch is padded to its own longest window.
* **Like lengths together.** :func:`batches` sorts windows by length and cuts
  a batch at :data:`BATCH_TOKENS` padded tokens (or :data:`BATCH_ROWS`
  rows), so short texts go in big batches (less per-call overhead) and long
  ones in small batches (bounded activation memory).
* **Windows, not cuts.** A text longer than one window becomes up to
  ``max_windows`` consecutive windows of at most :data:`WINDOW_TOKENS`
  tokens (special tokens included, as the model was trained), overlapping
  by :data:`WINDOW_STRIDE` tokens; a search compares a query with each
  window and keeps the best (max-sim), so a long reply is found by its
  third paragraph too. Tokenizing stops early: a text is cut to
  :data:`CHARS_PER_TOKEN` characters per token it may use before the
  tokenizer sees it.

Imported only on the semantic path: it imports numpy and ``tokenizers``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import DependencyMissing
from korg_bridge.recall.semantic.model import read_json

if TYPE_CHECKING:
    import numpy
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

__all__ = [
    "BATCH_ROWS",
    "BATCH_TOKENS",
    "WINDOW_STRIDE",
    "WINDOW_TOKENS",
    "Batch",
    "Windows",
    "batches",
    "load_tokenizer",
    "windows",
]

WINDOW_TOKENS = 128
"""Tokens per window, [CLS] and [SEP] included: what all-MiniLM-L6-v2's tokenizer was set to; the
model reads 256 at most, and longer windows blur a long text's topics into one vector."""
WINDOW_STRIDE = 16
"""Tokens two consecutive windows share, so a sentence cut at a window's end is whole in the next."""
CHARS_PER_TOKEN = 8
"""Characters read per token a text may use: English averages about 4.5 per token, code and paths
fewer; text beyond ``max_windows x WINDOW_TOKENS x 8`` characters would be cut anyway."""
BATCH_TOKENS = 1024
"""Padded tokens per model call: enough to amortize the per-call overhead for short texts, small
enough that one call's activations stay small; measured over 512-16k here: 512-1k read the most
tokens per CPU second (the activations stay in cache), 16k a fifth fewer."""
BATCH_ROWS = 256
"""Windows per model call at most, whatever their length."""


@dataclass(frozen=True, slots=True)
class Windows:
    """The windows of some texts: ``ids[i]`` is a window's token ids, ``owner[i]`` its text's position."""

    ids: list[list[int]]
    owner: list[int]


@dataclass(frozen=True, slots=True)
class Batch:
    """One model call's input: padded ids and mask, and which windows (positions in a Windows) they are."""

    input_ids: NDArray[numpy.int64]
    attention_mask: NDArray[numpy.int64]
    rows: list[int]


def _import_tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as exc:
        raise DependencyMissing(
            "semantic search needs the [semantic] extra (tokenizers is not installed); "
            "run `pip install 'korg-bridge[semantic]'`"
        ) from exc
    return tokenizers


def _pad_id(directory: Path, tokenizer: Tokenizer) -> int:
    """The pad token's id: the tokenizer's own padding settings, else its config's pad token, else 0."""
    padding = tokenizer.padding or {}
    if isinstance(padding.get("pad_id"), int):
        return int(padding["pad_id"])
    config = read_json(directory / "tokenizer_config.json") or {}
    token = config.get("pad_token")
    found = tokenizer.token_to_id(token) if isinstance(token, str) else None
    return int(found) if found is not None else 0


def load_tokenizer(directory: Path, window: int = WINDOW_TOKENS) -> tuple[Tokenizer, int]:
    """The model's tokenizer set to cut ``window``-token windows with overlap, no padding; and the pad id.

    Raises:
        DependencyMissing: ``tokenizers`` is not installed, or ``tokenizer.json`` cannot be read.
    """
    tokenizers = _import_tokenizers()
    path = directory / "tokenizer.json"
    try:
        tokenizer: Tokenizer = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own Exception subclass for a bad file
        raise DependencyMissing(
            f"cannot read the tokenizer {path}: {str(exc).rstrip('.')}; rebuild the model directory"
        ) from exc
    pad_id = _pad_id(directory, tokenizer)
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=window, stride=WINDOW_STRIDE)
    return tokenizer, pad_id


def windows(tokenizer: Tokenizer, texts: Sequence[str], max_windows: Sequence[int]) -> Windows:
    """Cut each text into at most ``max_windows[i]`` windows (at least one, even for ""), in order."""
    limit = (tokenizer.truncation or {}).get("max_length", WINDOW_TOKENS)
    cut = [
        text[: CHARS_PER_TOKEN * limit * max(1, count)]
        for text, count in zip(texts, max_windows, strict=True)
    ]
    ids: list[list[int]] = []
    owner: list[int] = []
    for position, (encoding, count) in enumerate(zip(tokenizer.encode_batch(cut), max_windows, strict=True)):
        ids.append(encoding.ids)
        owner.append(position)
        for extra in encoding.overflowing[: max(0, count - 1)]:
            ids.append(extra.ids)
            owner.append(position)
    return Windows(ids, owner)


def batches(
    windows_ids: Sequence[Sequence[int]],
    pad_id: int,
    *,
    max_tokens: int = BATCH_TOKENS,
    max_rows: int = BATCH_ROWS,
) -> Iterator[Batch]:
    """Batches of like-length windows, shortest first, each padded to its own longest window."""
    import numpy as np

    order = sorted(range(len(windows_ids)), key=lambda i: len(windows_ids[i]))
    start = 0
    while start < len(order):
        end = start + 1
        # Sorted ascending: the last window taken sets the batch's padded length.
        while (
            end < len(order)
            and end - start < max_rows
            and (end - start + 1) * len(windows_ids[order[end]]) <= max_tokens
        ):
            end += 1
        rows = order[start:end]
        width = max(1, len(windows_ids[rows[-1]]))
        input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for slot, row in enumerate(rows):
            tokens = windows_ids[row]
            input_ids[slot, : len(tokens)] = tokens
            mask[slot, : len(tokens)] = 1
        yield Batch(input_ids, mask, rows)
        start = end
