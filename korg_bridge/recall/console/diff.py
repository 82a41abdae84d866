"""A word-level diff between two versions of a memory.

Words and the whitespace between them are the units (a changed word is one delete and one
insert, not a character soup), compared with :class:`difflib.SequenceMatcher` without its junk
heuristic (which would skip common words such as "the" in long texts). Parts carry the raw
text: the page escapes it (:func:`to_html` does, for a caller without templates).
"""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass

__all__ = ["Part", "to_html", "word_diff"]

_TOKEN = re.compile(r"\s+|[^\s]+")
MAX_TOKENS = 20_000
"""Beyond this many words on a side, the diff is the whole old text deleted and the new inserted:
a memory is at most 8 KB, so only a hostile store gets there, and the matcher is quadratic."""


@dataclass(frozen=True, slots=True)
class Part:
    op: str
    """``equal``, ``insert`` or ``delete``."""
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"op": self.op, "text": self.text}


def word_diff(old: str, new: str) -> list[Part]:
    """The parts that turn ``old`` into ``new``, in order; adjacent parts of one kind merged."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    if len(a) > MAX_TOKENS or len(b) > MAX_TOKENS:
        return _merged([Part("delete", old), Part("insert", new)])
    parts: list[Part] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            parts.append(Part("equal", "".join(a[i1:i2])))
            continue
        if tag in ("delete", "replace"):
            parts.append(Part("delete", "".join(a[i1:i2])))
        if tag in ("insert", "replace"):
            parts.append(Part("insert", "".join(b[j1:j2])))
    return _merged(parts)


def _merged(parts: list[Part]) -> list[Part]:
    out: list[Part] = []
    for part in parts:
        if not part.text:
            continue
        if out and out[-1].op == part.op:
            out[-1] = Part(part.op, out[-1].text + part.text)
        else:
            out.append(part)
    return out


def to_html(parts: list[Part]) -> str:
    """``<del>``/``<ins>`` markup with every text escaped."""
    tags = {"delete": "del", "insert": "ins"}
    out: list[str] = []
    for part in parts:
        text = html.escape(part.text, quote=True)
        tag = tags.get(part.op)
        out.append(f"<{tag}>{text}</{tag}>" if tag else text)
    return "".join(out)
