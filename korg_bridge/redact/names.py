"""Which names hold secrets: ``db_pass`` and ``X-Api-Key`` do, ``max_tokens`` and ``public_key`` do not.

A name is split into words (separators, camelCase humps, digits) and judged by
them, never by substrings: ``monkey`` holds no ``key``, ``author`` no ``auth``.
A word that is a secret (``password``, ``token``, ``cookie``, ``pwd``), or a
one-word compound ending in one (``clientkey``, ``dbpass``), makes the name
one, unless the last word says the name is *about* a secret
(``password_reset_url``, ``token_count``, ``secret_name``). ``key`` and
``token`` are read with their neighbours: a database's or a tokenizer's word
before them (``primary_key``, ``eos_token``), or a word after them that they
qualify (``KEY_SPENDING``, ``token_summary``), makes them plain words.

In text (``NAME=value``), ``key``, ``auth`` and ``pass`` alone are too common
(``key=ArrowDown``, ``auth=basic``) to mark a secret; as property names they do.
"""

from __future__ import annotations

import functools
import re

__all__ = ["CACHED_CHARS", "is_secret_name", "is_secret_text_name", "words"]

_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""Splits ``db-password``, ``AUTH_TOKEN``, ``apiKey`` and ``APIKey`` into their words."""

_SECRET_WORDS = frozenset(
    {
        *("auth", "oauth", "authorization", "bearer", "jwt", "cookie", "cookies", "creds"),
        *("pass", "pwd", "pw", "passphrase", "sessionid", "passcode", "pin", "pincode", "mnemonic"),
        "signature",
    }
)
"""Words that mark a secret on their own (``db_pass``, ``AUTH``, ``sessionId``, ``pin``, a wallet's
``mnemonic``, a request's ``signature``, which replays the request it signs)."""
_SECRET_SUFFIXES = (
    *("token", "password", "passwords", "passwd", "secret", "secrets", "passphrase", "credential"),
    *("credentials", "creds", "sessionid", "jwt", "pwd", "cookie", "key", "pass"),
)
"""A word ending so is a secret too, for names written as one word (``accesstoken``,
``clientkey``, ``dbpass``). ``tokens`` is deliberately absent: ``max_tokens`` is a count."""
_PLAIN_COMPOUNDS = frozenset(
    {
        *("monkey", "turkey", "donkey", "hockey", "jockey", "whiskey", "lackey", "hotkey", "turnkey"),
        *("latchkey", "smokey", "malarkey", "flunkey", "bypass", "compass", "overpass", "underpass"),
        *("surpass", "trespass", "encompass"),
    }
)
"""One-word names ending like a secret that are ordinary words (``monkey``, ``compass``)."""
_META_WORDS = frozenset(
    {
        *("url", "uri", "urls", "path", "paths", "file", "files", "dir", "directory", "name", "names"),
        *("type", "types", "kind", "count", "length", "len", "size", "env", "var", "variable", "method"),
        *("mode", "policy", "hint", "reset", "expiry", "expires", "expiration", "ttl", "format", "prefix"),
        *("field", "fields", "provider", "endpoint", "version", "id", "ids", "arn", "min", "max", "limit"),
        *("required", "enabled", "enable", "disabled", "usage", "timeout", "label", "location", "ref"),
        *("source", "backend", "manager", "helper", "command", "cmd", "prompt", "template", "regex"),
        *("pattern", "schema", "scope", "scopes", "algorithm", "alg", "encoding", "stdin", "jar"),
        *("domain", "host", "port", "user", "username", "email", "scheme", "flow", "strategy"),
        *("handler", "server", "service", "status", "error", "errors", "message", "description"),
        *("title", "help", "link", "page", "rate", "lifetime", "age", "duration", "interval"),
        *("validation", "validator", "strength", "rules", "rule", "input", "placeholder", "secure"),
    }
)
"""A last word that makes a name *about* a secret, not one (``password_reset_url``, ``token_count``)."""
_NOT_SECRET_WORDS = frozenset({"public", "pub", "publishable"})
"""``public_key`` and Stripe's ``publishable_key`` are meant to be seen."""
_PLAIN_KEY_QUALIFIERS = frozenset(
    {
        *("primary", "foreign", "sort", "partition", "cache", "idempotency", "lookup", "dedup", "dedupe"),
        *("routing", "shard", "index", "unique", "composite", "row", "range", "object", "s3", "bucket"),
        *("group", "map", "dict", "translation", "i18n", "message", "cursor", "order", "join", "hash"),
        *("natural", "surrogate", "candidate", "hot", "short", "shortcut", "sorting", "react"),
    }
)
"""Words before ``key`` that make it a database or UI key, not a credential."""
_PLAIN_TOKEN_QUALIFIERS = frozenset(
    {
        *("page", "pagination", "continuation", "next", "sync", "cancellation", "cancel", "stop", "eos"),
        *("bos", "pad", "unk", "sep", "cls", "mask", "special", "start", "end", "input", "output"),
        *("prompt", "completion", "max", "min", "num", "lexer", "parser", "first", "last", "current"),
    }
)
"""Words before ``token`` that make it a tokenizer or pagination token (``eos_token``, ``page_token``)."""
_SECRET_TOKENS_QUALIFIERS = frozenset(
    {"api", "access", "auth", "refresh", "bearer", "session", "bot", "oauth"}
)
"""``tokens`` is a count (``max_tokens``) unless one of these comes first (``api_tokens``)."""
_SECRET_CONTINUATIONS = frozenset(
    {
        *("base", "value", "data", "material", "pem", "b64", "base64", "hex", "bytes", "string", "str"),
        *("live", "test", "prod", "production", "dev", "staging", "secret", "pair", "raw", "plain"),
    }
)
"""Words after ``key``/``token`` that still name the secret (``SECRET_KEY_BASE``, ``STRIPE_KEY_LIVE``)."""
_AMBIGUOUS_IN_TEXT = frozenset({"key", "keys", "auth", "pass", "pin", "signature"})
"""Names too common in prose and code to mark a secret in *text* alone (``key=ArrowDown``,
``auth=basic``, a YAML version ``pin: 3.11``, a JSON Web Key's ``signature`` algorithm field); as a
property name they still do."""


CACHED_CHARS = 256
"""Longest argument the caches below keep: a cache holds its keys, and 4096 long
values (a pasted file) would be megabytes. Names are short; long ones are rare."""


def words(name: str) -> tuple[str, ...]:
    """``name``'s words, lower case: ``APIKey`` → ``("api", "key")``."""
    return _cached_words(name) if len(name) <= CACHED_CHARS else _split(name)


def _split(name: str) -> tuple[str, ...]:
    return tuple(word.lower() for word in _NAME_WORD.findall(name))


_cached_words = functools.lru_cache(maxsize=4096)(_split)


def is_secret_name(name: str) -> bool:
    """Tell whether a property called ``name`` holds a secret, by its words.

    Words are split at separators and camelCase humps and compared whole, so
    ``api_key``, ``AUTH_TOKEN``, ``db_pass``, ``session_id`` and ``clientSecret``
    are secrets while ``monkey``, ``author``, ``max_tokens``, ``public_key`` and
    ``password_reset_url`` (a name about a secret, by its last word) are not.
    """
    return _cached_is_secret_name(name) if len(name) <= CACHED_CHARS else _is_secret_name(name)


def _is_secret_name(name: str) -> bool:
    parts = words(name.rsplit(".", 1)[-1])  # self.token_summary is about token_summary
    if not parts or _NOT_SECRET_WORDS.intersection(parts):
        return False
    if parts[-1] in ("id", "ids") and len(parts) > 1 and parts[-2] == "session":
        return True
    if parts[-1] in _META_WORDS:
        return False
    last = len(parts) - 1
    for i, word in enumerate(parts):
        before = parts[i - 1] if i else ""
        if word in ("key", "keys", "token"):
            # KEY_SPENDING, token_summary, DOM_KEY_LOCATION: a "key" or "token" followed by
            # another word qualifies it, unless that word says which secret it is.
            after = parts[i + 1] if i < last else ""
            plain = _PLAIN_TOKEN_QUALIFIERS if word == "token" else _PLAIN_KEY_QUALIFIERS
            if before not in plain and (not after or after in _SECRET_CONTINUATIONS or after.isdigit()):
                return True
        elif word == "tokens":
            if before in _SECRET_TOKENS_QUALIFIERS:
                return True
        elif word in _SECRET_WORDS:
            return True
        elif word.endswith(_SECRET_SUFFIXES) and word not in _PLAIN_COMPOUNDS:
            # clientkey, dbpass: a compound ending in a secret, unless that start
            # makes it a database's key (primarykey) or a tokenizer's token (eostoken).
            stem = word.removesuffix("key").removesuffix("token")
            if stem == word or stem not in _PLAIN_KEY_QUALIFIERS | _PLAIN_TOKEN_QUALIFIERS:
                return True
    return False


_cached_is_secret_name = functools.lru_cache(maxsize=4096)(_is_secret_name)


@functools.lru_cache(maxsize=4096)
def is_secret_text_name(name: str) -> bool:
    """Whether ``name`` marks a secret in text; rules pass names of at most 70 characters."""
    bare = name.lstrip("$-")
    return bare.lower() not in _AMBIGUOUS_IN_TEXT and is_secret_name(bare)
