"""Who is calling: the tenant a team store walls memories into, and the actor of each write.

The HTTP bridge knows who called (one token per person or CI job) and passes it
to each child it runs: ``KORG_BRIDGE_TENANT`` and ``KORG_BRIDGE_ACTOR``. Those
win over anything else in the environment: the bridge's own environment (and an
operator's ``KORG_RECALL_*`` in it) is inherited by every child, so letting it
override the per-call identity would put every token's memories in one tenant.
Without the bridge -- a person or a CI job at a terminal -- ``KORG_RECALL_TENANT``
and ``KORG_RECALL_ACTOR`` say it.

A SQLite store is one person's and has no tenants: the tenant is used by the
team store only (``postgresql://``), which refuses to run without one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from korg_bridge.errors import ConfigError

__all__ = [
    "ENV_BRIDGE_ACTOR",
    "ENV_BRIDGE_TENANT",
    "ENV_RECALL_ACTOR",
    "ENV_RECALL_TENANT",
    "actor_from",
    "require_tenant",
    "tenant_from",
]

ENV_BRIDGE_TENANT = "KORG_BRIDGE_TENANT"
ENV_RECALL_TENANT = "KORG_RECALL_TENANT"
ENV_BRIDGE_ACTOR = "KORG_BRIDGE_ACTOR"
ENV_RECALL_ACTOR = "KORG_RECALL_ACTOR"

_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$")
ACTOR_MAX = 128


def tenant_from(env: Mapping[str, str]) -> str | None:
    """The tenant of this call: ``KORG_BRIDGE_TENANT``, else ``KORG_RECALL_TENANT``, else None.

    Raises:
        ConfigError: the value is not a tenant name (letters, digits, ``._@:+-``; at most 128).
    """
    for name in (ENV_BRIDGE_TENANT, ENV_RECALL_TENANT):
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
    if tenant is None:
        raise ConfigError(
            f"the team memory store {store} keeps each tenant's memories apart and no tenant was given. "
            f"Set {ENV_RECALL_TENANT} (the HTTP bridge sets {ENV_BRIDGE_TENANT} for each token)."
        )
    return tenant


def actor_from(env: Mapping[str, str]) -> str | None:
    """Who writes: ``KORG_BRIDGE_ACTOR`` (the bridge's per-token name), else ``KORG_RECALL_ACTOR``,
    else None (the caller decides between ``user`` and ``agent``)."""
    for name in (ENV_BRIDGE_ACTOR, ENV_RECALL_ACTOR):
        value = env.get(name, "").strip()
        if value:
            return value[:ACTOR_MAX]
    return None
