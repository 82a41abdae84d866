"""The one redactor: secrets become ``[redacted]`` before text leaves the process.

The bridge's audit log (arguments, output preview, refusal reasons) and
korg-recall (snippets, ``show``) pass everything through it; the memory store
will call it on writes. The API is small on purpose:

- :func:`redact` - text in, ``(text, count)`` out;
- :func:`redact_value` - the same over a JSON value, where a property named
  like a secret (:func:`is_secret_name`) loses its whole value;
- :func:`redact_arguments` - MCP arguments as a ledger may keep them;
- :data:`REDACTED`, the replacement.

What is a secret (``tests/data/secrets.json`` is the corpus, with the
look-alikes that must survive):

1. Formats that are secrets by construction: vendor keys by their prefixes,
   JWTs, AWS key ids, private key blocks (PEM, OpenSSH, PGP; also cut
   mid-block), ``Bearer``/``Basic`` credentials, webhook URLs.
2. Values by their name: ``NAME=value``, ``"NAME": "value"``, ``NAME: "value"``,
   ``NAME: value`` at the start of a line (YAML, headers), ``--NAME value``,
   ``-H "NAME: value"``, where NAME is secret-like (``DB_PASSWORD``,
   ``SECRET_KEY_BASE``, ``X-Api-Key``; see :func:`is_secret_name`).
3. Credentials in URLs and commands: ``scheme://user:pass@host`` (the
   password runs to the last ``@`` before the host), ``curl -u user:pass``,
   ``mysql -psecret``, ``sshpass -p``, ``redis-cli -a``, ``.netrc``.

A value that is a reference and not a secret stays: ``$VAR``, ``${VAR}``,
``<your-token>``, ``***``, ``[redacted]``, ``YOUR_TOKEN``, empty, a boolean,
code such as ``getpass()`` or ``settings.API_KEY``. Hashes, UUIDs, commit ids
and base64 data have no rule that matches them.

**Linear time.** Python's ``re`` backtracks and holds the GIL, so one slow
pattern freezes the whole bridge. Every pattern here starts at a literal or
at a token boundary (a lookbehind that fails inside a run), uses possessive or
bounded repetition, and never puts two quantifiers over overlapping classes
side by side; values are matched inside a lookahead, so a rejected candidate
consumes only its name, and each character is read a bounded number of times.
``bench/redact_bench.py`` times 1 MB of each adversarial family.

**Counting.** Each rule reports the span of the secret; overlapping spans are
one secret, so a vendor key inside a ``*_TOKEN=`` line counts once. A secret is
counted once however often it occurs: the same key in a command and in its
output, or in an event's text and its raw record, is one secret. A caller that
redacts several texts of one answer passes them one ``seen`` set, so the count
is of distinct secrets over the whole answer. The result is a fixed point:
redacting redacted text changes nothing and counts 0.

``-p`` is a password only attached to a MySQL client (``mysql -psecret``); after
``docker run``, ``ssh`` or ``mkdir`` it is a port or a flag.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping
from typing import Any

from korg_bridge.redact.names import is_secret_name
from korg_bridge.redact.rules import RULES
from korg_bridge.redact.values import Span, is_reference, is_session_number

__all__ = ["REDACTED", "is_secret_name", "redact", "redact_arguments", "redact_value"]

REDACTED = "[redacted]"

_TOKEN = re.compile(re.escape(REDACTED))
_NEEDLES = tuple(dict.fromkeys(needle for rule in RULES for needle in rule.needles))
"""Every rule's needles, each once."""
_NEEDLELESS = any(not rule.needles for rule in RULES)
"""Whether a rule runs on every text (none does today)."""
_MAX_ROUNDS = 4
"""Rounds of :func:`redact`; the second finds something only where one replacement made
another secret visible, and a third has never been needed (the cap bounds the time)."""
_WINDOW_GAP = 4096
"""Characters between two changed lines below which one window covers both."""
_MAX_DEPTH = 200
"""JSON nesting walked by :func:`redact_value`; anything deeper is replaced whole
(it cannot leak what is not written, and recursion stays far from Python's limit)."""


def _spans(text: str, windows: list[Span] | None = None) -> list[Span]:
    """Every rule's secret spans in ``text`` (or in its ``windows``), overlapping ones merged.

    Overlapping spans are one secret. A window is searched with ``pos``/``endpos``,
    so lookbehinds still see the text before it.
    """
    found: list[Span] = []
    for pos, endpos in windows if windows is not None else [(0, len(text))]:
        chunk = text if windows is None else text[pos:endpos]
        # Which needles the chunk holds, each looked for once (rules share them): most texts hold
        # none of most rules' needles, and a rule's own look was most of a short text's time.
        present = {needle for needle in _NEEDLES if needle in chunk}
        if not present and not _NEEDLELESS:
            continue
        for rule in RULES:
            if rule.needles and present.isdisjoint(rule.needles):
                continue
            check = rule.check
            for match in rule.pattern.finditer(text, pos, endpos):
                span = check(text, match) if check is not None else match.span()
                if span is not None and span[1] > span[0]:
                    found.append(span)
    found.sort()
    merged: list[Span] = []
    for start, end in found:
        if merged and start < merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _lines_around(text: str, spots: list[int]) -> list[Span]:
    """The lines holding ``spots`` (sorted), as disjoint windows.

    Every rule but the private key block reads within one line, and a key block
    never survives a round, so a replacement can change what a rule sees only
    on its own line. Lines less than :data:`_WINDOW_GAP` apart share a window:
    a window costs every rule a call, so a secret on every line is one window.
    """
    windows: list[Span] = []
    for spot in spots:
        if windows and spot < windows[-1][1]:
            continue
        start = text.rfind("\n", 0, spot) + 1
        end = text.find("\n", spot)
        end = len(text) if end < 0 else end
        if windows and start - windows[-1][1] <= _WINDOW_GAP:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows


def _snapped(text: str, spans: list[Span]) -> list[Span]:
    """``spans`` widened to whole ``[redacted]`` tokens, without those that would hide nothing new.

    A span that cuts a token in two would break the token; one that covers only
    tokens and punctuation hides nothing. Dropping it guarantees that every
    round of :func:`redact` removes a letter or digit, so the rounds end.
    """
    tokens = [m.span() for m in _TOKEN.finditer(text)] if spans else []
    if not tokens:
        return spans
    starts = [start for start, _ in tokens]
    out: list[Span] = []
    for start, end in spans:
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and tokens[i][0] < start < tokens[i][1]:
            start = tokens[i][0]
        j = bisect.bisect_right(starts, end - 1) - 1
        if j >= 0 and tokens[j][0] < end < tokens[j][1]:
            end = tokens[j][1]
        if any(c.isalnum() for c in text[start:end].replace(REDACTED, "")):
            if out and start < out[-1][1]:
                out[-1] = (out[-1][0], max(end, out[-1][1]))
            else:
                out.append((start, end))
    return out


def redact(text: str, seen: set[str] | None = None) -> tuple[str, int]:
    """Return ``text`` with each secret replaced by ``[redacted]``, and how many distinct secrets
    there were that ``seen`` did not hold yet (``seen`` gains them).

    Time is linear in ``len(text)``; a secret matched by several rules, or written
    several times, counts once. The result is a fixed point: redacting it again
    changes nothing. A replacement can change what a rule sees (a line that a
    private key block made two is one again), so the rules run again over the
    lines that changed, at most :data:`_MAX_ROUNDS` times; a span found in a later
    round that holds a ``[redacted]`` is part of a secret already counted.
    """
    seen = set() if seen is None else seen
    if text in _CLEAN:
        return text, 0
    total = 0
    windows: list[Span] | None = None
    for round_ in range(_MAX_ROUNDS):
        spans = _snapped(text, _spans(text, windows))
        if not spans:
            if round_ == 0:
                _remember_clean(text)
            break
        parts: list[str] = []
        spots: list[int] = []
        last = length = 0
        for start, end in spans:
            parts.append(text[last:start])
            length += start - last
            spots.append(length)
            parts.append(REDACTED)
            length += len(REDACTED)
            secret = text[start:end]
            if (round_ == 0 or REDACTED not in secret) and secret not in seen:
                seen.add(secret)
                total += 1
            last = end
        parts.append(text[last:])
        text = "".join(parts)
        windows = _lines_around(text, spots)
    return text, total


_CLEAN: set[str] = set()
"""Texts this process found no secret in: redacting one again gives it back unchanged, counting
0. A write redacts its text where it is checked, again as it is stored, and again in the log of
the operation (1.5 ms of a ``remember``)."""
_CLEAN_TEXT_MAX = 64 * 1024
"""The longest text remembered as clean (a memory's body is shorter; a transcript's page is not kept)."""
_CLEAN_MAX_CHARS = 4 << 20
"""Characters those texts may hold together; past it, no more are added."""
_clean_chars = 0


def _remember_clean(text: str) -> None:
    global _clean_chars
    if len(text) <= _CLEAN_TEXT_MAX and _clean_chars + len(text) <= _CLEAN_MAX_CHARS:
        _CLEAN.add(text)
        _clean_chars += len(text)


def _holds_nothing(name: str, value: Any) -> bool:
    """A flag, an absent value, a placeholder or a session number reveals nothing, even under a secret name."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        return is_reference(value) or is_session_number(name, value)
    if isinstance(value, int):
        return is_session_number(name, str(value))
    return isinstance(value, list | tuple | Mapping) and not value


def redact_value(obj: Any, seen: set[str] | None = None) -> tuple[Any, int]:
    """Return a copy of a JSON value with its secrets redacted, and how many distinct secrets
    there were (not already in ``seen``, which gains them).

    Every string (property names too) goes through :func:`redact`; a property
    whose name is secret-like (:func:`is_secret_name`) loses its whole value,
    unless that value reveals nothing (``None``, a boolean, empty, ``$VAR``).
    A secret in several places of the value (an event's text and its record)
    counts once. The input is not modified; tuples come back as lists.
    """
    return _walk(obj, 0, set() if seen is None else seen)


def _counted(secret: Any, seen: set[str]) -> int:
    """1 for a secret not yet in ``seen`` (which gains it), else 0; a value not a string by its JSON."""
    text = secret if isinstance(secret, str) else json.dumps(secret, sort_keys=True, default=str)
    if text in seen:
        return 0
    seen.add(text)
    return 1


def _walk(obj: Any, depth: int, seen: set[str]) -> tuple[Any, int]:
    if isinstance(obj, str):
        return redact(obj, seen)
    if depth >= _MAX_DEPTH and isinstance(obj, Mapping | list | tuple):
        return REDACTED, _counted(obj, seen)
    if isinstance(obj, Mapping):
        total = 0
        out: dict[Any, Any] = {}
        for name, item in obj.items():
            key, count = redact(name, seen) if isinstance(name, str) else (name, 0)
            total += count
            if isinstance(name, str) and is_secret_name(name) and not _holds_nothing(name, item):
                out[key] = REDACTED
                total += _counted(item, seen)
            else:
                out[key], count = _walk(item, depth + 1, seen)
                total += count
        return out, total
    if isinstance(obj, list | tuple):
        total = 0
        items: list[Any] = []
        for item in obj:
            clean, count = _walk(item, depth + 1, seen)
            items.append(clean)
            total += count
        return items, total
    return obj, 0


def redact_arguments(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return MCP ``arguments`` as they may be written to a ledger: plain JSON, secrets redacted.

    Values JSON cannot represent are written as their ``str`` so an odd
    argument cannot cost the whole entry.
    """
    if not arguments:
        return {}
    plain = json.loads(json.dumps(dict(arguments), default=str))
    redacted: dict[str, Any] = redact_value(plain)[0]
    return redacted
