"""Scopes, and the context of one call: who writes, from where, under which approval mode.

A memory belongs to one scope:

* ``user`` -- everywhere;
* ``project:<root>`` -- the canonical git root of the working directory
  (:func:`korg_bridge.recall.project.project_root`; worktrees of one repository
  share it), else the directory itself;
* ``agent:<name>``, ``session:<id>``.

Reads see ``user`` and the current project unless a scope is named, so nothing
of another project is visible without naming it. The working directory is the
process's; ``KORG_RECALL_PROJECT`` overrides it for agents that run korg-recall
from elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

from korg_bridge.config import (
    ENV_RECALL_PROJECT,
    ENV_RECALL_WRITES,
    WRITE_MODES,
    actor_by_token,
    actor_from,
    allow_secrets,
    mirror_on,
    writes_mode,
)
from korg_bridge.errors import ConfigError, UsageError
from korg_bridge.recall.paths import project_dir
from korg_bridge.recall.project import find_git_root, project_root

__all__ = [
    "WRITE_MODES",
    "Context",
    "mirror_dir_of",
    "parse_scope",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$")
_SCOPE_HELP = "use user, project, project:/absolute/path, agent:NAME or session:ID"
_SAFE_SEGMENT = re.compile(r"[^A-Za-z0-9._-]")


def parse_scope(text: str, project: str) -> str:
    """A ``scope`` argument in canonical form (``project`` means ``project``, the current one).

    Raises:
        UsageError: not a scope.
    """
    value = text.strip()
    if value == "user":
        return "user"
    if value == "project":
        return project
    kind, sep, rest = value.partition(":")
    if sep and kind == "project":
        if not os.path.isabs(rest):
            raise UsageError(f"bad scope {text!r}: a project scope needs an absolute path; {_SCOPE_HELP}.")
        return "project:" + (project_root(rest) if os.path.exists(rest) else os.path.normpath(rest))
    if sep and kind in ("agent", "session") and _NAME.match(rest):
        return f"{kind}:{rest}"
    raise UsageError(f"bad scope {text!r}: {_SCOPE_HELP}.")


def mirror_dir_of(scope: str) -> str:
    """The mirror sub-folder (relative, ``/``-separated) of a canonical scope.

    ``project/<basename>-<hash8>`` keeps two projects of one name apart; names that
    are not plain file names get a hash suffix so that two of them never share a folder.
    """
    if scope == "user":
        return "user"
    kind, _, rest = scope.partition(":")
    digest = hashlib.sha256(rest.encode("utf-8")).hexdigest()[:8]
    if kind == "project":
        base = _SAFE_SEGMENT.sub("_", os.path.basename(rest.rstrip("/")) or "root")
        return f"project/{base.lstrip('.') or 'root'}-{digest}"
    safe = _SAFE_SEGMENT.sub("_", rest).lstrip(".") or "_"
    if safe != rest:
        safe = f"{safe}-{digest}"
    return f"{kind}/{safe}"


@dataclass(frozen=True, slots=True)
class Context:
    """Who is calling, from where, and what they may write; read once from the environment."""

    env: Mapping[str, str]
    actor: str
    is_agent: bool
    writes: str
    allow_secrets: bool
    mirror: bool
    project: str
    """``project:<root>`` of the working directory (the directory itself outside git)."""
    in_git: bool
    now: float

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, cwd: str | None = None, now: float | None = None) -> Context:
        """Raises:
        ConfigError: ``KORG_RECALL_WRITES`` or a yes/no variable has a bad value, or the
            working directory is gone.
        """
        writes = writes_mode(env)

        actor = actor_from(env)  # the bridge's per-token name wins over KORG_RECALL_ACTOR
        # An actor named by a bridge token is a caller over the network, whatever its name: only
        # the operator (KORG_RECALL_ACTOR) or a person at a terminal writes as "user" and so skips
        # KORG_RECALL_WRITES=confirm.
        agent_by_token = actor_by_token(env)
        if not actor:
            # A person at a terminal writes as themselves; anything else (the bridge gives its
            # child /dev/null as stdin) is an agent, whose writes `confirm` holds for approval.
            actor = "user" if _stdin_is_terminal() else "agent"
        where = project_dir(env) or cwd
        if not where:
            try:
                where = os.getcwd()
            except OSError as exc:
                raise ConfigError(
                    f"the working directory is gone ({exc.strerror}). Run korg-recall from an existing "
                    f"directory or set {ENV_RECALL_PROJECT}."
                ) from exc
        root = find_git_root(where)
        return cls(
            env=env,
            actor=actor[:128],
            is_agent=actor != "user" or agent_by_token,
            writes=writes,
            allow_secrets=allow_secrets(env),
            mirror=mirror_on(env),
            project="project:" + (root if root is not None else os.path.realpath(where)),
            in_git=root is not None,
            now=time.time() if now is None else now,
        )

    @property
    def default_write_scope(self) -> str:
        """``project`` inside a git repository, else ``user``."""
        return self.project if self.in_git else "user"

    @property
    def visible_scopes(self) -> tuple[str, ...]:
        """What a read sees when no scope is named: ``user`` and the current project."""
        return ("user", self.project)

    def scopes_for(self, scope: str | None) -> tuple[str, ...]:
        """The scopes a read covers: the named one, else :attr:`visible_scopes`.

        Raises:
            UsageError: ``scope`` is not a scope.
        """
        return (parse_scope(scope, self.project),) if scope else self.visible_scopes

    def write_scope(self, scope: str | None) -> str:
        """The scope a write goes to: the named one, else :attr:`default_write_scope`.

        Raises:
            UsageError: ``scope`` is not a scope.
        """
        return parse_scope(scope, self.project) if scope else self.default_write_scope

    def check_writes(self, what: str) -> None:
        """Refuse writes when ``KORG_RECALL_WRITES=off``.

        Raises:
            ConfigError: writes are off.
        """
        if self.writes == "off":
            raise ConfigError(
                f"memory writes are off ({ENV_RECALL_WRITES}=off), so {what} was refused. Unset {ENV_RECALL_WRITES} "
                "or set it to auto or confirm to allow them."
            )

    @property
    def holds_for_approval(self) -> bool:
        """True when this call's writes wait for a person's approval (``confirm`` and an agent)."""
        return self.writes == "confirm" and self.is_agent


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        return False
