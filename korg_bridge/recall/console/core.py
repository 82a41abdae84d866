"""What every part of the console shares: who is acting (:class:`Caller`) and the warm state of one
server (:class:`Core`: the server's environment, the caller's environment and context, warm stores
and indexes). :class:`~.services.Console` builds every act on it; the read modules (:mod:`.memview`,
:mod:`.history`, :mod:`.insight`, :mod:`.live`) take it, so none of them imports the services.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from korg_bridge.config import ENV_BRIDGE_ACTOR, ENV_BRIDGE_TENANT, ENV_BRIDGE_TRANSPORT
from korg_bridge.recall.console.warm import Warm

if TYPE_CHECKING:
    from korg_bridge.auth.identity import Identity
    from korg_bridge.recall.memory.backend.protocols import Store
    from korg_bridge.recall.memory.scopes import Context

__all__ = ["PERSON", "Caller", "Core"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is acting in the console: a token's tenant and actor, or the person at this machine."""

    tenant: str | None = None
    actor: str = "user"
    key: str = ""
    """The token's opaque key (``""``: no token): what rate limits and live streams count by."""

    @classmethod
    def of(cls, identity: Identity | None) -> Caller:
        """The caller a request's identity (from the auth gate) stands for."""
        if identity is None or not identity.key:
            return PERSON
        return cls(tenant=identity.tenant, actor=identity.actor or "user", key=identity.key)

    @property
    def warm_key(self) -> str:
        """What opened stores and indexes are kept by: one tenant's never serve another."""
        return f"token:{self.tenant or ''}" if self.key else "local"


PERSON = Caller()
"""The person at this machine, on a loopback server without tokens."""


class Core:
    """The warm, shared state of one ``korg-recall serve``.

    ``env`` is the server's environment (the operator's settings: store, index, ledgers,
    ``KORG_RECALL_ALLOW_SECRETS``); ``cwd`` the folder whose project ``project`` scope means.
    """

    def __init__(self, env: Mapping[str, str], *, cwd: str | None = None) -> None:
        self.base_env = {
            name: value
            for name, value in env.items()
            if name not in (ENV_BRIDGE_TENANT, ENV_BRIDGE_ACTOR, ENV_BRIDGE_TRANSPORT)
        }
        self.cwd = cwd
        self.warm = Warm()
        self.callers: dict[str, Caller] = {}
        """Every caller seen (by warm key): whose history the background tick keeps fresh."""
        self.kept: dict[str, dict[Any, Any]] = {}
        """What the read modules keep between requests (sessions, timeline items, health, previews),
        by kind: this server's, never another's in the same process."""
        self.kept_lock = threading.Lock()
        self.refreshed: dict[str, float] = {}
        """When each caller's history was last brought up to date (monotonic seconds)."""

    def keep(self, kind: str) -> dict[Any, Any]:
        """The cache of ``kind`` (see :attr:`kept`); guard it with :attr:`kept_lock`."""
        with self.kept_lock:
            return self.kept.setdefault(kind, {})

    def close(self) -> None:
        """Close every store and index opened (at shutdown)."""
        self.warm.close()

    # --- who, where -----------------------------------------------------------------------------

    def env_for(self, caller: Caller) -> dict[str, str]:
        """The environment the operations see for ``caller`` (see the module docstring)."""
        self.callers.setdefault(caller.warm_key, caller)
        env = dict(self.base_env)
        if caller.key:
            env[ENV_BRIDGE_TRANSPORT] = "http"
            if caller.tenant:
                env[ENV_BRIDGE_TENANT] = caller.tenant
            env[ENV_BRIDGE_ACTOR] = caller.actor
        return env

    def context(self, caller: Caller) -> Context:
        """The operations' context for ``caller``: a person, never held for approval.

        Raises:
            ConfigError: a bad setting in the server's environment.
        """
        from korg_bridge.recall.memory.scopes import Context

        ctx = Context.from_env(self.env_for(caller), cwd=self.cwd)
        return dataclasses.replace(ctx, actor=caller.actor, is_agent=False)

    def store_exists(self, caller: Caller) -> bool:
        from korg_bridge.recall.memory.backend.factory import store_exists

        return store_exists(self.env_for(caller))

    def with_store(self, caller: Caller, work: Callable[[Store], T], *, write: bool = False) -> T:
        """Run ``work`` on ``caller``'s warm store (a read whose connection dropped runs once more).

        Raises:
            KorgError: from opening the store or from ``work``.
        """
        return self.warm.with_store(caller.warm_key, self.env_for(caller), work, retry=not write)

    def _project(self) -> str:
        from korg_bridge.recall.memory.scopes import Context

        return Context.from_env(self.base_env, cwd=self.cwd).project

    def _write(self, caller: Caller, work: Callable[[Store], dict[str, Any]]) -> dict[str, Any]:
        result = self.with_store(caller, work, write=True)
        self.warm.notify()
        return result
