"""Who is calling: the tenant a team store walls memories into, and the actor of each write.

The HTTP bridge knows who called (one token per person or CI job) and passes it
to each child it runs: ``KORG_BRIDGE_TENANT`` and ``KORG_BRIDGE_ACTOR``, with
``KORG_BRIDGE_TRANSPORT=http``. For such a call those two are the caller's
whole identity, and a name the token does not give is no name at all: the
bridge's own environment (and an operator's ``KORG_RECALL_*`` in it) is
inherited by every child, so falling back to ``KORG_RECALL_TENANT`` there would
lend every token without a tenant the operator's tenant. Without the bridge's
HTTP -- a person or a CI job at a terminal, or the one client of a stdio
bridge -- ``KORG_BRIDGE_*`` win, else ``KORG_RECALL_TENANT`` and
``KORG_RECALL_ACTOR`` say it.

Where a tenant applies: the team store (``postgresql://``) walls each tenant's
rows off and refuses to run without one; a SQLite store becomes the tenant's own
file (:func:`korg_bridge.recall.memory.backend.factory.location`); and a caller
:func:`walled` off the machine reads only the history the operator gave its
tenant (:mod:`korg_bridge.recall.history.walls`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from korg_bridge.config import (
    ENV_BRIDGE_ACTOR,
    ENV_BRIDGE_TENANT,
    ENV_BRIDGE_TRANSPORT,
    ENV_RECALL_ACTOR,
    ENV_RECALL_TENANT,
)
from korg_bridge.errors import ConfigError

__all__ = [
    "actor_from",
    "is_tenant_name",
    "over_http",
    "require_tenant",
    "tenant_from",
    "walled",
]


_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$")
ACTOR_MAX = 128


def is_tenant_name(value: str) -> bool:
    """Letters, digits and ``._@:+-``, at most 128, starting with a letter or digit: safe as an
    environment value, a database key and a folder name."""
    return _TENANT.fullmatch(value) is not None


def over_http(env: Mapping[str, str]) -> bool:
    """Whether this call came over the bridge's HTTP: a caller off this machine, perhaps."""
    return env.get(ENV_BRIDGE_TRANSPORT, "").strip().lower() == "http"


def tenant_from(env: Mapping[str, str]) -> str | None:
    """The tenant of this call: ``KORG_BRIDGE_TENANT``, else (not over HTTP) ``KORG_RECALL_TENANT``,
    else None.

    Raises:
        ConfigError: the value is not a tenant name (letters, digits, ``._@:+-``; at most 128).
    """
    for name in _names(env, ENV_BRIDGE_TENANT, ENV_RECALL_TENANT):
        value = env.get(name, "").strip()
        if value:
            if not _TENANT.match(value):
                raise ConfigError(
                    f"{name}={value[:40]!r} is not a tenant name: use letters, digits and . _ @ : + - "
                    "(at most 128, starting with a letter or digit)."
                )
            return value
    return None


def require_tenant(env: Mapping[str, str], store: str) -> str:
    """The tenant a team store needs.

    Raises:
        ConfigError: none is set (or one is malformed).
    """
    tenant = tenant_from(env)
    if tenant is None and over_http(env):
        raise ConfigError(
            f"the team memory store {store} keeps each tenant's memories apart and the token of this "
            "call names no tenant. Give it one in the bridge's token file (TOKEN TENANT [ACTOR])."
        )
    if tenant is None:
        raise ConfigError(
            f"the team memory store {store} keeps each tenant's memories apart and no tenant was given. "
            f"Set {ENV_RECALL_TENANT} (the HTTP bridge sets {ENV_BRIDGE_TENANT} for each token)."
        )
    return tenant


def actor_from(env: Mapping[str, str]) -> str | None:
    """Who writes: ``KORG_BRIDGE_ACTOR`` (the bridge's per-token name), else ``KORG_RECALL_ACTOR``,
    else None (the caller decides between ``user`` and ``agent``)."""
    for name in _names(env, ENV_BRIDGE_ACTOR, ENV_RECALL_ACTOR):
        value = env.get(name, "").strip()
        if value:
            return value[:ACTOR_MAX]
    return None


def _names(env: Mapping[str, str], bridge: str, recall: str) -> tuple[str, ...]:
    """Where an identity may come from: over HTTP only the bridge's per-call variable."""
    return (bridge,) if over_http(env) else (bridge, recall)


def walled(env: Mapping[str, str]) -> bool:
    """Whether this caller reads only what its tenant was given: it came over HTTP, and its token
    names a tenant or the store is a team store (a team's deployment, where a token without a
    tenant is still not the machine's user). A person at this machine, or the one client of a
    stdio bridge, can read its files anyway: walling them off would protect nothing.

    Raises:
        ConfigError: a malformed tenant name, or ``KORG_RECALL_STORE`` of an unknown scheme.
    """
    if not over_http(env):
        return False
    if tenant_from(env) is not None:
        return True
    from korg_bridge.config import store_url

    return store_url(env) is not None
