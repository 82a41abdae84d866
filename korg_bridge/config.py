"""Every environment variable korg-bridge and korg-recall read, named once, and the one yes/no parser.

**Names.** Each variable is a constant here and nowhere else: the bridge sets several for the
tools it runs (``KORG_BRIDGE_TENANT`` …), korg-recall reads them, and a name spelled twice is a
name that can drift.

**Yes/no switches** all go through :func:`switch`.

Each switch used to be read where it was needed, each with its own idea of "yes":
``KORG_RECALL_ALLOW_SECRETS=on`` showed secrets in memories while history stayed
redacted, and a typo silently meant the default. Now every switch accepts the same
words, case-insensitively, and anything else is a configuration error naming the
variable, so a switch can never mean one thing here and another there:

=========================  ===========================================
on                         ``1``, ``true``, ``yes``, ``on``
off                        ``0``, ``false``, ``no``, ``off``
the switch's default       unset, or empty (surrounding blanks ignored)
a ConfigError (exit 3)     anything else
=========================  ===========================================
"""

from __future__ import annotations

from collections.abc import Mapping

from korg_bridge.errors import ConfigError

__all__ = ["ENGINE_MODES", "OFF_WORDS", "ON_WORDS", "STORE_URL_SCHEMES", "engine_mode", "store_url", "switch"]

# --- korg-bridge ---------------------------------------------------------------------------------
ENV_ALLOW = "KORG_INTROSPECT_MCP_ALLOW"
"""Which side effects the bridge's callables may have (``--allow`` overrides it)."""
ENV_BRIDGE_TOKEN = "KORG_BRIDGE_TOKEN"
"""The one bearer token of an HTTP bridge without a token file; never passed to a tool."""
ENV_BRIDGE_TENANT = "KORG_BRIDGE_TENANT"
"""Set by the HTTP bridge for one call: the calling token's tenant."""
ENV_BRIDGE_ACTOR = "KORG_BRIDGE_ACTOR"
"""Set by the HTTP bridge for one call: the calling token's actor."""
ENV_BRIDGE_TRANSPORT = "KORG_BRIDGE_TRANSPORT"
"""Set by the HTTP bridge for one call (``http``): the caller is on the network."""
ENV_BRIDGE_AUDIT = "KORG_BRIDGE_AUDIT"
"""The audit ledger (``--audit``); passed to HTTP calls so no tenant reads it as history."""
ENV_LEDGER_KEY = "KORG_LEDGER_KEY"
"""An HMAC key for korg-ledger@v1 chains (the audit ledger, the memory operation log)."""

# --- korg-recall ---------------------------------------------------------------------------------
ENV_RECALL_INDEX = "KORG_RECALL_INDEX"
ENV_RECALL_LEDGER = "KORG_RECALL_LEDGER"
ENV_RECALL_STORE = "KORG_RECALL_STORE"
ENV_RECALL_TENANT = "KORG_RECALL_TENANT"
ENV_RECALL_ACTOR = "KORG_RECALL_ACTOR"
ENV_RECALL_TENANT_LEDGERS = "KORG_RECALL_TENANT_LEDGERS"
ENV_RECALL_PROJECT = "KORG_RECALL_PROJECT"
ENV_RECALL_WRITES = "KORG_RECALL_WRITES"
ENV_RECALL_ALLOW_SECRETS = "KORG_RECALL_ALLOW_SECRETS"
ENV_RECALL_MIRROR = "KORG_RECALL_MIRROR"
ENV_RECALL_MODEL = "KORG_RECALL_MODEL"
ENV_RECALL_MODEL_DIR = "KORG_RECALL_MODEL_DIR"
ENV_RECALL_BACKGROUND = "KORG_RECALL_BACKGROUND"
ENV_RECALL_CLAUDE_MEMORY = "KORG_RECALL_CLAUDE_MEMORY"
ENV_RECALL_CLAUDE_WRITEBACK = "KORG_RECALL_CLAUDE_WRITEBACK"
ENV_RECALL_ENGINE = "KORG_RECALL_ENGINE"
"""Whether ``korg-recall`` hands its calls to a resident engine: ``off``, ``on`` (the default: when
one runs) or ``auto`` (the first call starts one); see :func:`engine_mode`."""
ENV_RECALL_ENGINE_IDLE = "KORG_RECALL_ENGINE_IDLE"
"""How long an engine started by ``KORG_RECALL_ENGINE=auto`` waits without a call before it exits."""
ENV_RECALL_ENGINE_WAIT = "KORG_RECALL_ENGINE_WAIT"
"""Seconds the call that starts an engine (``auto``) waits for it to answer instead of running itself."""

# --- other programs' -----------------------------------------------------------------------------
ENV_HOME = "HOME"
ENV_XDG_DATA_HOME = "XDG_DATA_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
ENV_CLAUDE_CONFIG_DIR = "CLAUDE_CONFIG_DIR"
ENV_CLAUDE_PROJECT_DIR = "CLAUDE_PROJECT_DIR"
ENV_CODEX_HOME = "CODEX_HOME"

ON_WORDS = ("1", "true", "yes", "on")
OFF_WORDS = ("0", "false", "no", "off")
_SHOWN_CHARS = 40
"""Of a bad value, what the error quotes: enough to recognise it, never a screenful."""


def switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """The yes/no variable ``name`` of ``env``, or ``default`` when it is unset or empty.

    Raises:
        ConfigError: a value that is neither a yes nor a no word.
    """
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ON_WORDS:
        return True
    if raw in OFF_WORDS:
        return False
    raise ConfigError(
        f"{name}={env[name][:_SHOWN_CHARS]!r} is not a yes/no value: set it to 1, true, yes or on to switch it "
        f"on, to 0, false, no or off to switch it off, or unset it for the default "
        f"({'on' if default else 'off'})."
    )


STORE_URL_SCHEMES = ("postgresql://", "postgres://")


def store_url(env: Mapping[str, str]) -> str | None:
    """``KORG_RECALL_STORE`` when it names a team store (a ``postgresql://`` URL), else None (a file).

    Raises:
        ConfigError: a URL of another scheme.
    """
    raw = env.get(ENV_RECALL_STORE, "").strip()
    if raw.startswith(STORE_URL_SCHEMES):
        return raw
    if "://" in raw:
        scheme = raw.split("://", 1)[0]
        raise ConfigError(
            f"{ENV_RECALL_STORE} names a {scheme}:// URL; the memory store is a SQLite file path or a "
            "postgresql:// URL. Set it to one of those, or unset it for the default file."
        )
    return None


ENGINE_MODES = ("off", "on", "auto")
"""``KORG_RECALL_ENGINE``'s values: never hand a call over, hand it over when an engine runs, or
start one when none does (the yes and no words mean ``on`` and ``off``)."""


def engine_mode(env: Mapping[str, str]) -> str:
    """``KORG_RECALL_ENGINE`` as one of :data:`ENGINE_MODES` (default ``on``).

    Read by the front half of ``korg-recall`` before anything else is imported, so it stays a
    standard-library function.

    Raises:
        ConfigError: any other value.
    """
    raw = env.get(ENV_RECALL_ENGINE, "").strip().lower()
    if raw == "auto":
        return "auto"
    try:
        return "on" if switch(env, ENV_RECALL_ENGINE, True) else "off"
    except ConfigError:
        raise ConfigError(
            f"{ENV_RECALL_ENGINE}={env[ENV_RECALL_ENGINE][:_SHOWN_CHARS]!r} is not an engine mode: set it to "
            "off (never use an engine), on (use one when it runs, the default) or auto (start one when "
            "none runs)."
        ) from None
