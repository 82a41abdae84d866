"""Every environment variable korg-bridge and korg-recall read, named once, and the one yes/no parser.

**Names.** Each variable is a constant here and nowhere else: the bridge sets several for the
tools it runs (``KORG_BRIDGE_TENANT`` …), korg-recall reads them, and a name spelled twice is a
name that can drift.

**One typed accessor per setting.** No other module reads a ``KORG_*`` variable's text:
:func:`writes_mode`, :func:`allow_secrets`, :func:`background`, :func:`mirror_on`,
:func:`claude_memory`, :func:`claude_writeback`, :func:`ledger_key`, :func:`model_name`,
:func:`audit_setting`, :func:`bridge_token`, :func:`allow_setting`, :func:`over_http`,
:func:`tenant_from`, :func:`actor_from` and :func:`actor_by_token` here; the variables that name
paths (index, store, ledgers, tenant ledgers file, project, model folder) in
:mod:`korg_bridge.recall.paths`. A test scans the package for any other read.

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

from korg_bridge.errors import ConfigError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on the engine's front path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Literal

    WritesMode = Literal["auto", "confirm", "off"]

__all__ = [
    "ACTOR_MAX",
    "ENGINE_MODES",
    "OFF_WORDS",
    "ON_WORDS",
    "STORE_URL_SCHEMES",
    "WRITE_MODES",
    "actor_by_token",
    "actor_from",
    "allow_secrets",
    "allow_setting",
    "audit_setting",
    "background",
    "bridge_token",
    "claude_memory",
    "claude_writeback",
    "engine_idle",
    "engine_mode",
    "engine_rehearses",
    "engine_wait",
    "is_tenant_name",
    "ledger_key",
    "mirror_on",
    "model_name",
    "over_http",
    "store_url",
    "switch",
    "tenant_from",
    "writes_mode",
]

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
ENV_RECALL_ENGINE_REHEARSE = "KORG_RECALL_ENGINE_REHEARSE"
"""``0``: an engine's spares do not rehearse calls on a scratch history while they wait (docs/engine.md)."""

# --- other programs' -----------------------------------------------------------------------------
ENV_HOME = "HOME"
ENV_XDG_DATA_HOME = "XDG_DATA_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
ENV_CLAUDE_CONFIG_DIR = "CLAUDE_CONFIG_DIR"
ENV_CLAUDE_PROJECT_DIR = "CLAUDE_PROJECT_DIR"
ENV_CODEX_HOME = "CODEX_HOME"
ENV_GIT_SSH_COMMAND = "GIT_SSH_COMMAND"

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


def _text(env: Mapping[str, str], name: str) -> str:
    """The variable's value without surrounding blanks ("" when unset)."""
    return env.get(name, "").strip()


# --- yes/no switches -------------------------------------------------------------------------------


def allow_secrets(env: Mapping[str, str]) -> bool:
    """``KORG_RECALL_ALLOW_SECRETS`` (default off): show secrets in history and memories alike.

    Raises:
        ConfigError: not a yes/no value.
    """
    return switch(env, ENV_RECALL_ALLOW_SECRETS, False)


def background(env: Mapping[str, str]) -> bool:
    """``KORG_RECALL_BACKGROUND`` (default on): whether a background indexer may be started.

    Raises:
        ConfigError: not a yes/no value.
    """
    return switch(env, ENV_RECALL_BACKGROUND, True)


def claude_memory(env: Mapping[str, str]) -> bool:
    """``KORG_RECALL_CLAUDE_MEMORY`` (default on): read Claude Code's memory folder.

    Raises:
        ConfigError: not a yes/no value.
    """
    return switch(env, ENV_RECALL_CLAUDE_MEMORY, True)


def claude_writeback(env: Mapping[str, str]) -> bool:
    """``KORG_RECALL_CLAUDE_WRITEBACK`` (default off): write memories into Claude Code's folder.

    Raises:
        ConfigError: not a yes/no value.
    """
    return switch(env, ENV_RECALL_CLAUDE_WRITEBACK, False)


def mirror_on(env: Mapping[str, str]) -> bool:
    """Whether the Markdown mirror runs: ``KORG_RECALL_MIRROR`` (default on) for a SQLite store;
    never for a team store, whose memories are not one person's files.

    Raises:
        ConfigError: a bad yes/no value, or the mirror asked for with a team store.
    """
    wanted = switch(env, ENV_RECALL_MIRROR, True)
    if _text(env, ENV_RECALL_STORE).startswith(STORE_URL_SCHEMES):
        if _text(env, ENV_RECALL_MIRROR) and wanted:
            raise ConfigError(
                f"{ENV_RECALL_MIRROR}={env[ENV_RECALL_MIRROR]!r}: a PostgreSQL memory store has no Markdown mirror "
                f"(a team store is not one person's folder of files). Unset {ENV_RECALL_MIRROR}, or export with "
                "`korg-recall export --format markdown`."
            )
        return False
    return wanted


# --- values ----------------------------------------------------------------------------------------

WRITE_MODES: tuple[WritesMode, ...] = ("auto", "confirm", "off")


def writes_mode(env: Mapping[str, str]) -> WritesMode:
    """``KORG_RECALL_WRITES``: ``auto`` (default), ``confirm`` (agents' writes wait for a person) or ``off``.

    Raises:
        ConfigError: any other value.
    """
    writes = _text(env, ENV_RECALL_WRITES).lower() or "auto"
    if writes not in WRITE_MODES:
        raise ConfigError(f"{ENV_RECALL_WRITES}={env[ENV_RECALL_WRITES]!r} is not one of auto, confirm, off.")
    return writes


def ledger_key(env: Mapping[str, str]) -> bytes | None:
    """``KORG_LEDGER_KEY`` as the HMAC key of korg-ledger@v1 chains (None: unset or empty, plain SHA-256).

    Taken as it is, blanks included: a key is a secret, not a word to tidy.
    """
    key = env.get(ENV_LEDGER_KEY)
    return key.encode("utf-8") if key else None


def model_name(env: Mapping[str, str]) -> str | None:
    """``KORG_RECALL_MODEL``: the embedding model asked for by name (None: the default)."""
    return _text(env, ENV_RECALL_MODEL) or None


def audit_setting(env: Mapping[str, str]) -> str | None:
    """``KORG_BRIDGE_AUDIT``: the audit ledger's path as given (None: unset or empty)."""
    return _text(env, ENV_BRIDGE_AUDIT) or None


def bridge_token(env: Mapping[str, str]) -> str | None:
    """``KORG_BRIDGE_TOKEN`` exactly as set (None: unset); the caller refuses an empty one by name."""
    return env.get(ENV_BRIDGE_TOKEN)


def allow_setting(env: Mapping[str, str]) -> str | None:
    """``KORG_INTROSPECT_MCP_ALLOW`` exactly as set (None: unset); the bridge's policy parses it."""
    return env.get(ENV_ALLOW)


# --- who is calling (see korg_bridge.recall.tenancy) ------------------------------------------------

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_TENANT_CHARS = _ALNUM | frozenset("._@:+-")
TENANT_MAX = 128
ACTOR_MAX = 128


def is_tenant_name(value: str) -> bool:
    """Letters, digits and ``._@:+-`` (ASCII), at most 128, starting with a letter or digit: safe
    as an environment value, a database key and a folder name. (Sets, not a regular expression:
    the engine's front half reads this module on every call and ``re`` costs it milliseconds.)"""
    return 0 < len(value) <= TENANT_MAX and value[0] in _ALNUM and _TENANT_CHARS.issuperset(value)


def over_http(env: Mapping[str, str]) -> bool:
    """Whether this call came over the bridge's HTTP: a caller off this machine, perhaps."""
    return _text(env, ENV_BRIDGE_TRANSPORT).lower() == "http"


def _names(env: Mapping[str, str], bridge: str, recall: str) -> tuple[str, ...]:
    """Where an identity may come from: over HTTP only the bridge's per-call variable."""
    return (bridge,) if over_http(env) else (bridge, recall)


def tenant_from(env: Mapping[str, str]) -> str | None:
    """The tenant of this call: ``KORG_BRIDGE_TENANT``, else (not over HTTP) ``KORG_RECALL_TENANT``,
    else None.

    Raises:
        ConfigError: the value is not a tenant name (letters, digits, ``._@:+-``; at most 128).
    """
    for name in _names(env, ENV_BRIDGE_TENANT, ENV_RECALL_TENANT):
        value = _text(env, name)
        if value:
            if not is_tenant_name(value):
                raise ConfigError(
                    f"{name}={value[:40]!r} is not a tenant name: use letters, digits and . _ @ : + - "
                    "(at most 128, starting with a letter or digit)."
                )
            return value
    return None


def actor_from(env: Mapping[str, str]) -> str | None:
    """Who writes: ``KORG_BRIDGE_ACTOR`` (the bridge's per-token name), else ``KORG_RECALL_ACTOR``,
    else None (the caller decides between ``user`` and ``agent``)."""
    for name in _names(env, ENV_BRIDGE_ACTOR, ENV_RECALL_ACTOR):
        value = _text(env, name)
        if value:
            return value[:ACTOR_MAX]
    return None


def actor_by_token(env: Mapping[str, str]) -> bool:
    """Whether a bridge token named the actor (``KORG_BRIDGE_ACTOR``): a caller over the network,
    whatever its name."""
    return bool(_text(env, ENV_BRIDGE_ACTOR))


def git_ssh_command(env: Mapping[str, str]) -> str:
    """``GIT_SSH_COMMAND`` for sync's ``git`` children: the person's own, else ssh that never
    prompts (a sync from a hook or a timer must fail, not wait for a password)."""
    return env.get(ENV_GIT_SSH_COMMAND) or "ssh -o BatchMode=yes"


ENGINE_MODES = ("off", "on", "auto")
"""``KORG_RECALL_ENGINE``'s values: never hand a call over, hand it over when an engine runs, or
start one when none does (the yes and no words mean ``on`` and ``off``)."""


def engine_mode(env: Mapping[str, str]) -> str:
    """``KORG_RECALL_ENGINE`` as one of :data:`ENGINE_MODES` (default ``on``).

    Read by the front half of ``korg-recall`` before anything else is imported, so it stays a
    standard-library function.

    Raises:
        ConfigError: not a mode (nor a yes/no word).
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


def engine_idle(env: Mapping[str, str]) -> str:
    """``KORG_RECALL_ENGINE_IDLE``: how long an auto-started engine waits idle before it exits
    (``30m`` unless set; the engine checks the duration and says what is wrong with it)."""
    return _text(env, ENV_RECALL_ENGINE_IDLE) or "30m"


def engine_rehearses(env: Mapping[str, str]) -> bool:
    """``KORG_RECALL_ENGINE_REHEARSE``: whether an engine's spares rehearse a recall on a scratch
    history while they wait (on unless switched off; docs/engine.md).

    Raises:
        ConfigError: a value that is neither a yes nor a no word.
    """
    return switch(env, ENV_RECALL_ENGINE_REHEARSE, True)


def engine_wait(env: Mapping[str, str]) -> float:
    """``KORG_RECALL_ENGINE_WAIT``: seconds the first ``auto`` call waits for the engine it started
    (0 unless set: that call runs in its own process; anything unreadable counts as 0)."""
    try:
        return max(float(_text(env, ENV_RECALL_ENGINE_WAIT) or 0), 0.0)
    except ValueError:
        return 0.0
