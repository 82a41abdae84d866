"""What an event says, as search sees it: a short head and the full text.

Ranking looks at two texts per event:

* the **head** (``events.text``, at most :data:`MAX_TEXT_CHARS`): the
  event's intent, as the ecosystem's recall server indexes it — a prompt or
  reply, or a tool call's name, the arguments that tell what it did (path,
  command, pattern, query, url, description, prompt) and a short preview of
  its result. Snippets and the collapsing of repeated hits read it.
* the **body** (``events.body``, at most :data:`MAX_BODY_CHARS`): what the
  head leaves out — the arguments it does not name, the rest of what it had
  to cut (from the word it cut on) — so the error on line 40 of a test run,
  or a term deep in a compaction summary, is found too. Head and body
  together hold the whole event, each word about once: FTS5 indexes both,
  and most events need no body.

A tool call's result usually arrives after the call is stored, so the texts
are built in two steps: :func:`call_texts` for the call, :func:`with_result`
to add its result; :func:`searchable` does both for a complete event.
What the embedding model reads is :mod:`korg_bridge.recall.semantic.embedtext`'s.
"""

from __future__ import annotations

import json
from typing import Any

from korg_bridge.recall.history.ingest.event import KINDS, Event

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_REPLY_CHARS",
    "MAX_TEXT_CHARS",
    "call_texts",
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

_TELLING = frozenset(TELLING_ARGS)
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


def _beyond(text: str, shown: int) -> str:
    """``text`` from the start of the word cut at ``shown`` characters: what a head showing the
    first ``shown`` of them leaves out, with no word split between the two."""
    start = max(text.rfind(" ", 0, shown + 1), text.rfind("\n", 0, shown + 1))
    return text[start + 1 :] if start > 0 else text


def _head_and_body(full: str, limit: int) -> tuple[str, str]:
    head = _trim(full, limit)
    return head, ("" if head == full else _trim(_beyond(full, limit - 1), MAX_BODY_CHARS))


def _arg_text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return " ".join(value).strip()  # a command as argv (Codex's shell tool)
    return ""


def call_texts(event: Event) -> tuple[str, str]:
    """The head of a tool call without its result, and its body: what the head leaves out.

    The body holds the arguments the head does not name (an edit's old and new
    text, a file's contents) and those it had to cut, so that head and body
    together hold the whole call, each word about once: FTS5 indexes both.
    """
    tool = event.tool or ""
    args = event.args
    parts: list[str] = [tool] if tool else []
    rest: list[str] = []
    if isinstance(args, dict):
        named = len(parts)
        for key in TELLING_ARGS:
            value = args.get(key)
            if value is None:
                continue
            text = value.strip() if isinstance(value, str) else _arg_text(value)
            if not text:
                continue
            if len(text) > MAX_ARG_CHARS:
                parts.append(f"{key}={_trim(text, MAX_ARG_CHARS)}")
                rest.append(f"{key}={text}")
            else:
                parts.append(f"{key}={text}")
        if len(parts) > named:
            for key, value in args.items():
                if key in _TELLING or value is None or isinstance(value, bool | int | float):
                    continue
                text = value.strip() if isinstance(value, str) else _dump(value)
                if text:
                    rest.append(f"{key}={text}")
        elif args:  # nothing telling: the arguments as JSON say most
            dumped = _dump(args)
            parts.append(_trim(dumped, MAX_FALLBACK_ARGS_CHARS))
            if len(dumped) > MAX_FALLBACK_ARGS_CHARS:
                rest.append(dumped)
    elif isinstance(args, str) and args.strip():
        text = args.strip()
        parts.append(_trim(text, MAX_ARG_CHARS))
        if len(text) > MAX_ARG_CHARS:
            rest.append(text)
    whole = " ".join(parts)
    head = _trim(whole, MAX_TEXT_CHARS)
    if head != whole:
        rest.insert(0, whole)
    return head, _trim(" ".join(rest), MAX_BODY_CHARS)


def result_texts(result: Any) -> tuple[str, str]:
    """What a call's head shows of ``result`` (its human part) and all it says (every text field)."""
    preview = result_text(result).strip()
    if not preview:
        return "", ""
    if isinstance(result, dict) and len(result) > 1:
        return preview, _full_result(result).strip() or preview
    return preview, preview


def with_result(head: str, body: str, preview: str, full: str) -> tuple[str, str]:
    """A call's head and body (from :func:`call_texts`) with its result's texts (:func:`result_texts`) added."""
    if not preview:
        return head, body
    shown = _trim(preview, MAX_PREVIEW_CHARS)
    whole = f"{head} → {shown}" if head else f"→ {shown}"
    new_head = _trim(whole, MAX_TEXT_CHARS)
    if new_head != whole:
        rest = full  # the head was full before the result: all of it goes to the body
    elif full == shown:
        return new_head, body
    elif full.startswith(preview) and len(shown) < len(preview):
        rest = _beyond(full, MAX_PREVIEW_CHARS - 1)  # the preview's words are in the head already
    else:
        rest = full
    return new_head, _trim(f"{body} → {rest}" if body else f"→ {rest}", MAX_BODY_CHARS)


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
