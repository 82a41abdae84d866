"""Codex CLI rollouts (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``. What becomes an event:

* ``event_msg`` ``user_message`` — what the user typed: ``user_prompt``;
* ``response_item`` ``message`` of role ``assistant`` — the reply:
  ``llm_inference``;
* ``response_item`` ``function_call`` / ``custom_tool_call`` /
  ``local_shell_call`` — a tool call (its ``arguments`` JSON string parsed),
  joined by ``call_id`` with its ``…_output`` line, which becomes a
  :class:`~korg_bridge.recall.history.ingest.event.ToolResult`;
* ``response_item`` ``web_search_call`` — a ``web_search`` event;
* ``compacted`` — a ``compact_summary``.

Rollouts say things twice, and Codex says things the user did not: an
``event_msg`` ``agent_message`` repeats an assistant message, and a
``response_item`` user message repeats a ``user_message`` — both are skipped.
User-role messages Codex injects itself (AGENTS.md, ``<environment_context>``,
``<user_instructions>``) are ``system_note``; developer messages (Codex's own
instructions), encrypted ``reasoning`` and bookkeeping (``token_count``,
``exec_command_end`` …) hold no event.

``session_meta`` (the session id, ``cwd``, git branch) and ``turn_context``
(``cwd``, model) name their context once; the parser keeps it in the file's
:data:`~korg_bridge.recall.history.ingest.shapes.common.State` for the lines after them.
``agent`` is ``codex#<first 8 chars of the session id>``; ``seq`` is the line
number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from korg_bridge.recall.history.ingest.event import Event, ToolResult
from korg_bridge.recall.history.ingest.shapes.common import (
    MAP,
    State,
    Where,
    blocks_text,
    is_int,
    normalize_timestamp,
    stem,
    text_of,
)

__all__ = ["NAMES", "detect", "parse"]

NAMES: tuple[str, ...] = ("codex",)

_LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
_INJECTED = ("<", "# AGENTS.md")
"""How user-role text Codex writes itself begins (``<environment_context>``, ``<user_instructions>``,
``# AGENTS.md instructions for …``); a typed prompt arrives as an ``event_msg`` instead."""
_EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
_ROLLOUT_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


def detect(obj: Mapping[str, Any]) -> str | None:
    """``codex`` for a rollout line (``type`` one of Codex's with an object ``payload``), else None."""
    if obj.get("type") in _LINE_TYPES and isinstance(obj.get("payload"), MAP):
        return "codex"
    return None


@lru_cache(maxsize=256)
def _file_session(source: str) -> str:
    """The session id in ``rollout-<date>-<uuid>.jsonl``, for lines read before ``session_meta``."""
    name = stem(source)
    match = _ROLLOUT_ID.search(name)
    return match.group(1) if match else name


def parse(obj: Mapping[str, Any], shape: str, where: Where, state: State) -> list[Event | ToolResult]:
    """The events and tool results of one rollout line (see the module docstring)."""
    kind = obj["type"]
    payload: Mapping[str, Any] = obj["payload"]
    if kind in ("session_meta", "turn_context"):
        _remember_context(kind, payload, state)
        return []
    timestamp = normalize_timestamp(obj.get("timestamp"))

    def event(tool: str, args: Any, result: Any = None, success: bool | None = None, **extra: Any) -> Event:
        session = state.get("session") or _file_session(where.source)
        branch = state.get("git_branch")
        if branch:
            extra["git_branch"] = branch
        return Event(
            source=where.source,
            offset=where.offset,
            seq=where.line_no,
            shape="codex",
            session=session,
            agent=f"codex#{session[:8]}",
            tool=tool,
            args=args,
            result=result,
            success=success,
            timestamp=timestamp,
            extra=extra,
            cwd=state.get("cwd"),
        )

    if kind == "compacted":
        summary = text_of(payload.get("message"))
        return [event("compact_summary", {"prompt": summary})] if summary else []
    if kind == "event_msg":
        typed = text_of(payload.get("message")) if payload.get("type") == "user_message" else None
        return [event("user_prompt", {"prompt": typed})] if typed else []
    return _response_item(payload, state, event, timestamp)


_Emit = Callable[..., Event]
"""Builds one event of the line being parsed (its session, agent, cwd and branch from the state)."""


def _remember_context(kind: str, payload: Mapping[str, Any], state: State) -> None:
    """What later lines of the rollout inherit: session, cwd and branch (``session_meta``), cwd and model
    (``turn_context``)."""
    if kind == "turn_context":
        _remember(state, "cwd", payload.get("cwd"))
        _remember(state, "model", payload.get("model"))
        return
    _remember(state, "session", payload.get("id"))
    _remember(state, "cwd", payload.get("cwd"))
    git = payload.get("git")
    if isinstance(git, MAP):
        _remember(state, "git_branch", git.get("branch"))


def _response_item(
    payload: Mapping[str, Any], state: State, event: _Emit, timestamp: str | None
) -> list[Event | ToolResult]:
    """A ``response_item`` line: a message, a tool call, its output, or a web search."""
    ptype = payload.get("type")
    if ptype == "message":
        return _message(payload, state, event)
    if ptype in _CALLS:
        name = payload.get("name") if ptype != "local_shell_call" else "local_shell"
        call_id = payload.get("call_id")
        if not isinstance(name, str) or not isinstance(call_id, str):
            return []
        return [event(name, _call_args(payload), tool_use_id=call_id)]
    if ptype in _OUTPUTS:
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            return []
        output, success = _output(payload.get("output"))
        return [
            ToolResult(tool_use_id=call_id, result={"output": output}, success=success, timestamp=timestamp)
        ]
    if ptype == "web_search_call":
        action = payload.get("action")
        status = payload.get("status")
        return [
            event(
                "web_search",
                dict(action) if isinstance(action, MAP) else {},
                success=None if not isinstance(status, str) else status == "completed",
            )
        ]
    return []


def _message(payload: Mapping[str, Any], state: State, event: _Emit) -> list[Event | ToolResult]:
    """The assistant's text, or text Codex injected into the user role; nothing for a typed prompt's echo."""
    role = payload.get("role")
    text = blocks_text(payload.get("content")).strip()
    if not text:
        return []
    if role == "assistant":
        model = state.get("model")
        return [event("llm_inference", {"model": model} if model else {}, {"text": text})]
    if role == "user" and text.startswith(_INJECTED):
        return [event("system_note", {"prompt": text})]
    return []  # a typed prompt's echo (its event_msg is indexed) or Codex's own instructions


def _remember(state: State, key: str, value: Any) -> None:
    if isinstance(value, str) and value and state.get(key) != value:
        state[key] = value


def _call_args(payload: Mapping[str, Any]) -> Any:
    """A call's arguments: ``arguments`` is a JSON string (an object, as a rule), ``input`` raw text."""
    if payload.get("type") == "local_shell_call":
        action = payload.get("action")
        command = action.get("command") if isinstance(action, MAP) else None
        if isinstance(command, list):
            return {"command": " ".join(str(part) for part in command)}
        return dict(action) if isinstance(action, MAP) else {}
    raw = payload.get("arguments")
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"arguments": raw}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    if "input" in payload:
        return {"input": payload.get("input")}
    return raw


def _output(raw: Any) -> tuple[str, bool | None]:
    """An output's text and whether the call succeeded (from its exit code, when it says one).

    Outputs come as plain text (``exec_command``: "… Process exited with code 0 …"), as a JSON
    string ``{"output", "metadata": {"exit_code"}}`` (``apply_patch``, older shells), or as
    content blocks.
    """
    code: Any = None
    text: str
    if isinstance(raw, str) and raw.startswith("{"):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
            metadata = parsed.get("metadata")
            code = metadata.get("exit_code") if isinstance(metadata, dict) else None
            raw = parsed["output"]
    text = blocks_text(raw)
    if code is None:
        match = _EXIT_CODE.search(text[:4096])
        code = int(match.group(1)) if match else None
    return text, (code == 0) if is_int(code) else None
