"""Claude Code transcripts (``~/.claude/projects/**.jsonl``) and ``--output-format stream-json``.

Both share one line format: ``type`` user/assistant (and bookkeeping kinds
that hold no event: ``system``, ``attachment``, ``progress`` …) with a
``message`` whose content is a string or a list of blocks.

Honest labels. Of the text a ``user`` line carries, much is written by
Claude Code, not typed: compaction summaries (``isCompactSummary``),
slash-command wrappers, local command output, bash-mode echoes, IDE context,
interrupt markers, task notifications, system reminders, ``isMeta`` notes,
and a sub-agent's task prompt (written by its parent agent). Each *text
block* is classified on its own (one message can hold an IDE-context block
and a typed one); only what is left is a ``user_prompt``. ``summary`` lines
are session titles.

Decisions:

* ``agent`` is ``claude-code#<first 8 chars of the session id>``; a line
  without a session id (a 2.1 sub-agent file's first line) takes it from the
  file's place (``<session>/subagents/agent-<id>.jsonl``) or stem.
* ``seq`` is the 1-based line number, shared by all events of one line, with
  ``extra["part"]`` (0-based) keeping them apart. Prompts and assistant text
  carry ``success=None``: nothing ran that could fail.
* context for judging a hit: ``cwd`` (remembered from earlier lines when one
  has none, as stream-json's messages do), ``extra`` ``git_branch``,
  ``agent_id``, ``sidechain``, ``parent_tool_use_id``, ``meta``.
* a ``tool_result`` becomes a :class:`~korg_bridge.recall.history.ingest.event.ToolResult`
  whose ``result`` is ``{"output": <text>}`` (the envelope's convention).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import PurePath
from typing import Any

from korg_bridge.recall.history.ingest.event import Event, ToolResult
from korg_bridge.recall.history.ingest.shapes.common import (
    MAP,
    State,
    Where,
    blocks_text,
    normalize_timestamp,
    record_session,
    stem,
)

__all__ = ["NAMES", "classify_user_text", "detect", "parse"]

NAMES: tuple[str, ...] = ("claude-code",)

_TAG_KINDS: tuple[tuple[str, str], ...] = (
    ("<command-name>", "command"),
    ("<command-message>", "command"),
    ("<command-args>", "command"),
    ("<local-command-", "command_output"),
    ("<bash-input>", "shell"),
    ("<bash-stdout>", "shell"),
    ("<bash-stderr>", "shell"),
    ("<ide_", "ide_context"),
    ("[Request interrupted", "interrupt"),
    ("<task-notification>", "task_notification"),
    ("<system-reminder>", "system_note"),
    ("<user-prompt-submit-hook>", "system_note"),
)
"""How Claude Code's own text begins, and its kind. A prefix test on the block's text: these
wrappers always open the block (they are what the client wrote into it)."""


def detect(obj: Mapping[str, Any]) -> str | None:
    """``claude-code`` for a transcript or stream-json line (even one holding no event), else None."""
    kind = obj.get("type")
    if not isinstance(kind, str):
        return None
    if "message" in obj or "sessionId" in obj or "session_id" in obj:
        return "claude-code"
    if kind == "summary" and "leafUuid" in obj:
        return "claude-code"
    return None


def classify_user_text(text: str, line: Mapping[str, Any], sidechain: bool) -> str:
    """The kind of one text block of a ``user`` line: who wrote it (see :data:`~korg_bridge.recall.history.ingest.event.KINDS`)."""
    if line.get("isCompactSummary") is True:
        return "compact_summary"
    start = text.lstrip()[:32]
    if start[:1] in ("<", "["):
        for prefix, kind in _TAG_KINDS:
            if start.startswith(prefix):
                return kind
    if line.get("isMeta") is True:
        return "system_note"
    if sidechain:
        return "subagent_prompt"
    return "user_prompt"


@lru_cache(maxsize=256)
def _file_session(source: str) -> str:
    """The session a file belongs to when its lines do not say: ``<session>/subagents/agent-x.jsonl``
    belongs to ``<session>``; any other file is its own."""
    path = PurePath(source)
    if path.parent.name == "subagents" and path.parent.parent.name:
        return path.parent.parent.name
    return stem(source)


def parse(obj: Mapping[str, Any], shape: str, where: Where, state: State) -> list[Event | ToolResult]:
    """The events and tool results of one line (none for bookkeeping lines)."""
    kind = obj.get("type")
    cwd = _remember_cwd(obj, state)
    if kind == "summary":
        return _title(obj, where)
    message = obj.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, MAP):
        return []
    session = record_session(obj) or _file_session(where.source)
    timestamp = normalize_timestamp(obj.get("timestamp"))
    base, sidechain = _context(obj)
    content = message.get("content")
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else []
    if isinstance(content, list):
        blocks = content

    out: list[Event | ToolResult] = []
    parts = 0
    agent = f"claude-code#{session[:8]}"

    def emit(tool: str, args: Any, result: Any = None, **more: Any) -> None:
        nonlocal parts
        out.append(
            Event(
                source=where.source,
                offset=where.offset,
                seq=where.line_no,
                shape="claude-code",
                session=session,
                agent=agent,
                tool=tool,
                args=args,
                result=result,
                timestamp=timestamp,
                extra={**base, **more, "part": parts},
                cwd=cwd,
            )
        )
        parts += 1

    model = message.get("model")
    for block in blocks:
        if not isinstance(block, MAP):
            continue
        btype = block.get("type")
        text = block.get("text")
        if btype == "text" and isinstance(text, str) and text.strip():
            if kind == "user":
                emit(classify_user_text(text, obj, sidechain), {"prompt": text})
            else:
                emit("llm_inference", {"model": model} if isinstance(model, str) else {}, {"text": text})
        elif btype == "tool_use" and kind == "assistant" and isinstance(block.get("name"), str):
            tool_use_id = block.get("id")
            more = {"tool_use_id": tool_use_id} if isinstance(tool_use_id, str) else {}
            emit(block["name"], block.get("input"), **more)
        elif btype == "tool_result" and isinstance(block.get("tool_use_id"), str):
            out.append(
                ToolResult(
                    tool_use_id=block["tool_use_id"],
                    result={"output": blocks_text(block.get("content"))},
                    success=block.get("is_error") is not True,
                    timestamp=timestamp,
                )
            )
    return out


def _remember_cwd(obj: Mapping[str, Any], state: State) -> Any:
    """The line's ``cwd``, or the last one seen in the file (stream-json messages carry none)."""
    cwd = obj.get("cwd")
    if isinstance(cwd, str) and cwd:
        if state.get("cwd") != cwd:
            state["cwd"] = cwd
        return cwd
    return state.get("cwd")


def _context(obj: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The ``extra`` every event of the line shares (what a hit is judged by), and whether the
    line is a sub-agent's (its prompt was written by the parent agent)."""
    base: dict[str, Any] = {}
    parent = obj.get("parent_tool_use_id")
    sidechain = obj.get("isSidechain") is True or isinstance(parent, str)
    if sidechain:
        base["sidechain"] = True
        if isinstance(parent, str):
            base["parent_tool_use_id"] = parent
    if obj.get("isMeta") is True:
        base["meta"] = True
    agent_id = obj.get("agentId")
    if isinstance(agent_id, str) and agent_id:
        base["agent_id"] = agent_id
    branch = obj.get("gitBranch")
    if isinstance(branch, str) and branch:
        base["git_branch"] = branch
    return base, sidechain


def _title(obj: Mapping[str, Any], where: Where) -> list[Event | ToolResult]:
    """A ``summary`` line: the title Claude Code gave the conversation ending at ``leafUuid``."""
    title = obj.get("summary")
    if not isinstance(title, str) or not title.strip():
        return []
    session = _file_session(where.source)
    leaf = obj.get("leafUuid")
    return [
        Event(
            source=where.source,
            offset=where.offset,
            seq=where.line_no,
            shape="claude-code",
            session=session,
            agent=f"claude-code#{session[:8]}",
            tool="session_title",
            args={"title": title},
            extra={"leaf_uuid": leaf, "part": 0} if isinstance(leaf, str) else {"part": 0},
        )
    ]
