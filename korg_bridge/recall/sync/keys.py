"""The keys of sync: the master key, the epoch key that a purge ratchets, one data key per memory.

=================  =====================================================================
master key         32 random bytes, made by ``sync init`` on the first machine and given to
                   the others once (the join key). It never encrypts text: it keys the
                   HMAC that authenticates every record of every machine's file, and the
                   check value in ``FORMAT`` that tells a wrong key from a tampered remote.
epoch key          32 bytes; encrypts each machine's keyring file. Epoch ``n + 1``'s key is
                   ``HKDF(epoch n's key)``: one way. A machine moves to the next epoch when
                   it learns of a purge and forgets the old key -- so no key any machine still
                   holds opens a keyring written before the purge (git keeps those files).
data key (DEK)     32 random bytes per memory; encrypts that memory's operations. A purge
                   destroys it on every machine (it is dropped from the keyrings written
                   under the new epoch), which leaves the memory's old records unreadable.
=================  =====================================================================

All of it lives in ``<data dir>/sync/keys`` (mode 0600), never in the remote, never in a log.
The join key carries the master key and the current epoch key: a join key written down before
a purge can still open what that purge erased, so ``sync status --key`` prints a fresh one.

``cryptography`` is the ``sync`` extra: without it every sync command exits 7.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge.errors import ConfigError, DependencyMissing, UsageError

__all__ = [
    "JOIN_PREFIX",
    "Keys",
    "aead_open",
    "aead_seal",
    "load_keys",
    "ratchet",
    "require_crypto",
    "save_keys",
]

JOIN_PREFIX = "korg-sync1-"
KEY_BYTES = 32
NONCE_BYTES = 12
_AUTH_INFO = b"korg-sync/v1 record authentication"
_CHECK_INFO = b"korg-sync/v1 key check"
_RATCHET_INFO = b"korg-sync/v1 epoch ratchet"


def require_crypto() -> Any:
    """The ChaCha20-Poly1305 class of ``cryptography``.

    Raises:
        DependencyMissing: the ``sync`` extra is not installed.
    """
    try:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    except ImportError as exc:  # tested in a child that cannot import it (test_sync_without_cryptography)
        raise DependencyMissing(
            "sync needs the cryptography package. Install it with: pip install 'korg-bridge[sync]'"
        ) from exc
    return ChaCha20Poly1305


def _hkdf(key: bytes, info: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(key)


def ratchet(key: bytes, steps: int) -> bytes:
    """The epoch key ``steps`` epochs after ``key`` (never before: HKDF is one way)."""
    for _ in range(steps):
        key = _hkdf(key, _RATCHET_INFO)
    return key


def aead_seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """``nonce || ciphertext`` of ``plaintext`` under ``key``, bound to ``aad``."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + bytes(require_crypto()(key).encrypt(nonce, plaintext, aad))


def aead_open(key: bytes, sealed: bytes, aad: bytes) -> bytes | None:
    """The plaintext of :func:`aead_seal`'s output, or None when it does not authenticate."""
    from cryptography.exceptions import InvalidTag

    if len(sealed) < NONCE_BYTES + 16:
        return None
    try:
        return bytes(require_crypto()(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad))
    except InvalidTag:
        return None


@dataclass(slots=True)
class Keys:
    """What ``sync/keys`` holds."""

    master: bytes
    epoch: int
    epoch_key: bytes
    deks: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def fresh(cls) -> Keys:
        return cls(master=secrets.token_bytes(KEY_BYTES), epoch=0, epoch_key=secrets.token_bytes(KEY_BYTES))

    @property
    def auth_key(self) -> bytes:
        return _hkdf(self.master, _AUTH_INFO)

    @property
    def check_value(self) -> str:
        """Published in ``FORMAT``: tells a wrong key from a tampered file, reveals nothing of the key."""
        return hmac.new(self.master, _CHECK_INFO, hashlib.sha256).hexdigest()[:32]

    def join_key(self) -> str:
        raw = self.master + self.epoch.to_bytes(4, "big") + self.epoch_key
        return JOIN_PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    @classmethod
    def from_join_key(cls, text: str) -> Keys:
        """Raises:
        UsageError: not a join key."""
        value = text.strip()
        bad = UsageError(
            "that is not a sync join key: it starts with korg-sync1- and is printed by `korg-recall sync init` "
            "or `korg-recall sync status --key` on a machine already syncing."
        )
        if not value.startswith(JOIN_PREFIX):
            raise bad
        body = value[len(JOIN_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise bad from None
        if len(raw) != 2 * KEY_BYTES + 4:
            raise bad
        return cls(
            master=raw[:KEY_BYTES],
            epoch=int.from_bytes(raw[KEY_BYTES : KEY_BYTES + 4], "big"),
            epoch_key=raw[KEY_BYTES + 4 :],
        )

    def advance_to(self, epoch: int) -> None:
        """Move to ``epoch`` (forgetting every earlier epoch key); nothing if already there."""
        if epoch > self.epoch:
            self.epoch_key = ratchet(self.epoch_key, epoch - self.epoch)
            self.epoch = epoch

    def key_for_epoch(self, epoch: int) -> bytes | None:
        """The key of ``epoch`` if this machine can still have it (the current one or a later one)."""
        return None if epoch < self.epoch else ratchet(self.epoch_key, epoch - self.epoch)

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": 1,
                "master": self.master.hex(),
                "epoch": self.epoch,
                "epoch_key": self.epoch_key.hex(),
                "deks": {mid: key.hex() for mid, key in sorted(self.deks.items())},
            },
            sort_keys=True,
        )


def load_keys(path: Path) -> Keys:
    """Raises:
    ConfigError: missing or unreadable (sync not set up, or the file was damaged)."""
    try:
        data = json.loads(path.read_text("utf-8"))
        return Keys(
            master=bytes.fromhex(data["master"]),
            epoch=int(data["epoch"]),
            epoch_key=bytes.fromhex(data["epoch_key"]),
            deks={str(mid): bytes.fromhex(key) for mid, key in data["deks"].items()},
        )
    except FileNotFoundError:
        raise ConfigError(
            f"sync keys {path} are missing. Run `korg-recall sync init --remote REMOTE --join KEY` again."
        ) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"sync keys {path} cannot be read ({exc}). Restore the file, or set sync up again with --join."
        ) from exc


def save_keys(folder: Path, keys: Keys) -> None:
    """Replace ``folder/keys`` atomically (0600).

    Raises:
        ConfigError: it cannot be written.
    """
    from korg_bridge.recall.memory.mirror.safe_io import write_atomic

    try:
        write_atomic(folder, "keys", keys.to_json())
    except OSError as exc:
        raise ConfigError(f"cannot write the sync keys in {folder}: {exc.strerror or exc}.") from exc
