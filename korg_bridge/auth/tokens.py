"""The bearer tokens the HTTP bridge accepts, and whom each one stands for.

``--token-file FILE`` holds one token per line::

    # comments and blank lines are ignored
    9f2c…e1                       # a token alone: no tenant (what the file always held)
    7b41…0a  acme                 # a token of tenant "acme"
    c3d8…5f  acme  ci:nightly     # … and actor "ci:nightly"

Fields are separated by spaces or tabs; a field starting with ``#`` begins a
comment. A token is printable ASCII without spaces (what survives an
``Authorization`` header), not starting with ``#``;
tenant and actor names follow :data:`~korg_bridge.auth.identity.TENANT_NAME` and
:data:`~korg_bridge.auth.identity.ACTOR_NAME`. ``KORG_BRIDGE_TOKEN`` is the
one-token form, without a tenant.

Only SHA-256 digests are kept; the text is dropped once read. A presented
token is hashed and compared with *every* digest in constant time, with no
early exit, so timing tells neither whether nor which token matched.

Nothing here ever names a token: errors point at a line and a field, never
echo a value (a token pasted into the tenant column would otherwise reach
the log).

The file must be a regular file of at most :data:`MAX_FILE_BYTES`, holding at
most :data:`MAX_TOKENS` tokens. A file other users can read is warned about;
one they can write is refused: whoever can add a line can let themselves in.

:class:`Keyring` holds the set in force and replaces it whole on
:meth:`Keyring.reload` (SIGHUP in :mod:`korg_bridge.serving.http`); a file that fails
to load leaves the old set in force.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from korg_bridge._fs.operator_file import read_operator_file
from korg_bridge.auth.identity import ACTOR_NAME, RESERVED_ACTORS, TENANT_NAME, Identity
from korg_bridge.config import ENV_BRIDGE_TOKEN, bridge_token
from korg_bridge.errors import ConfigError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_TOKENS",
    "TOKEN_CHARS",
    "Keyring",
    "TokenSet",
    "load_token",
    "load_tokens",
    "parse_tokens",
    "read_token_file",
]

log = logging.getLogger(__name__)

TOKEN_CHARS = re.compile(r"[!-~]+")
"""Printable ASCII without spaces: what survives an ``Authorization`` header intact."""

MAX_FILE_BYTES = 1024 * 1024
"""Largest token file read: room for thousands of tokens, a bound on what a mistake costs."""

MAX_TOKENS = 10_000
"""Most tokens in one file. Each request is compared with every one (constant time),
so this bounds that work too: about a millisecond at the cap, microseconds for a
team's few dozen."""

SHORT_TOKEN = 16
"""Tokens shorter than this are warned about: a guessable secret guards every tenant's data."""

FORMAT = "expected TOKEN [TENANT [ACTOR]]"


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


@dataclass(frozen=True, slots=True)
class TokenSet:
    """The digests of the accepted tokens, each with its identity."""

    source: str
    """``token file PATH`` or ``KORG_BRIDGE_TOKEN``: for messages."""
    entries: tuple[tuple[bytes, Identity], ...]

    def match(self, presented: bytes) -> Identity | None:
        """The identity of the token ``presented``, or None.

        Every digest is compared, whatever matched before, and the comparison
        itself is constant time.
        """
        digest = _digest(presented)
        found: Identity | None = None
        for known, identity in self.entries:
            hit = hmac.compare_digest(digest, known)
            found = identity if hit else found
        return found

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(identity.key for _, identity in self.entries)

    def summary(self) -> str:
        """``3 tokens, 2 tenants``: for log lines."""
        tenants = {identity.tenant for _, identity in self.entries if identity.tenant is not None}
        tokens = f"{len(self)} token{'s' if len(self) != 1 else ''}"
        return f"{tokens}, {len(tenants)} tenant{'s' if len(tenants) != 1 else ''}"

    @classmethod
    def single(cls, token: str, source: str = ENV_BRIDGE_TOKEN) -> TokenSet:
        """One token without a tenant (``KORG_BRIDGE_TOKEN``, a library caller's ``token=``).

        Raises:
            ConfigError: the token is empty or not one run of printable ASCII.
        """
        if not TOKEN_CHARS.fullmatch(token):
            raise ConfigError(
                f"{source} must hold one token of printable ASCII without spaces, "
                "as it is sent in 'Authorization: Bearer TOKEN'."
            )
        _warn_if_short(len(token), source)
        digest = _digest(token.encode("ascii"))
        return cls(source, ((digest, Identity(key=digest.hex(), where=source)),))


def _warn_if_short(length: int, where: str) -> None:
    if length < SHORT_TOKEN:
        log.warning(
            "%s: a token of %d characters is easy to guess; use a long random one, e.g. from: "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))'",
            where,
            length,
        )


def parse_tokens(text: str, source: str) -> TokenSet:
    """The token set of a token file's ``text``; ``source`` names it in messages.

    Raises:
        ConfigError: a malformed line (naming its number and field, never its
            content), a token declared twice, too many tokens, or none at all.
    """
    entries: list[tuple[bytes, Identity]] = []
    seen: dict[bytes, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}, line {number}"
        fields = line.split()
        comment = next((i for i, f in enumerate(fields) if i and f.startswith("#")), len(fields))
        fields = fields[:comment]  # "TOKEN acme  # the CI runner": a comment after the fields
        if len(fields) > 3:
            raise ConfigError(f"{where}: {FORMAT}, got {len(fields)} fields. Put one token on each line.")
        token, tenant, actor = fields[0], _field(fields, 1), _field(fields, 2)
        if not TOKEN_CHARS.fullmatch(token):
            raise ConfigError(f"{where}: the token must be printable ASCII without spaces ({FORMAT}).")
        if tenant is not None and not TENANT_NAME.fullmatch(tenant):
            raise ConfigError(
                f"{where}: the tenant (field 2) must be 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit."
            )
        if actor is not None and not ACTOR_NAME.fullmatch(actor):
            raise ConfigError(
                f"{where}: the actor (field 3) must be 1-128 letters, digits, '.', '_', '-', '@', ':' "
                "or '+', starting with a letter or digit."
            )
        if actor is not None and actor.lower() in RESERVED_ACTORS:
            raise ConfigError(
                f"{where}: the actor (field 3) {actor!r} is a name korg-recall keeps for writers that are "
                "not network callers (a person here, the mirror, Claude Code, an import). Name the caller, e.g. 'ana' or "
                "'ci:nightly'."
            )
        digest = _digest(token.encode("ascii"))
        if digest in seen:
            raise ConfigError(
                f"{where}: the token of line {seen[digest]} again. Give every caller a token of its own."
            )
        if len(entries) == MAX_TOKENS:
            raise ConfigError(
                f"{where}: more than {MAX_TOKENS} tokens. Split the callers over several bridges."
            )
        seen[digest] = number
        _warn_if_short(len(token), where)
        label = f"line {number} of {source.removeprefix('token file ')}"
        entries.append((digest, Identity(tenant, actor, key=digest.hex(), where=label)))
    if not entries:
        raise ConfigError(
            f"{source} holds no token. Put a long random secret in it, one per line, "
            "e.g. from: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return TokenSet(source, tuple(entries))


def _field(fields: list[str], index: int) -> str | None:
    return fields[index] if len(fields) > index else None


def read_token_file(path: str) -> str:
    """The text of a token file, read safely (see :func:`read_operator_file`).

    Raises:
        ConfigError: the file cannot be read, is not a regular file, is too
            large, is not UTF-8, or other users can write it.
    """
    return read_operator_file(
        path,
        what="token file",
        flag="--token-file",
        content=f"one token on each line ({FORMAT})",
        others_could="add a token of their own",
    )


def load_tokens(env: Mapping[str, str], token_file: str | None) -> TokenSet | None:
    """The tokens from ``token_file``, else ``KORG_BRIDGE_TOKEN``, else None (no token).

    The file wins over the variable: it was named on this command line, the
    variable may be inherited from anywhere.

    Raises:
        ConfigError: as :func:`read_token_file` and :func:`parse_tokens`; an
            empty or malformed ``KORG_BRIDGE_TOKEN``.
    """
    if token_file is not None:
        return parse_tokens(read_token_file(token_file), f"token file {token_file}")
    value = bridge_token(env)
    if value is None:
        return None
    if not value.strip():
        raise ConfigError(
            f"{ENV_BRIDGE_TOKEN} is empty. Put a long random secret in it, "
            "e.g. from: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return TokenSet.single(value.strip(), ENV_BRIDGE_TOKEN)


class Keyring:
    """The token set in force; :meth:`reload` replaces it whole, or not at all."""

    def __init__(self, tokens: TokenSet, path: str | None = None) -> None:
        self.tokens = tokens
        self.path = path
        """The token file to reload from; None when the tokens did not come from a file."""

    def match(self, presented: bytes) -> Identity | None:
        return self.tokens.match(presented)

    def reload(self) -> TokenSet:
        """Read the token file again and put its tokens in force (one reference swap:
        a request being checked sees the old set or the new one, never a mix).

        Raises:
            ConfigError: there is no file to reload from, or it fails to load;
                the tokens in force stay.
        """
        if self.path is None:
            raise ConfigError(
                f"the token comes from {self.tokens.source}, not a file; "
                "pass --token-file to change tokens without a restart"
            )
        self.tokens = parse_tokens(read_token_file(self.path), f"token file {self.path}")
        return self.tokens


def load_token(env: Mapping[str, str], token_file: str | None) -> str | None:
    """The bearer token: ``token_file``'s content, else ``KORG_BRIDGE_TOKEN``, else None.

    The file wins over the environment: it was named on this command line,
    the variable may be inherited from anywhere. Surrounding whitespace (the
    trailing newline of ``echo secret > file``) is stripped.

    This is the one-token form; :func:`korg_bridge.auth.tokens.load_tokens` reads
    a token file of several tokens with their tenants.

    Raises:
        ConfigError: the file cannot be read (see
            :func:`korg_bridge.auth.tokens.read_token_file`), or the token is empty
            or not one run of printable ASCII. Messages never contain the token.
    """
    if token_file is not None:
        source, text = f"token file {token_file}", read_token_file(token_file)
    else:
        value = bridge_token(env)
        if value is None:
            return None
        source, text = ENV_BRIDGE_TOKEN, value
    token = text.strip()
    if not token:
        raise ConfigError(
            f"{source} is empty. Put a long random secret in it, "
            "e.g. from: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    if not TOKEN_CHARS.fullmatch(token):
        raise ConfigError(
            f"{source} must hold one token of printable ASCII without spaces, "
            "as it is sent in 'Authorization: Bearer TOKEN'."
        )
    return token
