"""The real Claude Code transcripts of ``shared/peers/transcripts``, unpacked where a test can index them.

One of them is gzipped to keep the peers folder small; korg-recall reads ``*.jsonl``, so
tests get a copy with it unpacked, under a temporary folder (never in the repository).
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

from tests.helpers.paths import PEERS

TRANSCRIPTS = PEERS / "transcripts"


def unpack_transcripts(into: Path) -> Path | None:
    """Copy the Claude Code projects to ``into`` with every ``.jsonl.gz`` unpacked; None when absent."""
    source = TRANSCRIPTS / "claude" / "projects"
    if not source.is_dir():
        return None
    target = into / "projects"
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        copy = target / path.relative_to(source)
        copy.parent.mkdir(parents=True, exist_ok=True)  # writable, unlike the read-only original
        if path.name.endswith(".jsonl.gz"):
            with gzip.open(path, "rb") as compressed, open(copy.with_suffix(""), "wb") as plain:
                shutil.copyfileobj(compressed, plain)
        else:
            shutil.copyfile(path, copy)
    return target
