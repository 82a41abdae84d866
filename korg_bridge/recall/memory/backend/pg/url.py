"""A PostgreSQL URL as messages may show it: never with its password.

A connection string carries a password (in the user part, or as a ``password``
parameter): it must never reach a log, an error message, a tool result or the
bridge's audit ledger. :func:`safe_url` is the one form korg-recall shows;
:func:`scrub` removes the password from any text that might quote it (a driver
message).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["INSTALL_HINT", "password_of", "safe_url", "scrub"]

INSTALL_HINT = "pip install 'korg-bridge[postgres]'"
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:@/?#]*):(?P<password>[^@/?#]*)@", re.I)


def safe_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (user part and query parameters).

    >>> safe_url("postgresql://app:s3cret@db:5432/korg?sslmode=require&password=x")
    'postgresql://app:***@db:5432/korg?sslmode=require&password=%2A%2A%2A'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(r"\g<scheme>\g<user>:***@", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:***@{hostport}" if colon else f"{user}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(name in _SECRET_PARAMS for name, _ in pairs):
            query = urlencode([(n, "***" if n in _SECRET_PARAMS else v) for n, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def password_of(url: str) -> list[str]:
    """Every password ``url`` carries (decoded and as written), to scrub from foreign messages."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return found
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _SECRET_PARAMS and value:
            found.append(value)
    return [p for p in dict.fromkeys(found) if p]


def scrub(text: str, url: str) -> str:
    """``text`` with ``url``'s passwords (and any user:password@ part) replaced by ``***``."""
    out = _USERINFO.sub(r"\g<scheme>\g<user>:***@", text)
    for secret in sorted(password_of(url), key=len, reverse=True):
        out = out.replace(secret, "***")
    return out
