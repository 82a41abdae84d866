"""The line of text a hit shows: cut around the first matching term, at word boundaries.

Snippets are cut between words where possible, so a secret is never half
shown: redaction (:mod:`korg_bridge.redact`) is the caller's, which
can count what it hides. A match the head of an event does not hold (a line
deep in a long log) is shown from the event's body.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SNIPPET_CHARS", "make_snippet"]

SNIPPET_CHARS = 200
SNIPPET_LEAD = 60
"""Characters shown before the first matching term, so the hit reads in context."""


def make_snippet(text: str, terms: Sequence[str], limit: int = SNIPPET_CHARS, body: str | None = None) -> str:
    """Return at most ``limit`` characters of ``text`` on one line, around the first term found.

    Terms are matched case-insensitively; a stemmed match (``fixing`` for
    ``fixed``) is looked up by its first letters. Cuts fall between words
    unless a single word is longer than the room left, and are marked ``…``.
    When no term is in ``text`` (an event's head) but one is in ``body`` (its
    full text), the snippet comes from there: the line of a long log that matched.
    """
    flat = " ".join(text.split())
    lowered = flat.lower()
    found = [pos for term in terms if (pos := _find(lowered, term)) >= 0]
    if not found and body and terms:
        flat_body = " ".join(body.split())
        lowered_body = flat_body.lower()
        in_body = [pos for term in terms if (pos := _find(lowered_body, term)) >= 0]
        if in_body:
            flat, lowered, found = flat_body, lowered_body, in_body
    if len(flat) <= limit:
        return flat
    start = max(0, min(found) - SNIPPET_LEAD) if found else 0
    start = min(start, len(flat) - (limit - 1))
    if start > 0 and flat[start - 1] != " ":
        space = flat.find(" ", start, start + SNIPPET_LEAD)
        start = space + 1 if space >= 0 else start
    head = "…" if start > 0 else ""
    end = start + limit - len(head)
    if end >= len(flat):
        return head + flat[start:]
    end -= 1  # room for the closing mark
    if flat[end] != " ":
        space = flat.rfind(" ", start, end)
        end = space if space > start else end
    return head + flat[start:end].rstrip() + "…"


def _find(lowered: str, term: str) -> int:
    position = lowered.find(term)
    if position < 0 and len(term) >= 6:
        position = lowered.find(term[: len(term) - 3])
    return position
