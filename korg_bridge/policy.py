"""The side-effect gate: which callables may run.

=================================  ==========================================
``KORG_INTROSPECT_MCP_ALLOW``      allowed ``side_effects``
=================================  ==========================================
unset or empty                     ``none``, ``fs_read``
``fs_write,network``               the defaults plus those listed
``all`` or ``*``                   everything, unknown values included
=================================  ==========================================

Tokens ignore whitespace and case; ``--allow LIST`` overrides the variable.
A missing or unknown ``side_effects`` value fails closed (allowed only under
``all``), and ``output_mode: session`` is refused even under ``all``: an
interactive session needs a terminal and a lifetime that one tool call
cannot give it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .contract import SIDE_EFFECTS, CallableSpec

log = logging.getLogger(__name__)

ENV_VAR = "KORG_INTROSPECT_MCP_ALLOW"
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
    unknown_tokens: tuple[str, ...] = field(default=())

    @classmethod
    def parse(cls, value: str | None, *, source: str = "--allow") -> Policy:
        """Parse a comma-separated allow list; unknown tokens are kept and warned about."""
        if value is None or not value.strip():
            return cls(source="default" if value is None else source)
        tokens = [t.strip().lower() for t in value.split(",")]
        tokens = [t for t in tokens if t]
        if any(t in ("all", "*") for t in tokens):
            return cls(allowed=frozenset(SIDE_EFFECTS), allow_all=True, source=source)
        allowed = set(ALWAYS_ALLOWED)
        unknown: list[str] = []
        for token in tokens:
            if token in SIDE_EFFECTS:
                allowed.add(token)
            else:
                unknown.append(token)
        for token in unknown:
            log.warning(
                "ignoring unknown %s token %r; known: %s, all",
                ENV_VAR if source == "env" else "--allow",
                token,
                ", ".join(GRANTABLE),
            )
        return cls(allowed=frozenset(allowed), source=source, unknown_tokens=tuple(unknown))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Policy:
        """The policy ``KORG_INTROSPECT_MCP_ALLOW`` describes (default when unset)."""
        value = (env if env is not None else os.environ).get(ENV_VAR)
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
        return {"default": f"default; set {ENV_VAR} to allow more", "env": ENV_VAR}.get(
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
                f"{ENV_VAR}=all. Run it in a terminal instead.",
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
                f"Set {ENV_VAR}=all (or pass --allow all) to run it.",
            )
        needed = ",".join(sorted({*self.granted_tokens(), effect}, key=GRANTABLE.index))
        return Decision(
            False,
            f"denied: {spec.command_id} has side_effects {effect}, which the current policy does not allow. "
            f"Set {ENV_VAR}={needed} (or pass --allow {needed}) to allow it.",
        )

    def granted_tokens(self) -> list[str]:
        return [t for t in GRANTABLE if t in self.allowed]
