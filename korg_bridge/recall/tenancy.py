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

from collections.abc import Mapping

from korg_bridge.config import (
    ENV_BRIDGE_TENANT,
    ENV_RECALL_TENANT,
    actor_from,
    is_tenant_name,
    over_http,
    tenant_from,
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
# over_http, tenant_from and actor_from read the variables and live with every other reader of
# one, in korg_bridge.config; this module, where callers look for them, re-exports them.


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
