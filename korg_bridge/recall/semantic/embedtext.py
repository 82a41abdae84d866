"""What the embedding model reads of an event: prose in windows, a tool call as its gist.

The model's cost is its tokens (about 0.3 ms of CPU each here, see
:mod:`korg_bridge.recall.semantic.windows`), and what it is good at is meaning, so it
reads what carries meaning and nothing else. BM25 still sees every word of
head and body (:mod:`korg_bridge.recall.history.ingest.text`).

* **Prose** (a prompt, a reply, a summary, a sub-agent's task) is read
  whole, in up to :data:`PROSE_WINDOWS` windows of 128 tokens: a search keeps
  each event's best window, so the answer in a reply's fourth paragraph is
  found. Text the client injected (notes, AGENTS.md, command output) gets one
  window: it repeats across sessions and is rarely what a query means.
* **A tool call** is what it was for and what came of it, in one window: its
  description as a sentence, its telling arguments (command, pattern, query,
  url, path, a sub-agent's prompt, the first line of an edit), then its
  result's first line and up to :data:`ERROR_LINES` lines that look like an
  error, from anywhere in the result (the failing test on line 40 of a test
  log). Never a file's contents or a whole log: measured on the bench's
  mixed history, tool calls went from 60 to about 25 tokens, on real Claude
  Code transcripts from ~110 to ~45, without losing golden-set targets.
* **Fewer tokens that say nothing**: a home folder prefix in a path
  (``/home/dev/``), runs of one punctuation character (``=====`` is one token
  per ``=``), line-number gutters (``    12→``) and a result's restatement of
  the path it acted on are dropped.

Identical gists (the same ``git status`` a thousand times) are embedded once
per pass, by content hash, in :mod:`korg_bridge.recall.semantic.embedpass`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from korg_bridge.recall.history.ingest.event import KINDS, Event
from korg_bridge.recall.history.ingest.text import result_text

__all__ = ["ERROR_LINES", "PROSE_WINDOWS", "embed_text", "embed_windows"]

PROSE_WINDOWS = 8
"""Windows of a long prompt or reply (about 2,000 characters of English): its substance, at a cost
bounded to four times a short one."""
ERROR_LINES = 2
"""Lines that look like an error, taken from anywhere in a result."""
MAX_ARG_CHARS = 240
"""One argument's value (a command, a pattern, a sub-agent prompt)."""
MAX_LINE_CHARS = 160
"""One result line."""
SCAN_CHARS = 65536
"""How far into a result error lines are looked for: a long test log, not a whole dump."""

PROSE_KINDS = frozenset({"user_prompt", "llm_inference", "compact_summary", "subagent_prompt"})
"""Kinds read whole, in windows; the other kinds are injected text: one window."""
ARG_ORDER = ("command", "cmd", "pattern", "query", "url", "prompt", "file_path", "path")
"""Arguments that say what a call did, in the order they are read (description goes first)."""
PATH_ARGS = frozenset({"file_path", "path"})
EDIT_ARGS = ("new_string", "content", "patch")
"""Arguments whose first line says what an edit or a write changed."""

_PROSE_KEYS = ("prompt", "text", "title", "content", "message")
_HOME = re.compile(r"(?:/home/|/Users/)[^/\s]+/|/root/")
_PUNCT_RUN = re.compile(r"([^\w\s])\1{2,}")
_GUTTER = re.compile(r"^\s*\d+(?:\t|→)")
_SPACES = re.compile(r"[ \t]+")
_ERROR = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fatal|panic|denied|refused|cannot|"
    r"can't|unable|invalid|not found|no such|timed out|timeout|segmentation fault|undefined)\b",
    re.IGNORECASE,
)


def _tidy(text: str) -> str:
    """One line of text with the token-wasting parts dropped (see the module docstring)."""
    text = _HOME.sub("", text)
    text = _PUNCT_RUN.sub(r"\1", text)
    return _SPACES.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _value(value: Any) -> str:
    """An argument's value as text: a string, or an argv list (Codex's shell tool)."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return " ".join(value).strip()
    return ""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = _GUTTER.sub("", line).strip()
        if line:
            return line
    return ""


def _strings(value: Any, out: list[str], budget: int = 40) -> None:
    """The string leaves of ``value`` (a TodoWrite's items), without keys, at most ``budget``."""
    if len(out) >= budget:
        return
    if isinstance(value, str):
        if value.strip():
            out.append(value.strip())
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out, budget)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out, budget)


def _result_gist(result: Any, said: list[str]) -> str:
    """A result's first line and its first error lines, without restating ``said`` (its paths)."""
    text = result_text(result)
    if not text.strip():
        return ""
    lines: list[str] = []
    first = _first_line(text[:SCAN_CHARS])
    if first:
        lines.append(first)
    for line in text[:SCAN_CHARS].splitlines():
        if len(lines) > ERROR_LINES:
            break
        line = _GUTTER.sub("", line).strip()
        if line and line not in lines and _ERROR.search(line[: MAX_LINE_CHARS * 2]):
            lines.append(line)
    gist = []
    for line in lines:
        for path in said:
            line = line.replace(path, "")
        gist.append(_cut(_tidy(line), MAX_LINE_CHARS))
    return " ".join(part for part in gist if part)


def _call_gist(event: Event) -> str:
    args = event.args
    parts: list[str] = []
    paths: list[str] = []
    if isinstance(args, dict):
        description = args.get("description")
        if isinstance(description, str) and description.strip():
            parts.append(_cut(_tidy(description).rstrip("."), MAX_ARG_CHARS) + ".")
        for key in ARG_ORDER:
            value = _value(args.get(key))
            if not value:
                continue
            if key in PATH_ARGS:
                paths.append(value)
            parts.append(_cut(_tidy(value), MAX_ARG_CHARS))
        for key in EDIT_ARGS:
            changed = _first_line(_value(args.get(key)))
            if changed:
                parts.append(_cut(_tidy(changed), MAX_LINE_CHARS))
                break
        if not parts:  # nothing telling: the string values say most (a TodoWrite's items)
            leaves: list[str] = []
            _strings(args, leaves)
            parts.append(_cut(_tidy("; ".join(leaves)), MAX_ARG_CHARS * 2))
    elif isinstance(args, str) and args.strip():
        parts.append(_cut(_tidy(args), MAX_ARG_CHARS))
    elif args is not None:
        parts.append(_cut(_tidy(json.dumps(args, ensure_ascii=False, default=str)), MAX_ARG_CHARS))
    tool = event.tool or ""
    if not any(parts) and tool:
        parts.append(tool)
    gist = _result_gist(event.result, paths)
    if gist:
        parts.append(f"→ {gist}")
    return " ".join(part for part in parts if part)


def _prose(event: Event) -> str:
    if event.tool == "llm_inference":
        return result_text(event.result).strip()
    args = event.args
    if isinstance(args, str):
        return args.strip()
    if isinstance(args, dict):
        for key in _PROSE_KEYS:
            value = args.get(key)
            if isinstance(value, str):
                return value.strip()
    return ""


def embed_text(event: Event) -> str:
    """The text the model reads for ``event``: its prose, or a tool call's gist ("" when it says nothing)."""
    if event.tool in KINDS or event.tool == "llm_inference":
        return _PUNCT_RUN.sub(r"\1", _prose(event))
    return _call_gist(event)


def embed_windows(tool: str | None) -> int:
    """How many windows an event of this kind (or tool) is read in at most."""
    return PROSE_WINDOWS if tool in PROSE_KINDS else 1
