"""What a korg-ledger@v1 verifier does besides walking the hash chain.

:func:`korg_bridge.ledger.chain.verify_file` walks the chain; the spec gives it more
duties, and the path it is handed may come from a model through the bridge,
so reading itself must be safe. Each duty lives here, free of the chain
logic, so it can be read and tested on its own:

* **Reading.** :func:`ledger_lines` reads through :class:`korg_bridge._fs.lines.LineFile`,
  which refuses anything that is not a regular file (a device such as
  ``/dev/urandom`` never ends; opening a FIFO blocks until a writer appears)
  and never holds a line longer than :data:`MAX_LINE_BYTES` whole.
* **Number domain.** Hashed numbers are integers within ±(2^53-1), so every
  implementation hashes the same bytes; :func:`integer_outside_domain` finds
  one that is not, and :func:`reject_constant` refuses ``NaN``/``Infinity``
  (which are not JSON, though Python's parser accepts them).
* **Signatures.** :class:`SignatureCheck` verifies each event's Ed25519
  ``event_sig`` over the exact canonical preimage bytes, with the optional
  ``cryptography`` package (the ``[verify]`` extra).
* **Anchors.** :func:`check_anchors` reads a sidecar ``anchors.jsonl`` and
  checks it structurally: each record's ``entry_hash`` must be the chain's
  at its ``seq_id``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge._fs.lines import Line, LineFile
from korg_bridge.errors import DependencyMissing, UsageError

__all__ = [
    "MAX_INTEGER",
    "MAX_LINE_BYTES",
    "AnchorReport",
    "SignatureCheck",
    "check_anchors",
    "integer_outside_domain",
    "ledger_lines",
    "parse_public_key",
    "reject_constant",
]

MAX_LINE_BYTES = 8 * 1024 * 1024
"""The longest line read into memory: far above any ledger event (the bridge's audit entries are
a few KB), equal to the bridge's cap on one stream. A longer line is reported, not read."""

MAX_INTEGER = 2**53 - 1
"""korg-ledger@v1's number domain: integers every JSON implementation represents exactly."""

VERIFY_EXTRA = "pip install 'korg-bridge[verify]'"

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX128 = re.compile(r"[0-9a-f]{128}")


def ledger_lines(path: Path, what: str = "ledger", max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Line]:
    """Every line of the file at ``path``, its unterminated last one included (a verifier reports it).

    Raises:
        ConfigError: the file does not exist, cannot be read, or is not a regular file.
    """
    kind = "korg-ledger@v1" if what == "ledger" else "anchors"
    with LineFile(path, what, f"Pass the path of a {kind} .jsonl file.") as file:
        yield from file.lines(max_line=max_line_bytes, partial=True)


def reject_constant(name: str) -> Any:
    """``json.loads(parse_constant=…)``: ``NaN`` and ``Infinity`` are not JSON.

    Raises:
        ValueError: always.
    """
    raise ValueError(f"{name} is not JSON")


def integer_outside_domain(value: Any) -> str | None:
    """Return the JSON path of the first integer in ``value`` outside ±(2^53-1), or None.

    Iterative, so a deeply nested event cannot exhaust the stack here.
    """
    stack: list[tuple[str, Any]] = [("$", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int) and abs(item) > MAX_INTEGER:
            return where
        if isinstance(item, dict):
            stack.extend((f"{where}.{key}", sub) for key, sub in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
    return None


def parse_public_key(text: str) -> bytes:
    """Return the 32 bytes of an Ed25519 public key written as 64 hex characters.

    Raises:
        UsageError: ``text`` is not 64 hex characters.
    """
    body = text.strip().lower()
    if not _HEX64.fullmatch(body):
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise UsageError(
            f"invalid public key {shown!r}: expected an Ed25519 public key as 64 hex characters "
            "(32 bytes), such as the contents of a .pubkey file."
        )
    return bytes.fromhex(body)


class SignatureCheck:
    """Verifies ``event_sig`` values against one Ed25519 public key.

    Raises (from the constructor):
        DependencyMissing: the ``cryptography`` package (the ``[verify]`` extra) is not installed.
        UsageError: the key is not a valid Ed25519 public key.
    """

    def __init__(self, public_key: bytes) -> None:
        try:
            from cryptography.exceptions import InvalidSignature
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        except ImportError as exc:
            raise DependencyMissing(
                f"checking signatures needs the [verify] extra (the cryptography package); run `{VERIFY_EXTRA}`"
            ) from exc
        try:
            self._key = Ed25519PublicKey.from_public_bytes(public_key)
        except ValueError as exc:
            raise UsageError(f"invalid public key {public_key.hex()}: {exc}") from exc
        self._invalid = InvalidSignature
        self.hex = public_key.hex()

    def problem(self, preimage: bytes, signature: Any) -> str | None:
        """Why ``signature`` (the ``event_sig`` value) does not sign ``preimage``, or None when it does."""
        if signature is None:
            return "missing event_sig (not signed)"
        if not isinstance(signature, str) or not _HEX128.fullmatch(signature):
            return "malformed event_sig (expected 128 lower-case hex characters)"
        try:
            self._key.verify(bytes.fromhex(signature), preimage)
        except self._invalid:
            return "event_sig does not verify (content or signature altered, or the wrong public key)"
        return None


@dataclass
class AnchorReport:
    """The structural check of an anchors sidecar."""

    path: str
    records: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "records": self.records}


_ANCHOR_FIELDS = ("seq_id", "entry_hash", "anchor_kind", "anchor_proof", "anchored_at")


def _anchor_problem(record: Any, chain: Mapping[int, str]) -> str | None:
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [name for name in _ANCHOR_FIELDS if record.get(name) is None]
    if missing:
        return f"missing {', '.join(missing)}"
    seq, claimed, kind = record["seq_id"], record["entry_hash"], record["anchor_kind"]
    if isinstance(seq, bool) or not isinstance(seq, int) or abs(seq) > MAX_INTEGER:
        return f"seq_id {seq!r} is not an integer within ±(2^53-1)"
    if not isinstance(claimed, str) or not _HEX64.fullmatch(claimed):
        return f"seq {seq}: entry_hash is not 64 lower-case hex characters"
    if not isinstance(kind, str) or not kind.strip():
        return f"seq {seq}: anchor_kind is not a non-empty string"
    if seq not in chain:
        return f"seq {seq}: no entry with this seq_id in the ledger"
    if chain[seq] != claimed:
        return f"seq {seq}: anchored entry_hash differs from the ledger's (the chain was rewritten after anchoring)"
    return None


def check_anchors(path: Path, chain: Mapping[int, str], max_line_bytes: int = MAX_LINE_BYTES) -> AnchorReport:
    """Check each record of the anchors file ``path`` against ``chain`` (``seq_id`` → ``entry_hash``).

    Errors read ``anchors line N: …``. Blank lines are ignored.

    Raises:
        ConfigError: the anchors file does not exist, cannot be read, or is not a regular file.
    """
    report = AnchorReport(path=str(path))
    for line in ledger_lines(path, "anchors file", max_line_bytes):
        if line.data is None:
            report.errors.append(f"anchors line {line.number}: longer than {max_line_bytes} bytes; not read")
            continue
        if not line.data.strip():
            continue
        report.records += 1
        try:
            record = json.loads(line.data.decode("utf-8"), parse_constant=reject_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            report.errors.append(f"anchors line {line.number}: not a JSON object (malformed JSON)")
            continue
        problem = _anchor_problem(record, chain)
        if problem is not None:
            report.errors.append(f"anchors line {line.number}: {problem}")
    return report
