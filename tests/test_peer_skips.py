"""Every test skipped for want of the optional peer data says so in the words the README promises."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.paths import PEERS_MISSING, peers_missing

TESTS = Path(__file__).resolve().parent
README = TESTS.parent / "README.md"
SKIP_TEXT = re.compile(r"""(?:pytest\.skip\(|reason=)\s*f?(["'])(?P<text>.*?)\1""", re.DOTALL)
ABOUT_PEERS = re.compile(r"peer|shared|ground.truth|transcripts|conformance", re.IGNORECASE)


def test_the_readme_promises_the_phrase_the_skips_say() -> None:
    assert f'"{PEERS_MISSING}"' in " ".join(README.read_text(encoding="utf-8").split())
    assert peers_missing(Path("/x")).startswith(PEERS_MISSING)


def test_no_skip_for_missing_peer_data_words_it_its_own_way() -> None:
    """A skip about peer data passes ``peers_missing(path)``, never a sentence of its own."""
    own_words = [
        f"{path.relative_to(TESTS)}: {found['text']!r}"
        for path in sorted(TESTS.rglob("*.py"))
        for found in SKIP_TEXT.finditer(path.read_text(encoding="utf-8"))
        if ABOUT_PEERS.search(found["text"]) and PEERS_MISSING not in found["text"]
    ]
    assert own_words == []
