"""What an event says, as search sees it: a short head, the full text, and the text to embed.

Ranking looks at two texts per event:

* the **head** (``events.text``, at most :data:`MAX_TEXT_CHARS`): the
  event's intent, as the ecosystem's recall server indexes it — a prompt or
  reply, or a tool call's name, the arguments that tell what it did (path,
  command, pattern, query, url, description, prompt) and a short preview of
  its result. Snippets and the collapsing of repeated hits read it.
* the **body** (``events.body``, at most :data:`MAX_BODY_CHARS`): the whole
  event — every argument and the full result — stored only when the head had
  to leave something out, so the error on line 40 of a test run, or a term
  deep in a compaction summary, is found too.

A tool call's result usually arrives after the call is stored, so the texts
are built in two steps: :func:`call_texts` for the call, :func:`with_result`
to add its result; :func:`searchable` does both for a complete event.
:func:`embed_text` stays short: an embedding model reads a few hundred words.
"""

from __future__ import annotations

import json
from typing import Any

from korg_bridge.recall.event import KINDS, Event

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_REPLY_CHARS",
    "MAX_TEXT_CHARS",
    "call_texts",
    "embed_text",
    "flatten",
    "result_text",
    "result_texts",
    "searchable",
    "with_result",
]

MAX_REPLY_CHARS = 2000
"""A prompt or reply in the head: long enough for its substance, short enough to keep BM25 lengths sane."""
MAX_ARG_CHARS = 500
"""One telling argument in the head (a command, a path, a sub-agent prompt)."""
MAX_PREVIEW_CHARS = 300
"""A result preview in the head: enough for "TODO: rate limiter" in a Read to rank."""
MAX_FALLBACK_ARGS_CHARS = 300
"""Arguments dumped as JSON in the head when none of the telling ones is present."""
MAX_TEXT_CHARS = 4000
"""The whole head."""
MAX_BODY_CHARS = 64 * 1024
"""The full text of one event: a long test log or summary, not a whole file dump."""

TELLING_ARGS = ("file_path", "path", "command", "cmd", "pattern", "query", "url", "description", "prompt")
"""Arguments that say what a tool call was about; the rest (offsets, flags) is noise in the head."""

PROSE = frozenset(KINDS) - {"llm_inference"}
"""Kinds whose text is their ``args`` (a prompt, a note, a title); a reply's is its result."""

_RESULT_KEYS = ("output", "text", "content", "stdout", "stderr", "error", "message")
_PROSE_KEYS = ("prompt", "text", "title", "content", "message")


def _trim(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # circular structures cannot come from JSON, but be total
        return str(value)


def _join(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def result_text(result: Any) -> str:
    """Return the human part of a result: its text or output, else "".

    Results come as a string, a ``{"output": …}`` / ``{"text": …}`` object, or
    a list of content blocks (``[{"type": "text", "text": …}]``).
    """
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        parts = [result_text(item) for item in result]
        return "\n".join(part for part in parts if part)
    if isinstance(result, dict):
        if result.get("type") == "text" and isinstance(result.get("text"), str):
            return str(result["text"])
        for key in _RESULT_KEYS:
            value = result.get(key)
            if isinstance(value, str) and value.strip():
                return value
            if isinstance(value, list) and value:
                return result_text(value)
        return ""
    return str(result)


def _full_result(result: Any) -> str:
    """Everything a result says in words: every text field (stdout *and* stderr), in a fixed order."""
    if isinstance(result, dict) and not (
        result.get("type") == "text" and isinstance(result.get("text"), str)
    ):
        parts = [result_text(result[key]) for key in _RESULT_KEYS if result.get(key)]
        return "\n".join(part for part in parts if part.strip())
    return result_text(result)


def _prose(args: Any) -> str:
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        for key in _PROSE_KEYS:
            value = args.get(key)
            if isinstance(value, str):
                return value
    return ""


def _head_and_body(full: str, limit: int) -> tuple[str, str]:
    head = _trim(full, limit)
    return head, ("" if head == full else _trim(full, MAX_BODY_CHARS))


def _arg_text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return " ".join(value).strip()  # a command as argv (Codex's shell tool)
    return ""


def call_texts(event: Event) -> tuple[str, str]:
    """The head and body of a tool call without its result (body "" when the head says it all)."""
    tool = event.tool or ""
    args = event.args
    head: list[str] = [tool] if tool else []
    full: list[str] = list(head)
    if isinstance(args, dict):
        named = len(head)
        for key in TELLING_ARGS:
            value = _arg_text(args.get(key))
            if value:
                head.append(f"{key}={_trim(value, MAX_ARG_CHARS)}")
                full.append(f"{key}={value}")
        told = len(head) > named
        for key, value in args.items():
            if key in TELLING_ARGS or value is None or isinstance(value, bool | int | float):
                continue
            text = value.strip() if isinstance(value, str) else _dump(value)
            if text:
                full.append(f"{key}={text}")
        if not told and args:
            head.append(_trim(_dump(args), MAX_FALLBACK_ARGS_CHARS))
    elif isinstance(args, str) and args.strip():
        head.append(_trim(args.strip(), MAX_ARG_CHARS))
        full.append(args.strip())
    head_text = _trim(" ".join(head), MAX_TEXT_CHARS)
    full_text = " ".join(full)
    return head_text, ("" if full_text == head_text else _trim(full_text, MAX_BODY_CHARS))


def result_texts(result: Any) -> tuple[str, str]:
    """What a call's head shows of ``result`` (its human part) and what its body holds (every text field)."""
    preview = result_text(result).strip()
    if not preview:
        return "", ""
    return preview, _full_result(result).strip() or preview


def with_result(head: str, body: str, preview: str, full: str) -> tuple[str, str]:
    """A call's head and body (from :func:`call_texts`) with its result's texts (:func:`result_texts`) added."""
    if not preview:
        return head, body
    new_head = _trim(_join(head, f"→ {_trim(preview, MAX_PREVIEW_CHARS)}"), MAX_TEXT_CHARS)
    whole = _join(body or head, f"→ {full}")
    return new_head, ("" if whole == new_head else _trim(whole, MAX_BODY_CHARS))


def searchable(event: Event) -> tuple[str, str]:
    """The head and body of ``event`` (("", "") when it says nothing)."""
    tool = event.tool or ""
    if tool in PROSE:
        return _head_and_body(_prose(event.args).strip(), MAX_REPLY_CHARS)
    if tool == "llm_inference":
        return _head_and_body(result_text(event.result).strip(), MAX_REPLY_CHARS)
    head, body = call_texts(event)
    return with_result(head, body, *result_texts(event.result))


def flatten(event: Event) -> str:
    """The head of ``event``: what snippets show and what ranking weighs first."""
    return searchable(event)[0]


def embed_text(event: Event) -> str:
    """Return the text to embed for ``event``: the head's content, read as prose.

    BM25 wants field names (``command=`` lets a query find "command"); an
    embedding model reads ``Bash command=npx jest -u description=Update
    snapshots`` worse than ``Update snapshots. npx jest -u``. Measured on the
    golden set with all-MiniLM-L6-v2: reworded queries find their event first
    64 % of the time instead of 55 %. So a tool call is its description as a
    sentence, then the values of its telling arguments, then the result preview;
    prompts, notes and replies are already prose.
    """
    tool = event.tool or ""
    if tool in PROSE or tool == "llm_inference":
        return flatten(event)
    args = event.args
    parts: list[str] = []
    if isinstance(args, dict):
        description = args.get("description")
        if isinstance(description, str) and description.strip():
            parts.append(_trim(description.strip().rstrip("."), MAX_ARG_CHARS) + ".")
        for key in TELLING_ARGS:
            value = _arg_text(args.get(key))
            if key != "description" and value:
                parts.append(_trim(value, MAX_ARG_CHARS))
    elif isinstance(args, str) and args.strip():
        parts.append(_trim(args.strip(), MAX_ARG_CHARS))
    if not parts:  # nothing telling: the head (tool name, dumped arguments) says most
        return flatten(event)
    preview = result_text(event.result).strip()
    if preview:
        parts.append(f"→ {_trim(preview, MAX_PREVIEW_CHARS)}")
    return _trim(" ".join(parts), MAX_TEXT_CHARS)
