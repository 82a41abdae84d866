"""Where things are, for every test: the repository, the fixture binaries, the peer data, the programs.

Computed once here (tests used to count ``Path(__file__).parents[N]`` each for itself, and had to
recount when the tree moved). ``PEERS`` is the optional real agent data beside the clone,
``../shared/peers``; a test that needs it skips with :data:`PEERS_MISSING` when it is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURE_BINS = REPO / "fixture_bins"
THUMP = FIXTURE_BINS / "thump"
BROKEN = FIXTURE_BINS / "broken"
DATA = REPO / "tests" / "data"
"""Corpora the tests read: secrets, contradictions, injected instructions."""
PEERS = REPO.parent / "shared" / "peers"
PEERS_MISSING = "optional peer data not found"
"""What every skip for absent peer data says: the phrase the README promises."""


def peers_missing(path: Path) -> str:
    """The skip reason of a test that needs the peer data at ``path``."""
    return f"{PEERS_MISSING} ({path}); these tests need it"


BIN = Path(sys.executable).parent
"""The venv's scripts: this interpreter, and the ``korg-recall`` and ``korg-bridge`` it installed."""
KORG_RECALL = BIN / "korg-recall"
KORG_BRIDGE = BIN / "korg-bridge"
