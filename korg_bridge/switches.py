"""Yes/no environment switches: the one parser every ``KORG_*`` on/off variable goes through.

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

__all__ = ["OFF_WORDS", "ON_WORDS", "switch"]

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
