"""psycopg's errors, translated in one place into korg-bridge's (always ``raise … from exc``).

What a user can do about a failure decides its exit code (the introspect table):

* the server cannot be reached -- refused, an unknown host, a timeout, a connection
  dropped mid-call -- is :class:`~korg_bridge.errors.NetworkError` (exit 5); a
  dropped connection is :class:`~..backend.ConnectionDropped`, which a read retries
  once;
* the server answers but will not serve us as configured -- a wrong password, an
  unknown role or database, no ``pg_hba.conf`` entry, a missing privilege, a
  missing schema or extension -- is :class:`~korg_bridge.errors.ConfigError`
  (exit 3), naming the fix;
* a writer holding the tenant's lock too long, a statement past its timeout, or
  anything else is a :class:`~korg_bridge.errors.KorgError` (exit 1).

Every message names the store by :func:`~.url.safe_url` and is passed through
:func:`~.url.scrub`: a password never appears in an error, a log or a ledger.
"""

from __future__ import annotations

from korg_bridge.config import ENV_RECALL_STORE
from korg_bridge.errors import ConfigError, ConnectionDropped, KorgError, NetworkError
from korg_bridge.recall.memory.backend.pg.url import safe_url, scrub

__all__ = ["LOCK_TIMEOUT_S", "STATEMENT_TIMEOUT_S", "connect_error", "query_error", "reason_of"]

LOCK_TIMEOUT_S = 10
"""How long a write waits for another writer of the same tenant: far above one memory write."""
STATEMENT_TIMEOUT_S = 30
"""The longest one statement may run (a purge's VACUUM of a big table included)."""

_LOGIN = (
    "password authentication failed",
    "authentication failed",
    "no pg_hba.conf entry",
    "password is required",
    "no password supplied",
    'role "',
    "permission denied for database",
    "ssl",
    "certificate",
)
_MISSING_DATABASE = 'database "'
_SCHEMA_STATES = frozenset({"42P01", "3F000", "42704"})
"""Undefined table, schema, object (a type, a text search configuration): the schema is missing."""


def reason_of(exc: BaseException, url: str) -> str:
    """The driver's message, one line, without the connection prefix or any password."""
    text = " ".join(str(exc).split())
    for prefix in ("connection failed: ", "connection is bad: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.replace("FATAL: ", "").replace("ERROR: ", "")
    return scrub(text, url)[:300].rstrip(". ")


def connect_error(exc: BaseException, url: str) -> KorgError:
    """The error for a connection that could not be made."""
    reason = reason_of(exc, url)
    where = safe_url(url)
    low = reason.lower()
    if _MISSING_DATABASE in low and "does not exist" in low:
        return ConfigError(
            f"cannot open the memory store {where}: {reason}. Create the database (docs/deploy.md) or fix "
            f"the database name in {ENV_RECALL_STORE}."
        )
    if any(phrase in low for phrase in _LOGIN):
        return ConfigError(
            f"cannot log in to the memory store {where}: {reason}. Check the user and password in "
            f"{ENV_RECALL_STORE} (and the server's pg_hba.conf)."
        )
    return NetworkError(
        f"cannot reach the memory store {where}: {reason}. Check that PostgreSQL is running and the host "
        f"and port in {ENV_RECALL_STORE}."
    )


def query_error(exc: BaseException, url: str, *, broken: bool, writing: bool) -> KorgError:
    """The error for a statement that failed (``broken``: the connection is gone with it)."""
    reason = reason_of(exc, url)
    where = safe_url(url)
    state: str | None = getattr(exc, "sqlstate", None)
    if broken or state in ("57P01", "57P02", "57P03") or (state or "").startswith("08"):
        if writing:
            return NetworkError(
                f"the connection to the memory store {where} was lost during a write ({reason}); it was not "
                "retried. Check with `korg-recall memories` whether it landed, and try again."
            )
        return ConnectionDropped(f"the connection to the memory store {where} was lost ({reason})")
    if state == "55P03":
        return KorgError(
            f"the memory store {where} stayed locked by another writer of this tenant for {LOCK_TIMEOUT_S} s. "
            "Try again in a moment."
        )
    if state == "57014":
        return KorgError(
            f"a statement on the memory store {where} ran longer than {STATEMENT_TIMEOUT_S} s and was "
            "cancelled; nothing of it was kept. Try again, or check the server's load."
        )
    if state == "42501":
        return ConfigError(
            f"the memory store {where} refused this role a privilege ({reason}). As the schema's owner, run "
            "`korg-recall store migrate --grant ROLE` for the role in KORG_RECALL_STORE (docs/deploy.md)."
        )
    if state in _SCHEMA_STATES:
        return ConfigError(
            f"the memory store {where} lacks part of its schema ({reason}). As the schema's owner, run "
            "`korg-recall store migrate` (docs/deploy.md)."
        )
    if (state or "").startswith("53"):
        return ConfigError(
            f"the memory store {where} is out of resources ({reason}). Free disk space or memory on the "
            "database server."
        )
    return KorgError(f"the memory store {where} failed: {reason}.")
