"""Remove recognisable secrets from text before it leaves korg-recall.

Agent history is full of credentials: a ``cat .env``, an ``export
OPENAI_API_KEY=…``, a ``curl -H "Authorization: Bearer …"``. Recall hands
that history to a model, so snippets and ``show`` output pass through
:func:`redact` / :func:`redact_value`, which replace each secret with
``[redacted]`` and count them.

Only shapes that are secrets by construction are matched (vendor key
prefixes, JWTs, PEM private keys, ``Bearer`` tokens, passwords inside
connection URLs); ordinary words, 64-hex ``entry_hash`` values, git hashes and
UUIDs never match, because a recall full of false ``[redacted]`` is useless.
Redacting twice changes nothing and counts nothing the second time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["REDACTED", "redact", "redact_value"]

REDACTED = "[redacted]"

_B = r"(?<![A-Za-z0-9_-])"
"""Start of a token: ``task-…`` must not read as an ``sk-…`` key."""
_E = r"(?![A-Za-z0-9_-])"

_Replacer = Callable[[re.Match[str]], str]


def _whole(_match: re.Match[str]) -> str:
    return REDACTED


def _bearer(match: re.Match[str]) -> str:
    return f"{match.group(1)} {REDACTED}"


def _url_password(match: re.Match[str]) -> str:
    return f"{match.group(1)}{match.group(2)}:{REDACTED}@"


_PATTERNS: list[tuple[str, re.Pattern[str], _Replacer]] = [
    (
        "pem-private-key",
        # A preview cut mid-key has no END line: take the base64 body up to the cut.
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[A-Za-z0-9+/=\s\\]*)",
            re.DOTALL,
        ),
        _whole,
    ),
    ("anthropic", re.compile(_B + r"sk-ant-[A-Za-z0-9_-]{20,}"), _whole),
    ("openai", re.compile(_B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), _whole),
    ("github", re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})" + _E), _whole),
    ("slack", re.compile(_B + r"xox[abprs]-[A-Za-z0-9-]{10,}"), _whole),
    ("aws-access-key", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"), _whole),
    ("google-api-key", re.compile(_B + r"AIza[0-9A-Za-z_-]{35}" + _E), _whole),
    ("stripe", re.compile(_B + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}"), _whole),
    (
        "bearer",
        # A token has a digit: "Bearer authentication" in prose is not a secret.
        re.compile(r"\b(Bearer)\s+(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{12,}"),
        _bearer,
    ),
    ("jwt", re.compile(_B + r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), _whole),
    (
        "url-password",
        re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)([^:/?#@\s]+):(?!\[redacted\]@)([^@/?#\s]+)@"),
        _url_password,
    ),
]


def redact(text: str) -> tuple[str, int]:
    """Return ``text`` with each recognisable secret replaced by ``[redacted]``, and how many there were."""
    total = 0
    for _name, pattern, replacer in _PATTERNS:
        text, count = pattern.subn(replacer, text)
        total += count
    return text, total


def redact_value(obj: Any) -> tuple[Any, int]:
    """Return a copy of a JSON value with every string redacted, and the number of secrets.

    Keys are kept as they are: they name fields (``api_key``), they do not hold secrets.
    """
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        total = 0
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            out[key], count = redact_value(value)
            total += count
        return out, total
    if isinstance(obj, list | tuple):
        total = 0
        items: list[Any] = []
        for value in obj:
            clean, count = redact_value(value)
            items.append(clean)
            total += count
        return items, total
    return obj, 0
