"""Who is calling through the HTTP bridge, and what a tool's process learns of it.

A bearer token of the token file stands for a tenant and an actor
(:mod:`korg_bridge.auth.tokens`). The HTTP gate puts the :class:`Identity` of the
token a request carried into that request's ASGI scope
(:data:`SCOPE_KEY`); the SDK hands every message's Starlette ``Request`` to
the handler as ``ctx.request``, for 2025 sessions and 2026 single requests
alike, so :func:`request_identity` reads the identity of the very request
that carries the call.

Not a context variable: a stateful session's messages are served by one
task, started while the session's *first* request was being handled. A
context variable set by the gate would be copied into that task once, and
every later call of the session would see whoever opened it.

What the child sees (:func:`child_environment`), for one call only:

- **over HTTP**: ``KORG_BRIDGE_TENANT`` and ``KORG_BRIDGE_ACTOR`` are the
  token's, and a name the token does not give is removed (a token with no
  tenant, an open loopback server: both), whatever the bridge's own
  environment held; ``KORG_BRIDGE_TRANSPORT=http`` says that these two are the
  caller's whole identity, so a tool's own identity variables inherited from
  the bridge's environment (korg-recall's ``KORG_RECALL_TENANT``) cannot lend
  every caller a tenant either; and ``KORG_BRIDGE_AUDIT`` names the ledger the
  bridge audits to, which records every caller's arguments, so a tool that
  reads files for its callers can keep it from them;
- **over stdio or in process** (no HTTP request): the environment is left
  alone; whoever started the bridge is the one caller, and may set them.

Over HTTP ``KORG_BRIDGE_TOKEN`` is removed too: the bridge's secret is not
the tool's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from korg_bridge.config import (
    ENV_BRIDGE_ACTOR,
    ENV_BRIDGE_AUDIT,
    ENV_BRIDGE_TENANT,
    ENV_BRIDGE_TOKEN,
    ENV_BRIDGE_TRANSPORT,
)
from korg_bridge.errors import ConfigError

__all__ = [
    "ACTOR_NAME",
    "ANONYMOUS",
    "RESERVED_ACTORS",
    "SCOPE_KEY",
    "TENANT_NAME",
    "Identity",
    "child_environment",
    "request_identity",
]


TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A tenant: up to 64 letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit.
It becomes an environment value, a ledger field and (in korg-recall) a database key,
so nothing that needs quoting anywhere."""

ACTOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}")
"""An actor: up to 128 of the tenant's characters plus ``@``, ``:`` and ``+``
(``ana@example.com``, ``ci:nightly``)."""

RESERVED_ACTORS = frozenset({"user", "mirror", "claude", "import"})
"""Actor names korg-recall gives to writers a token cannot be: ``user`` (a person at this
machine, whose writes ``KORG_RECALL_WRITES=confirm`` does not hold and whose text the brief shows
unquoted), ``mirror`` (hand edits of the Markdown mirror), ``claude`` (Claude Code's folders) and
``import`` (``korg-recall import``).
A token named so would make a network caller look like one of them in every log and brief."""

SCOPE_KEY = "korg.identity"
"""ASGI scope key under which the gate leaves the request's :class:`Identity`."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Whom one bearer token stands for."""

    tenant: str | None = None
    actor: str | None = None
    key: str = ""
    """Opaque, the same for every request of one token (``""``: no token): what rate
    limits count by and what a session is bound to. Never logged."""
    where: str = ""
    """Where the token was declared (``line 3 of /etc/korg/tokens``), for log lines."""

    def __post_init__(self) -> None:
        if self.tenant is not None and not TENANT_NAME.fullmatch(self.tenant):
            raise ConfigError(f"invalid tenant name: {_tenant_rule()}")
        if self.actor is not None and not ACTOR_NAME.fullmatch(self.actor):
            raise ConfigError(f"invalid actor name: {_actor_rule()}")

    def describe(self) -> str:
        """For a log line: tenant and actor, else where the token came from."""
        parts = [f"tenant {self.tenant}"] if self.tenant else []
        if self.actor:
            parts.append(f"actor {self.actor}")
        if not parts:
            parts.append(f"the token of {self.where}" if self.where else "a caller without a token")
        return ", ".join(parts)


ANONYMOUS = Identity()
"""An HTTP caller of a server that takes no token (loopback only)."""


def _tenant_rule() -> str:
    return "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def _actor_rule() -> str:
    return "1-128 letters, digits, '.', '_', '-', '@', ':' or '+', starting with a letter or digit"


def request_identity(request: Any) -> Identity | None:
    """The identity of the HTTP request behind a call (``ctx.request``), or None when
    the call did not come over HTTP (stdio, an in-process client).

    A request that never passed our gate (an app built around the server by
    other means) has no identity: :data:`ANONYMOUS`.
    """
    if request is None:
        return None
    scope = getattr(request, "scope", None)
    found = scope.get(SCOPE_KEY) if isinstance(scope, Mapping) else None
    return found if isinstance(found, Identity) else ANONYMOUS


def child_environment(
    base: Mapping[str, str] | None, identity: Identity | None, *, audit: str | None = None
) -> Mapping[str, str] | None:
    """The environment a call's process gets: ``base`` (None: the bridge's own)
    with the identity applied as the module docstring says; ``audit`` is the
    absolute path of the bridge's audit ledger, if it keeps one.

    ``None`` in, ``None`` out when there is no identity to apply, so a stdio
    call inherits exactly what it always did.
    """
    if identity is None:
        return base
    env = dict(os.environ if base is None else base)
    for name in (ENV_BRIDGE_TOKEN, ENV_BRIDGE_TENANT, ENV_BRIDGE_ACTOR):
        env.pop(name, None)
    env[ENV_BRIDGE_TRANSPORT] = "http"
    if identity.tenant is not None:
        env[ENV_BRIDGE_TENANT] = identity.tenant
    if identity.actor is not None:
        env[ENV_BRIDGE_ACTOR] = identity.actor
    if audit is not None:
        env[ENV_BRIDGE_AUDIT] = audit
    return env
