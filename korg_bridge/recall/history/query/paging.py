"""Bounded ``show`` answers that can still be read to the end.

A real 86 KB ``Read`` result with two events of context came to 137 KB on the
command line and 278 KB through MCP (the text and ``structuredContent`` repeat
each other), while Claude Code drops MCP output past 25k tokens. So ``show``
cuts at two levels, and every cut names the call that reads on:

* **per string**: a string longer than ``limit`` characters (default
  :data:`DEFAULT_LIMIT`) is shown from character ``offset`` for ``limit``
  characters; shorter strings are always shown whole, so a continuation call
  (same refs, ``offset + limit``) still shows each event's small fields. The
  event's ``truncated`` list names each cut string, its length and the window
  shown.
* **per response**: events are added while the JSON stays under
  :data:`RESPONSE_CHARS`; the rest are left for a next call. The first event
  is always shown, its windows narrowed (down to :data:`MIN_LIMIT`) until it
  fits. An event whose bulk is not in long strings (thousands of short
  values) has its ``args``, ``result`` and ``extra`` shown as their JSON text,
  which is then windowed like any long string (named in ``as_json_text``).

``next`` lists the calls that read the rest, each ``{"ref", "offset",
"limit"}`` (``context`` 0: the refs are named one by one), and ``notice``
says it in a sentence. ``full`` turns every cut off (for a terminal).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MIN_LIMIT", "RESPONSE_CHARS", "bound_events"]

DEFAULT_LIMIT = 8000
"""Characters of one long string per call: a screenful of a file read or a command's output."""
MAX_LIMIT = 40_000
MIN_LIMIT = 1000
"""The narrowest window the first event's strings get to make it fit."""
RESPONSE_CHARS = 40_000
"""The whole answer, in characters of its JSON: through MCP the text and ``structuredContent``
carry it twice, about 20k tokens, under Claude Code's default cap of 25k."""
NOTICE_RESERVE = 2_000
"""Characters kept for ``notice`` and ``next`` (a sentence and up to 50 refs in a few calls)."""
SHORT_STRING = 100
"""Strings cut to this to measure an event's bulk outside long strings."""
BULKY_FIELDS = ("args", "result", "extra")

Cut = dict[str, Any]


def _window(value: Any, where: str, offset: int, limit: int, cuts: list[Cut]) -> Any:
    """``value`` with each string over ``limit`` characters cut to ``[offset, offset + limit)``."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        start, end = min(offset, len(value)), min(offset + limit, len(value))
        cuts.append({"field": where, "length": len(value), "shown": [start, end]})
        return value[start:end]
    if isinstance(value, dict):
        return {
            key: _window(sub, f"{where}.{key}" if where else key, offset, limit, cuts)
            for key, sub in value.items()
        }
    if isinstance(value, list):
        return [_window(sub, f"{where}[{i}]", offset, limit, cuts) for i, sub in enumerate(value)]
    return value


def _size(value: Any) -> int:
    """Characters ``value`` takes in the printed answer (indent 2, nested two levels deeper)."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return len(text) + 4 * text.count("\n")


def _bulky(event: dict[str, Any], budget: int) -> list[str]:
    """The fields to show as JSON text: those of an event too big even with every string short.

    Judged with strings cut to :data:`SHORT_STRING`, so the verdict does not
    depend on ``offset`` or ``limit`` and a continuation call cuts the same way.
    """
    short = _window(event, "", 0, SHORT_STRING, [])
    total = _size(short)
    if total <= budget // 2:
        return []
    sizes = {  # what each field adds, measured where it is printed
        name: total - _size({**short, name: None})
        for name in BULKY_FIELDS
        if isinstance(event.get(name), dict | list)
    }
    chosen: list[str] = []
    for name in sorted(sizes, key=lambda key: -sizes[key]):  # the biggest first, until the rest is small
        if total <= budget // 2:
            break
        chosen.append(name)
        total -= sizes[name]
    return [name for name in BULKY_FIELDS if name in chosen]


def _render(event: dict[str, Any], offset: int, limit: int, budget: int) -> tuple[dict[str, Any], list[Cut]]:
    as_text = _bulky(event, budget)
    source = {**event, **{name: json.dumps(event[name], ensure_ascii=False) for name in as_text}}
    cuts: list[Cut] = []
    shown: dict[str, Any] = _window(source, "", offset, limit, cuts)
    if as_text:
        shown["as_json_text"] = as_text
    if cuts:
        shown["truncated"] = cuts
    return shown, cuts


def bound_events(
    events: Sequence[dict[str, Any]],
    *,
    offset: int = 0,
    limit: int = DEFAULT_LIMIT,
    full: bool = False,
    budget: int = RESPONSE_CHARS,
) -> dict[str, Any]:
    """Return ``{"events": [...]}`` cut to the caps, plus ``next`` and ``notice`` when anything was cut.

    ``events`` are dicts with a ``ref`` (as :meth:`Index.get_events` returns them).
    """
    if full:
        return {"events": list(events)}
    shown: list[dict[str, Any]] = []
    later: list[str] = []
    continue_at: dict[tuple[int, int], list[str]] = {}
    # The notice and the next calls are written once the events are chosen: keep room for them.
    used = _size({"events": [], "redacted": 0, "notice": "", "next": []}) + NOTICE_RESERVE
    for event in events:
        if later:
            later.append(event["ref"])
            continue
        width = limit
        rendered, cuts = _render(event, offset, width, budget)
        size = _size(rendered)
        if shown and used + size > budget:
            later.append(event["ref"])
            continue
        while not shown and used + size > budget and width > MIN_LIMIT:
            width = max(MIN_LIMIT, width // 2)
            rendered, cuts = _render(event, offset, width, budget)
            size = _size(rendered)
        shown.append(rendered)
        used += size
        if any(cut["shown"][1] < cut["length"] for cut in cuts):
            continue_at.setdefault((offset + width, width), []).append(event["ref"])
    out: dict[str, Any] = {"events": shown}
    calls = [{"ref": later, "offset": offset, "limit": limit}] if later else []
    calls += [{"ref": refs, "offset": at, "limit": width} for (at, width), refs in continue_at.items()]
    if calls:
        out["next"] = calls
        out["notice"] = _notice(shown, later, calls, budget)
    return out


def _notice(
    shown: Sequence[dict[str, Any]], later: Sequence[str], calls: Sequence[dict[str, Any]], budget: int
) -> str:
    cut = sum(1 for event in shown if event.get("truncated"))
    parts = []
    if cut:
        parts.append(f"{cut} event(s) shown in part (long strings cut; see each event's truncated)")
    if later:
        parts.append(f"{len(later)} event(s) not shown, to stay under {budget} characters")
    steps = ", then ".join(json.dumps(call, separators=(", ", ": ")) for call in calls)
    return f"{'; '.join(parts)}. To read the rest, call show with {steps}."
