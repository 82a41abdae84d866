"""The remote's files, byte for byte: records, their chain, keyrings and ``FORMAT``.

Layout (every path under the remote's root)::

    korg-sync/v1/FORMAT                  {"format": 1, "key_check": ...}
    korg-sync/v1/machines/<machine>.ops  one record per line, appended only by <machine>
    korg-sync/v1/keyring/<machine>.keys  the data keys <machine> knows, under the epoch key

A record is one line of JSON::

    {"h": {"id": memory, "k": "w"|"purge", "l": lamport, "m": machine, "p": prev-hash,
           "s": seq, "u": op-id}, "c": base64(nonce || ChaCha20-Poly1305(payload)), "t": hmac}

The header is clear text (what ordering, chaining and key lookup need -- and what the remote's
operator learns); the payload is the operation, encrypted under the memory's data key with the
header as associated data. ``t`` is HMAC-SHA256 over header and ciphertext under a key derived
from the master key; ``p`` is the SHA-256 of the previous line (of a fixed genesis text for the
first). So a line changed, dropped, moved, or a file swapped for an older copy of itself, fails
:func:`verify` before anything of it is applied.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from korg_bridge.errors import RemoteRefused
from korg_bridge.recall.sync.keys import aead_open, aead_seal

__all__ = [
    "ROOT",
    "Mark",
    "Record",
    "RemoteRefused",
    "format_text",
    "genesis",
    "keyring_path",
    "make_record",
    "open_keyring",
    "ops_path",
    "seal_keyring",
    "verify",
]

ROOT = "korg-sync/v1"
FORMAT_PATH = f"{ROOT}/FORMAT"
MAX_LINE_BYTES = 4 * 1024 * 1024
"""A record carries one version (bodies are capped at 8 KB): a longer line is not ours."""


def ops_path(machine: str) -> str:
    return f"{ROOT}/machines/{machine}.ops"


def keyring_path(machine: str) -> str:
    return f"{ROOT}/keyring/{machine}.keys"


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def genesis(machine: str) -> str:
    return hashlib.sha256(b"korg-sync/v1 genesis " + machine.encode("ascii")).hexdigest()


def format_text(check_value: str) -> str:
    return json.dumps({"format": 1, "key_check": check_value}, sort_keys=True) + "\n"


@dataclass(frozen=True, slots=True)
class Mark:
    """How far one machine's file was applied: the last record's seq and hash, and where it ends."""

    seq: int
    hash: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Record:
    machine: str
    seq: int
    lamport: int
    kind: str
    memory_id: str
    uid: str
    sealed: bytes
    mark: Mark
    head: bytes = b""
    """The header exactly as written: what the HMAC covers and the payload's associated data."""

    @property
    def order(self) -> tuple[int, str, int]:
        """The one order every machine applies operations in."""
        return (self.lamport, self.machine, self.seq)

    def header(self) -> dict[str, Any]:
        return {
            "id": self.memory_id,
            "k": self.kind,
            "l": self.lamport,
            "m": self.machine,
            "p": "",
            "s": self.seq,
            "u": self.uid,
        }


class RecordHeader(TypedDict):
    """What a record says in clear (ordering, chaining): everything but its sealed payload."""

    machine: str
    seq: int
    lamport: int
    kind: str
    memory_id: str
    uid: str
    prev: str


def make_record(
    *, auth_key: bytes, payload: dict[str, Any] | None, dek: bytes | None, **fields: Unpack[RecordHeader]
) -> tuple[bytes, str]:
    """One record line (no newline) and its hash."""
    header = {
        "id": fields["memory_id"],
        "k": fields["kind"],
        "l": fields["lamport"],
        "m": fields["machine"],
        "p": fields["prev"],
        "s": fields["seq"],
        "u": fields["uid"],
    }
    head = canonical(header)
    sealed = b"" if payload is None or dek is None else aead_seal(dek, canonical(payload), head)
    text = base64.b64encode(sealed)
    tag = hmac.new(auth_key, head + b"\n" + text, hashlib.sha256).hexdigest()
    line = b'{"c":"' + text + b'","h":' + head + b',"t":"' + tag.encode("ascii") + b'"}'
    return line, hashlib.sha256(line).hexdigest()


def open_payload(record: Record, dek: bytes) -> dict[str, Any] | None:
    """The operation a record carries, or None when ``dek`` does not open it."""
    plain = aead_open(dek, record.sealed, record.head)
    if plain is None:
        return None
    value = json.loads(plain)
    return value if isinstance(value, dict) else None


def verify(
    name: str, machine: str, data: bytes, auth_key: bytes, mark: Mark | None
) -> list[tuple[Record, str]]:
    """The records of ``machine``'s file after ``mark``, each with the hash of the one before it.

    Raises:
        RemoteRefused: the file does not extend what was applied from it, or a line fails its
            HMAC or its chain.
    """

    def refuse(detail: str) -> RemoteRefused:
        return RemoteRefused(
            f"{name} was altered, truncated or replayed: {detail}; nothing was applied. If the remote was "
            "restored from an old copy, restore it again from the newest one."
        )

    prev = genesis(machine)
    seq = 0
    pos = 0
    if mark is not None:
        if len(data) < mark.end or hashlib.sha256(data[mark.start : mark.end]).hexdigest() != mark.hash:
            raise refuse(f"record {mark.seq}, applied here already, is no longer where it was")
        prev, seq, pos = mark.hash, mark.seq, mark.end + 1
    out: list[tuple[Record, str]] = []
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            raise refuse(f"record {seq + 1} is cut short")
        line = data[pos:end]
        if len(line) > MAX_LINE_BYTES:
            raise refuse(f"record {seq + 1} is longer than any record")
        try:
            # The line is exactly what make_record writes: the header's bytes are taken as they are
            # (the HMAC covers them), never re-encoded.
            split_h, split_t = line.find(b'","h":'), line.rfind(b',"t":"')
            if not line.startswith(b'{"c":"') or split_h < 0 or split_t < split_h or not line.endswith(b'"}'):
                raise ValueError("not a record line")
            text = line[6:split_h]
            head = line[split_h + 6 : split_t]
            tag = line[split_t + 6 : -2].decode("ascii")
            header = json.loads(head)
            sealed = base64.b64decode(text, validate=True)
            record = Record(
                machine=str(header["m"]),
                seq=int(header["s"]),
                lamport=int(header["l"]),
                kind=str(header["k"]),
                memory_id=str(header["id"]),
                uid=str(header["u"]),
                sealed=sealed,
                mark=Mark(int(header["s"]), hashlib.sha256(line).hexdigest(), pos, end),
                head=head,
            )
            claimed_prev = str(header["p"])
        except (ValueError, KeyError, TypeError, UnicodeEncodeError, binascii.Error):
            raise refuse(f"record {seq + 1} is not a record") from None
        expected = hmac.new(auth_key, head + b"\n" + text, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, tag):
            raise refuse(f"record {seq + 1} fails its authentication")
        if record.machine != machine:
            raise refuse(f"record {seq + 1} belongs to machine {record.machine}")
        if record.seq != seq + 1 or claimed_prev != prev:
            raise refuse(f"record {seq + 1} does not follow record {seq}")
        out.append((record, prev))
        prev, seq, pos = record.mark.hash, record.seq, end + 1
    return out


def seal_keyring(machine: str, epoch: int, epoch_key: bytes, deks: dict[str, bytes]) -> str:
    header = {"epoch": epoch, "machine": machine}
    body = canonical({mid: key.hex() for mid, key in sorted(deks.items())})
    sealed = aead_seal(epoch_key, body, canonical(header))
    return json.dumps({**header, "sealed": base64.b64encode(sealed).decode("ascii")}, sort_keys=True) + "\n"


def keyring_epoch(data: bytes) -> tuple[int, dict[str, Any]] | None:
    try:
        obj = json.loads(data)
        return int(obj["epoch"]), obj
    except (ValueError, KeyError, TypeError):
        return None


def open_keyring(obj: dict[str, Any], epoch_key: bytes) -> dict[str, bytes] | None:
    """The data keys of a keyring file, or None when ``epoch_key`` does not open it."""
    try:
        header = {"epoch": int(obj["epoch"]), "machine": str(obj["machine"])}
        sealed = base64.b64decode(str(obj["sealed"]), validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    plain = aead_open(epoch_key, sealed, canonical(header))
    if plain is None:
        return None
    try:
        return {str(mid): bytes.fromhex(str(key)) for mid, key in json.loads(plain).items()}
    except (ValueError, AttributeError):
        return None
