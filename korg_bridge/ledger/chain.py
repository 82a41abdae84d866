"""korg-ledger@v1: the hash-chained JSONL ledger format, verified and written.

One module serves both sides of the format so they cannot drift apart:
korg-recall's ``verify`` checks ledgers written by any korg tool, and the
bridge's audit feature writes its own ledger with :class:`LedgerWriter`.

The format (frozen by the conformance vectors in ``korg-ledger-v1/``):

* canonical form of an event = ``json.dumps(v, sort_keys=True,
  separators=(",", ":"))`` encoded as ASCII (non-ASCII escaped as ``\\uXXXX``,
  astral characters as lower-case surrogate pairs);
* ``entry_hash`` = SHA-256, or HMAC-SHA256 with a key, of the canonical form
  of the whole line object minus ``entry_hash`` and ``event_sig`` (the
  optional Ed25519 signature over those same preimage bytes; ``prev_hash``
  included), lower-case hex;
* the first ``prev_hash`` is :data:`GENESIS_HASH`; each later one is the
  previous line's ``entry_hash``.

The hash covers the parsed object, never the line's bytes, so any JSON
rendering of an event verifies; that is why both the flat journal shape and
the envelope shape (fields under ``event``, ``triggered_by`` under
``metadata``) are verified by the same code. The verifier's other duties
(safe reading, the number domain, signatures, anchors) are in
:mod:`korg_bridge.ledger.check`.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from korg_bridge._fs.durable import fsync_folder
from korg_bridge._fs.lines import Line
from korg_bridge.errors import ConfigError
from korg_bridge.ledger.check import (
    MAX_LINE_BYTES,
    SignatureCheck,
    check_anchors,
    integer_outside_domain,
    ledger_lines,
    reject_constant,
)
from korg_bridge.ledger.file import (
    chained_entry,
    last_line,
    last_newline_before,
    looks_torn,
    read_span,
    set_aside,
)

__all__ = [
    "GENESIS_HASH",
    "LedgerWriter",
    "VerifyReport",
    "canonical",
    "entry_hash",
    "preimage",
    "verify_file",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first entry of every chain."""

SCHEMA_VERSION = "1.0"
"""``schema_version`` the writer stamps on entries that do not carry one."""

_RESERVED = ("seq_id", "prev_hash", "entry_hash")
"""Fields the writer owns: a caller supplying them would fork the chain."""


def canonical(event: Mapping[str, Any]) -> bytes:
    """Return the canonical byte form of ``event`` that korg-ledger@v1 hashes.

    Raises:
        TypeError: ``event`` holds a value JSON cannot represent.
    """
    return json.dumps(event, sort_keys=True, separators=(",", ":")).encode("ascii")


_UNHASHED = frozenset({"entry_hash", "event_sig"})
"""Fields left out of the hash preimage: the hash itself, and the optional Ed25519 ``event_sig``
(made over that same preimage), so a signed event hashes exactly like the unsigned one."""


def preimage(event: Mapping[str, Any]) -> bytes:
    """Return the canonical bytes that ``entry_hash`` and ``event_sig`` are computed over.

    Raises:
        TypeError: ``event`` holds a value JSON cannot represent.
    """
    return canonical({k: v for k, v in event.items() if k not in _UNHASHED})


def entry_hash(event: Mapping[str, Any], key: bytes | None = None) -> str:
    """Return the ``entry_hash`` of ``event``: its preimage (minus ``entry_hash`` and ``event_sig``), hashed.

    ``event`` may already carry an ``entry_hash`` (a line read back from disk)
    or an ``event_sig``; both are left out of the preimage, so a stored line can
    be re-hashed as is.

    Raises:
        TypeError: ``event`` holds a value JSON cannot represent.
    """
    data = preimage(event)
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


@dataclass
class VerifyReport:
    """The verdict on one ledger file; ``errors`` is empty exactly when ``intact``."""

    path: str
    events: int
    intact: bool
    tip_entry_hash: str | None
    """``entry_hash`` claimed by the last entry (trust it only when ``intact``)."""
    errors: list[str] = field(default_factory=list)
    signatures: dict[str, Any] | None = None
    """``{public_key, signed_events, verified}`` when a key was given or some event carries
    ``event_sig``; ``verified`` is None when no key was given (signatures not checked)."""
    anchors: dict[str, Any] | None = None
    """``{path, records}`` of the anchors sidecar, when one was checked."""

    def to_dict(self) -> dict[str, Any]:
        """Return the report as the JSON object ``korg-recall verify`` prints."""
        out: dict[str, Any] = {
            "path": self.path,
            "events": self.events,
            "intact": self.intact,
            "tip_entry_hash": self.tip_entry_hash,
            "errors": list(self.errors),
        }
        if self.signatures is not None:
            out["signatures"] = dict(self.signatures)
        if self.anchors is not None:
            out["anchors"] = dict(self.anchors)
        return out


def _is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass; ``true`` is never a sequence number.
    return isinstance(value, int) and not isinstance(value, bool)


def _triggered_by(obj: Mapping[str, Any]) -> Any:
    """``triggered_by`` of either shape: top level (flat) or under ``metadata`` (envelope)."""
    if "triggered_by" in obj:
        return obj["triggered_by"]
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        return metadata.get("triggered_by")
    return None


def _parse_line(line: Line, max_line_bytes: int) -> tuple[dict[str, Any] | None, str | None]:
    """The line's object, or why it is none (an error without its ``line N: `` label)."""
    if line.data is None:
        return None, f"longer than {max_line_bytes} bytes; not read"
    try:
        obj = json.loads(line.data.decode("utf-8"), parse_constant=reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        if not line.terminated:
            return None, "torn last line (no trailing newline, not valid JSON)"
        return None, "not a JSON object (malformed JSON)"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    return obj, None


@dataclass
class _ChainWalk:
    """What :func:`verify_file` has learned so far, one parsed entry at a time.

    Each check is its own method, named for what it decides, and appends its
    one-line errors; an entry whose chain or content cannot be checked further
    stops at that step, as the spec's decisions in :func:`verify_file` say.
    """

    key: bytes | None
    signer: SignatureCheck | None
    errors: list[str] = field(default_factory=list)
    events: int = 0
    signed: int = 0
    verified: int = 0
    tip: str | None = None
    expected_prev: str | None = GENESIS_HASH
    """The ``prev_hash`` the next entry must carry; None after an unchained entry (nothing to link to)."""
    seen: dict[int, int] = field(default_factory=dict)
    """The line each ``seq_id`` was first seen on."""
    chain: dict[int, str] = field(default_factory=dict)
    """``seq_id`` → ``entry_hash``, for the anchors sidecar."""

    def entry(self, number: int, obj: dict[str, Any]) -> None:
        self.events += 1
        seq = obj.get("seq_id")
        label = self._identity(number, seq)
        cause = _triggered_by(obj)
        if cause is not None and (not _is_int(cause) or (_is_int(seq) and cause >= seq)):
            self.errors.append(f"{label}: triggered_by {cause!r} is not strictly earlier than its seq_id")
        if "event_sig" in obj:
            self.signed += 1
        claimed = self._link(label, seq, obj)
        if claimed is not None:
            self._content(label, obj, claimed)

    def _identity(self, number: int, seq: Any) -> str:
        """How errors name this entry (``seq N``, or ``line N`` without an integer seq_id); a
        duplicate or missing seq_id is reported."""
        if not _is_int(seq):
            self.errors.append(f"line {number}: no integer seq_id")
            return f"line {number}"
        if seq in self.seen:
            self.errors.append(f"seq {seq}: duplicate seq_id (first seen on line {self.seen[seq]})")
        else:
            self.seen[seq] = number
        return f"seq {seq}"

    def _link(self, label: str, seq: Any, obj: Mapping[str, Any]) -> str | None:
        """The entry's claimed hash once its link to the previous one is checked; None when it
        has none (then the next entry has nothing to chain onto)."""
        claimed = obj.get("entry_hash")
        if not isinstance(claimed, str):
            self.errors.append(f"{label}: missing entry_hash (not chained)")
            self.expected_prev = None
            self.tip = None
            return None
        self.tip = claimed
        if _is_int(seq) and seq not in self.chain:
            self.chain[seq] = claimed
        if self.expected_prev is not None and obj.get("prev_hash") != self.expected_prev:
            self.errors.append(
                f"{label}: prev_hash mismatch (broken link: an entry was inserted, deleted or reordered)"
            )
        self.expected_prev = claimed  # re-anchor: one tampered line is one error, not a cascade
        return claimed

    def _content(self, label: str, obj: Mapping[str, Any], claimed: str) -> None:
        """Whether the entry's content hashes to what it claims (and carries a valid signature)."""
        outside = integer_outside_domain(obj)
        if outside is not None:
            self.errors.append(
                f"{label}: integer outside ±(2^53-1) at {outside}; not hashed (korg-ledger@v1 number domain)"
            )
            return
        try:
            data = preimage(obj)
        except (TypeError, ValueError, RecursionError):
            self.errors.append(f"{label}: cannot be put in canonical form; not hashed")
            return
        key = self.key
        actual = (
            hashlib.sha256(data).hexdigest()
            if key is None
            else hmac.new(key, data, hashlib.sha256).hexdigest()
        )
        if not hmac.compare_digest(actual, claimed):
            hint = "or the wrong key" if key is not None else "or a keyed chain checked without its key"
            self.errors.append(f"{label}: entry_hash mismatch (content tampered, {hint})")
        if self.signer is not None:
            signature_problem = self.signer.problem(data, obj.get("event_sig"))
            if signature_problem is None:
                self.verified += 1
            else:
                self.errors.append(f"{label}: {signature_problem}")


def verify_file(
    path: str | Path,
    key: bytes | None = None,
    *,
    public_key: bytes | None = None,
    anchors: str | Path | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> VerifyReport:
    """Verify a korg-ledger@v1 file: hash chain, causal order, number domain, and optionally
    each event's Ed25519 signature (``public_key``) and an anchors sidecar (``anchors``).

    Every problem is reported, not just the first, as a one-line string that
    starts with ``seq N: `` (or ``line N: `` when the line has no usable
    ``seq_id``; ``anchors line N: `` for the sidecar). After a broken entry the
    walk re-anchors on the entry_hash that entry claims, so one tampered line
    yields one error instead of a cascade down the rest of the file.

    Decisions: blank lines are ignored; an empty file is an intact, empty
    chain (0 events, no tip) because a ledger that was created but never
    written to has nothing to distrust; an unterminated last line is accepted
    if it parses (some writers omit the final newline) and reported as torn
    otherwise; a line longer than ``max_line_bytes`` is reported and skipped
    without being held in memory; an event holding an integer outside
    ±(2^53-1) is reported and not hashed (the spec's number domain), while its
    links are still checked. Without ``public_key``, ``event_sig`` is left out
    of the hash like the spec says and not checked; with one, an event without
    a valid signature is an error.

    Raises:
        ConfigError: the ledger (or the anchors file) does not exist, cannot be
            read, or is not a regular file (a directory, device, FIFO or socket).
        DependencyMissing: ``public_key`` is given and the ``[verify]`` extra is not installed.
        UsageError: ``public_key`` is not a valid Ed25519 public key.
        Bad content never raises; it is reported in the returned report.
    """
    path = Path(path)
    signer = SignatureCheck(public_key) if public_key is not None else None
    walk = _ChainWalk(key, signer)
    for line, obj, problem in _walk(path, max_line_bytes):
        if obj is None:
            walk.errors.append(f"line {line.number}: {problem}")
        else:
            walk.entry(line.number, obj)
    errors, signed, verified = walk.errors, walk.signed, walk.verified
    report = VerifyReport(
        path=str(path), events=walk.events, intact=False, tip_entry_hash=walk.tip, errors=errors
    )
    if signer is not None or signed:
        report.signatures = {
            "public_key": signer.hex if signer is not None else None,
            "signed_events": signed,
            "verified": verified if signer is not None else None,
        }
    if anchors is not None:
        checked = check_anchors(Path(anchors), walk.chain, max_line_bytes)
        errors.extend(checked.errors)
        report.anchors = checked.to_dict()
    report.intact = not errors
    return report


def _walk(path: Path, max_line_bytes: int) -> Iterator[tuple[Line, dict[str, Any] | None, str | None]]:
    """Each non-blank line of ``path`` with its object, or None and why; read lazily.

    Raises:
        ConfigError: the file does not exist, cannot be read, or is not a regular file.
    """
    for line in ledger_lines(path, "ledger", max_line_bytes):
        if line.data is not None and not line.data.strip():
            continue
        obj, problem = _parse_line(line, max_line_bytes)
        yield line, obj, problem


class LedgerWriter:
    """Append-only, crash-safe writer of the flat journal shape.

    Each :meth:`append` opens the file, takes an exclusive ``flock`` on it,
    re-reads the tip from the file's tail, writes one complete line with a
    single ``os.write`` on an ``O_APPEND`` descriptor, ``fsync``s, and closes
    (releasing the lock). Re-reading under the lock is what lets several
    processes share one ledger: each chains onto whatever the others wrote.
    Nothing is cached between appends, so a writer object is cheap and
    stateless.

    Lines are rendered like the conformance vectors (``json.dumps`` defaults:
    ``", "``/``": "`` separators, ASCII-escaped, keys in insertion order with
    ``schema_version`` and ``seq_id`` first); verification re-hashes the parsed
    object, so the rendering is a convention, not part of the hash.
    """

    def __init__(self, path: str | Path, key: bytes | None = None) -> None:
        self.path = Path(path)
        self._key = key

    def append(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Append one entry built from ``fields`` and return it as written.

        ``schema_version`` defaults to ``"1.0"``; ``seq_id`` (tip + 1),
        ``prev_hash`` and ``entry_hash`` are assigned here.

        Raises:
            ValueError: ``fields`` carries ``seq_id``, ``prev_hash`` or ``entry_hash``
                (the writer owns them), or a value JSON cannot represent.
            ConfigError: the ledger cannot be opened or written, or its last
                complete line is not a chained korg-ledger@v1 entry.
        """
        reserved = [name for name in _RESERVED if name in fields]
        if reserved:
            raise ValueError(f"LedgerWriter.append: fields must not carry {', '.join(reserved)}")
        return self._locked(lambda fd: self._append_locked(fd, fields))

    def tip(self) -> tuple[int, str]:
        """Open the ledger (creating it), repair its tail, and return ``(seq_id, entry_hash)`` of its tip.

        ``(0, GENESIS_HASH)`` when it holds no entry yet. An owner that keeps a
        ledger open for a long time (the bridge's audit log) calls this once at
        start, so a torn line left by a crash is cut and logged, and a foreign
        file refused, then rather than at the first append.

        Raises:
            ConfigError: as for :meth:`append`.
        """
        return self._locked(lambda fd: self._read_tip(fd, self._cut_torn_tail(fd, os.fstat(fd).st_size)))

    def _locked(self, work: Callable[[int], _T]) -> _T:
        """Run ``work(fd)`` on the ledger opened for appending, under its exclusive ``flock``.

        Raises:
            ConfigError: the ledger cannot be opened or written, or ``work`` raised it.
        """
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise ConfigError(
                f"cannot open ledger {self.path} for appending: {exc.strerror or exc}. "
                "Check that its folder exists and is writable."
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return work(fd)
        except OSError as exc:
            raise ConfigError(
                f"cannot append to ledger {self.path}: {exc.strerror or exc}. "
                "Check free space and permissions."
            ) from exc
        finally:
            os.close(fd)  # also releases the flock

    def _append_locked(self, fd: int, fields: Mapping[str, Any]) -> dict[str, Any]:
        size = os.fstat(fd).st_size
        created = size == 0
        size = self._cut_torn_tail(fd, size)
        seq, prev = self._read_tip(fd, size)

        event: dict[str, Any] = {"schema_version": fields.get("schema_version", SCHEMA_VERSION)}
        event["seq_id"] = seq + 1
        event.update((k, v) for k, v in fields.items() if k != "schema_version")
        event["prev_hash"] = prev
        try:
            event["entry_hash"] = entry_hash(event, self._key)
            line = (json.dumps(event) + "\n").encode("ascii")
        except TypeError as exc:
            raise ValueError(f"LedgerWriter.append: fields are not JSON-serializable: {exc}") from exc
        except RecursionError as exc:
            raise ValueError("LedgerWriter.append: fields are nested too deeply to serialize") from exc

        written = os.write(fd, line)
        if written != len(line):
            # Never leave a half line for the next writer to cut: undo and fail loudly.
            os.ftruncate(fd, size)
            raise ConfigError(
                f"short write to ledger {self.path} ({written} of {len(line)} bytes). Check free space."
            )
        os.fsync(fd)
        if created:
            fsync_folder(self.path.parent)  # a new file's entry is durable only once its folder is
        return event

    def _cut_torn_tail(self, fd: int, size: int) -> int:
        """Deal with an unterminated last line and return the file's new size.

        Nothing is changed unless the file is a ledger: the last complete line
        before the tail must be a chained entry (or, with no complete line, the
        tail must be one or the start of one). A tail that is a complete
        chained entry missing only its newline (some tools omit it, and
        :func:`verify_file` accepts it) or mere whitespace is terminated. A
        torn line (an interrupted write) is copied to a side file next to the
        ledger first and only then cut back to the last newline, so nothing is
        chained onto half an entry and no byte is lost.

        Raises:
            ConfigError: the file is not a korg-ledger@v1 ledger, or the torn
                line cannot be set aside (the file is then left as it was).
        """
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size
        keep = last_newline_before(fd, size) + 1
        raw = read_span(fd, keep, size)
        before = last_line(fd, keep)
        if before is not None:
            self._check_tip_line(before[1])
        elif raw is None or not (looks_torn(raw) or chained_entry(raw) is not None or not raw.strip()):
            raise self._not_a_ledger("its only line is not a chained korg-ledger@v1 entry")
        if raw is not None and (not raw.strip() or chained_entry(raw) is not None):
            if raw.strip():
                logger.warning("ledger %s: last entry had no trailing newline; terminated it", self.path)
            os.write(fd, b"\n")
            return size + 1
        side = set_aside(fd, self.path, keep, size)
        logger.warning(
            "ledger %s: cut a torn last line of %d bytes (an interrupted write), kept in %s; "
            "the chain resumes before it",
            self.path,
            size - keep,
            side,
        )
        os.ftruncate(fd, keep)
        os.fsync(fd)
        return keep

    def _not_a_ledger(self, why: str) -> ConfigError:
        return ConfigError(
            f"ledger {self.path}: {why}; refusing to append. "
            "Run `korg-recall verify` on it, or start a new ledger file."
        )

    def _check_tip_line(self, raw: bytes | None) -> dict[str, Any]:
        """The last complete line, parsed, when it is a chained entry.

        Raises:
            ConfigError: it is not one (too long, not JSON, nested too deeply, unchained).
        """
        obj = None if raw is None else chained_entry(raw)
        if obj is None:
            raise self._not_a_ledger("the last line is not a chained korg-ledger@v1 entry")
        return obj

    def _read_tip(self, fd: int, size: int) -> tuple[int, str]:
        """``(seq_id, entry_hash)`` of the last complete line, or ``(0, GENESIS_HASH)`` if none.

        Only the tail is read: the last line is found by scanning backwards
        from the end, so appending stays O(line) however long the ledger is.

        Raises:
            ConfigError: the last line is not a chained entry.
        """
        found = last_line(fd, size)
        if found is None:
            return 0, GENESIS_HASH
        obj = self._check_tip_line(found[1])
        return int(obj["seq_id"]), str(obj["entry_hash"])
