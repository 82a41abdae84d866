"""The context a recall hit is judged by: where it happened, and who wrote it.

A hit's text alone does not say whether it matters here: the same command
in another repository, a sub-agent's guess, or a note Claude Code injected
read alike. So every hit carries its project (the git root of the session's
``cwd``, :mod:`korg_bridge.recall.project`), the ``cwd`` when it is not the
project itself, the git branch, the sub-agent id, the sidechain and meta
flags, and whether its file has been deleted since it was indexed.

Text hit lines keep their wire prefix (``  · seq=… score=… agent=… tool=…
ref=e…``) and add this context as ``key=value`` tokens before `` :: ``; a
value holding spaces or quotes is written as a JSON string. ``--json`` gives
every field, null or false when unknown.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from korg_bridge.recall.history.query.hits import Hit

__all__ = ["CONTEXT_KEYS", "context_fields", "context_of", "context_tokens"]

CONTEXT_KEYS = ("cwd", "git_branch", "agent_id", "sidechain", "meta")
"""The parts of an event's stored ``extra`` that say where it happened."""

_TOKENS = (("git_branch", "branch"), ("agent_id", "subagent"), ("sidechain", "sidechain"), ("meta", "meta"))


def context_of(extra: str | None) -> dict[str, Any]:
    """The context keys of an event's stored ``extra`` JSON that say something."""
    if not extra:
        return {}
    values = json.loads(extra)
    return {key: values[key] for key in CONTEXT_KEYS if values.get(key) not in (None, False, "")}


def _token(key: str, value: Any) -> str:
    text = "true" if value is True else str(value)
    if not text or any(ch.isspace() or ch == '"' for ch in text):
        text = json.dumps(text, ensure_ascii=False)
    return f" {key}={text}"


def context_tokens(hit: Hit) -> str:
    """The hit's context as `` key=value`` tokens (only what is known), for a text hit line."""
    context = hit.context
    tokens = [_token("project", hit.project)] if hit.project else []
    if context.get("cwd"):
        tokens.append(_token("cwd", context["cwd"]))
    tokens.extend(_token(name, context[key]) for key, name in _TOKENS if context.get(key))
    if hit.gone:
        tokens.append(_token("gone", True))
    return "".join(tokens)


def context_fields(hit: Hit) -> dict[str, Any]:
    """The hit's context for ``--json``: every field, null or false when unknown."""
    context = hit.context
    return {
        "project": hit.project,
        "cwd": context.get("cwd") or hit.project,  # stored only when it differs from its project
        "git_branch": context.get("git_branch"),
        "subagent": context.get("agent_id"),
        "sidechain": bool(context.get("sidechain")),
        "meta": bool(context.get("meta")),
        "gone": hit.gone,
    }
