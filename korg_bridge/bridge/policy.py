"""The side-effect gate: which callables may run.

=================================  ==========================================
``KORG_INTROSPECT_MCP_ALLOW``      allowed ``side_effects``
=================================  ==========================================
unset or empty                     ``none``, ``fs_read``
``fs_write,network``               the defaults plus those listed
``all`` or ``*``                   everything, unknown values included
=================================  ==========================================

Tokens ignore whitespace and case; ``--allow LIST`` overrides the variable.
A token that is none of these is an error naming it and the known ones (exit
2 for ``--allow``, 3 for the variable), never a warning among others: a typo
such as ``fs_writ`` would otherwise start a server that refuses the very
calls it was meant to allow.
A missing or unknown ``side_effects`` value fails closed (allowed only under
``all``), and ``output_mode: session`` is refused even under ``all``: an
interactive session needs a terminal and a lifetime that one tool call
cannot give it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from korg_bridge.bridge.contract import SIDE_EFFECTS, CallableSpec
from korg_bridge.config import ENV_ALLOW, allow_setting
from korg_bridge.errors import ConfigError, KorgError, UsageError

ALWAYS_ALLOWED: frozenset[str] = frozenset({"none", "fs_read"})
GRANTABLE: tuple[str, ...] = ("fs_write", "network", "ledger_write")


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether one callable may run, and the message for the model when not."""

    allowed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Policy:
    """An allow-list of side effects, parsed once from the flag or environment."""

    allowed: frozenset[str] = ALWAYS_ALLOWED
    allow_all: bool = False
    source: str = "default"
    """Where it came from: ``default``, ``env``, or ``--allow``: named in denial messages."""

    @classmethod
    def parse(cls, value: str | None, *, source: str = "--allow") -> Policy:
        """Parse a comma-separated allow list.

        Raises:
            UsageError: an unknown token in ``--allow`` (``source`` other than ``env``).
            ConfigError: an unknown token in ``KORG_INTROSPECT_MCP_ALLOW`` (``source="env"``).
        """
        if value is None or not value.strip():
            return cls(source="default" if value is None else source)
        tokens = [t.strip().lower() for t in value.split(",")]
        tokens = [t for t in tokens if t]
        unknown = [t for t in tokens if t not in SIDE_EFFECTS and t not in ("all", "*")]
        if unknown:
            raise _unknown(unknown, source)
        if any(t in ("all", "*") for t in tokens):
            return cls(allowed=frozenset(SIDE_EFFECTS), allow_all=True, source=source)
        return cls(allowed=frozenset({*ALWAYS_ALLOWED, *tokens}), source=source)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Policy:
        """The policy ``KORG_INTROSPECT_MCP_ALLOW`` describes (default when unset).

        Raises:
            ConfigError: the variable holds an unknown token.
        """
        value = allow_setting(env if env is not None else os.environ)
        if value is None:
            return cls()
        return cls.parse(value, source="env")

    def describe(self) -> str:
        """One line for ``--list-tools`` and logs."""
        if self.allow_all:
            return f"all side effects allowed ({self._origin()})"
        granted = [s for s in SIDE_EFFECTS if s in self.allowed]
        return f"allowed side effects: {', '.join(granted)} ({self._origin()})"

    def _origin(self) -> str:
        return {"default": f"default; set {ENV_ALLOW} to allow more", "env": ENV_ALLOW}.get(
            self.source, self.source
        )

    def check(self, spec: CallableSpec) -> Decision:
        """Decide for one callable; the denial text tells the exact value that would allow it."""
        caps = spec.capabilities
        if caps.output_mode == "session":
            return Decision(
                False,
                f"{spec.command_id} is an interactive session (output_mode: session): it needs a terminal "
                "and runs until closed, so it cannot be served as a one-shot tool call, even with "
                f"{ENV_ALLOW}=all. Run it in a terminal instead.",
            )
        effect = caps.side_effects
        if self.allow_all or effect in ALWAYS_ALLOWED or effect in self.allowed:
            return Decision(True)
        if effect is None or effect not in SIDE_EFFECTS:
            what = (
                "declares no side_effects" if effect is None else f"declares unknown side_effects {effect!r}"
            )
            return Decision(
                False,
                f"denied: {spec.command_id} {what}, so it is refused unless everything is allowed. "
                f"Set {ENV_ALLOW}=all (or pass --allow all) to run it.",
            )
        needed = ",".join(sorted({*self.granted_tokens(), effect}, key=GRANTABLE.index))
        return Decision(
            False,
            f"denied: {spec.command_id} has side_effects {effect}, which the current policy does not allow. "
            f"Set {ENV_ALLOW}={needed} (or pass --allow {needed}) to allow it.",
        )

    def granted_tokens(self) -> list[str]:
        return [t for t in GRANTABLE if t in self.allowed]


def _unknown(tokens: Sequence[str], source: str) -> KorgError:
    """The error naming each unknown token (with the known one it most looks like) and the known ones."""
    known = [*GRANTABLE, "all"]
    named = []
    for token in tokens:
        close = difflib.get_close_matches(token, known, n=1, cutoff=0.6)
        named.append(f'"{token}"' + (f" (did you mean {close[0]}?)" if close else ""))
    what = f"unknown values {', '.join(named)}" if len(named) > 1 else f"an unknown value {named[0]}"
    choices = f"a comma-separated list of {', '.join(GRANTABLE)}, or all"
    if source == "env":
        return ConfigError(f"{ENV_ALLOW} has {what}: set it to {choices}.")
    return UsageError(f"--allow has {what}: pass {choices}.")
