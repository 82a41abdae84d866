"""MCP tool names that every client accepts.

Claude Desktop, claude.ai and the OpenAI API reject tool names outside
``^[a-zA-Z0-9_-]{1,64}$``, and one bad name hides every tool of the server.
Dotted ``command_id``\\ s such as ``korg.rewind`` break that rule, so by
default we expose a safe name: every other character becomes ``_``; a name
over 64 characters is cut and given a stable hash suffix; collisions are
resolved deterministically (in ``command_id`` order, later ones get a hash
suffix). The original ``command_id`` travels in the tool's ``title`` and
``_meta``, and ``tools/call`` accepts either form.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

SAFE_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")
"""What every client accepts; use with ``fullmatch`` (``$`` would let a final newline through)."""
MAX_NAME = 64
_HASH_LEN = 8
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")

NAME_STYLES = ("safe", "command-id")


def _hashed(base: str, command_id: str, length: int = _HASH_LEN) -> str:
    digest = hashlib.sha256(command_id.encode("utf-8")).hexdigest()[:length]
    return f"{base[: MAX_NAME - length - 1]}_{digest}"


def is_safe_name(name: str) -> bool:
    """Whether ``name`` is already a name every client accepts."""
    return SAFE_NAME_RE.fullmatch(name) is not None


def safe_name(command_id: str) -> str:
    """The safe name of one command_id, ignoring collisions."""
    base = _UNSAFE.sub("_", command_id) or "_"
    if len(base) <= MAX_NAME:
        return base
    return _hashed(base, command_id)


def assign_names(command_ids: Iterable[str], style: str = "safe") -> dict[str, str]:
    """Map each command_id to a unique tool name.

    With ``style="command-id"`` names equal command_ids (the caller's choice
    to trade client compatibility for familiarity).

    Raises:
        ValueError: unknown style.
    """
    ids = list(command_ids)
    if style == "command-id":
        return {cid: cid for cid in ids}
    if style != "safe":
        raise ValueError(f"unknown tool-name style {style!r}; use one of {', '.join(NAME_STYLES)}")
    names: dict[str, str] = {}
    taken: set[str] = set()
    # Exact-fit names first, so a collision never renames a tool whose
    # command_id already was a valid name.
    order = sorted(ids, key=lambda cid: (not is_safe_name(cid), cid))
    for cid in order:
        name = safe_name(cid)
        length = _HASH_LEN
        while name in taken:
            name = _hashed(_UNSAFE.sub("_", cid), cid + "\x00" * (length - _HASH_LEN), length)
            length += 1
        taken.add(name)
        names[cid] = name
    return {cid: names[cid] for cid in ids}
