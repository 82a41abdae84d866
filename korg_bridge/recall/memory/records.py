"""One version of a memory, as a row and as JSON, plus the ids and timestamps it carries.

A memory is a *lineage* of versions sharing an ``id``; every write adds a
version and never edits an old one's content (see ``docs/memory.md``). The
:class:`Version` here is the unit everything else passes around: the store
reads and writes it verbatim (so an import can reproduce ids, versions and
timestamps exactly), the mirror renders it, the log hashes it.

A memory's ``source`` may name a *kind* (:data:`DERIVED_KINDS`): a copy of a file someone
else owns -- Claude Code's memory folder, an instructions file -- taken in by the reader of
those files. Such a *derived* memory is never merged into, revised or mirrored by korg-recall
(:func:`is_derived`); the file is where it changes.

Timestamps are text in one fixed form, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``: text so
exports are readable and lossless, one form so that comparing strings compares
times (``…00Z`` and ``…00.5Z`` would sort wrongly side by side).
"""

from __future__ import annotations

import base64
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory import storable

__all__ = [
    "AUTO_MEMORY",
    "COLUMNS",
    "DERIVED_KINDS",
    "INSTRUCTIONS",
    "MEMORY_TYPES",
    "STATES",
    "Version",
    "age_days",
    "check_id",
    "derived_refusal",
    "is_derived",
    "iso",
    "new_id",
    "parse_iso",
    "source_kind",
    "user_time",
]

MEMORY_TYPES = ("user", "feedback", "project", "reference", "note")
"""``user``: who the user is, preferences; ``feedback``: how to work; ``project``: facts about
this codebase or task; ``reference``: pointers (URLs, docs, commands); ``note``: anything else."""

STATES = ("live", "pending", "retired", "purged")

AUTO_MEMORY = "claude-auto-memory"
"""A file of a Claude Code memory folder (``<config>/projects/<slug>/memory/*.md``)."""
INSTRUCTIONS = "instructions"
"""``CLAUDE.md`` / ``AGENTS.md``: standing instructions, read as ``feedback`` memories."""
DERIVED_KINDS = frozenset({AUTO_MEMORY, INSTRUCTIONS})
"""The ``source.kind`` of a derived memory: a copy of a file korg-recall does not own."""

_ID = re.compile(r"^m[a-z2-7]{10}$")
_ISO_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def new_id() -> str:
    """A fresh lineage id: ``m`` and 10 base32 characters (50 random bits)."""
    return "m" + base64.b32encode(secrets.token_bytes(7)).decode("ascii").lower()[:10]


def check_id(value: str) -> str:
    """Return ``value`` stripped if it has the form of a memory id.

    Raises:
        UsageError: it does not.
    """
    text = value.strip()
    if not _ID.match(text):
        raise UsageError(
            f"invalid memory id {value!r}: ids look like m3x7k2p9qaz. List them with `korg-recall memories`."
        )
    return text


def iso(epoch: float | None = None) -> str:
    """``epoch`` (default: now) in the store's one timestamp form."""
    moment = datetime.fromtimestamp(time.time() if epoch is None else epoch, UTC)
    return moment.strftime(_ISO_FORMAT)


def parse_iso(text: str) -> float:
    """Epoch seconds of a timestamp in the store's form (or any ISO-8601 form; naive = UTC).

    Raises:
        ValueError: not a timestamp.
    """
    moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def user_time(value: str, name: str) -> str:
    """A time given by a caller (ISO-8601 date or date-time, naive = UTC) in the store's form.

    Raises:
        UsageError: ``value`` is not an ISO-8601 date or date-time.
    """
    try:
        return iso(parse_iso(value.strip()))
    except (ValueError, OverflowError, OSError):
        raise UsageError(
            f"invalid {name} {value!r}: expected an ISO-8601 date or date-time such as 2026-05-27 "
            "or 2026-05-27T10:00:00Z."
        ) from None


def age_days(recorded_at: str, now: float) -> float:
    """Days between ``recorded_at`` and ``now`` (0 for an unreadable timestamp)."""
    try:
        return max(0.0, (now - parse_iso(recorded_at)) / 86_400)
    except (ValueError, OverflowError, OSError):
        return 0.0


def source_kind(source: Mapping[str, Any] | None) -> str | None:
    """The ``kind`` a memory's ``source`` names, if it is one of :data:`DERIVED_KINDS`."""
    kind = source.get("kind") if isinstance(source, Mapping) else None
    return kind if kind in DERIVED_KINDS else None


def is_derived(version: Any) -> bool:
    """True for a memory read from a file of Claude Code's (or an instructions file)."""
    return source_kind(getattr(version, "source", None)) is not None


def derived_refusal(version: Any) -> str:
    """The error for changing a derived memory through korg-recall: where to change it instead."""
    source = getattr(version, "source", None) or {}
    return (
        f"memory {version.id} is a copy of {source.get('file', 'a file of Claude Code')} "
        f"({source_kind(source)}); korg-recall does not change it. Edit that file (the change is read on "
        "the next call), or remember a new memory."
    )


@dataclass(slots=True)
class Version:
    """One row of table ``memory``: a version of a lineage. See ``docs/memory.md`` for each field."""

    id: str
    version: int
    scope: str
    type: str
    title: str
    body: str
    content_hash: str
    actor: str
    recorded_at: str
    state: str = "live"
    trust: str = "trusted"
    key: str | None = None
    tags: list[str] = field(default_factory=list)
    pinned: bool = False
    valid_from: str | None = None
    valid_to: str | None = None
    retired_at: str | None = None
    superseded_by: int | None = None
    superseded_at: str | None = None
    expires_at: str | None = None
    use_count: int = 0
    last_used_at: str | None = None
    source: dict[str, Any] | None = None
    provenance: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    conflict: bool = False
    rowid: int | None = None
    """Internal row id: set once stored; not part of an export."""

    @property
    def is_head(self) -> bool:
        return self.superseded_by is None

    def to_row(self) -> tuple[Any, ...]:
        """The values for :data:`COLUMNS`, in order (JSON columns encoded)."""
        values: list[Any] = []
        for name in COLUMNS:
            value = getattr(self, name)
            if name in _JSON_COLUMNS:
                # Strict JSON only (no NaN, no lone surrogate): SQLite's and PostgreSQL's JSON
                # functions read these columns too, and one value they refuse breaks every reader.
                value = None if value is None else storable.dumps(value)
            elif name in _BOOL_COLUMNS:
                value = int(bool(value))
            values.append(value)
        return tuple(values)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Version:
        """A version from ``SELECT rowid, <COLUMNS>`` (rowid first). Positional, by indexes worked
        out once (:func:`_row_layout`): a search reads hundreds of rows, and a loop over column
        names per row was most of the read."""
        json_at, bool_at, order = _row_layout()
        values = list(row[1:])
        if len(values) != len(COLUMNS):
            raise ValueError(f"a memory row has {len(COLUMNS)} columns, not {len(values)}")
        for at, empty in json_at:
            value = values[at]
            # "[]" (no tags, no provenance) is most rows.
            values[at] = [] if value == "[]" else storable.loads(value) if value else empty()
        for at in bool_at:
            values[at] = bool(values[at])
        values.append(row[0])
        return cls(*[values[at] for at in order])

    def to_dict(self) -> dict[str, Any]:
        """Every column as JSON (what ``memories ids=…`` and an export show); no rowid."""
        return {name: getattr(self, name) for name in COLUMNS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Version:
        """The inverse of :meth:`to_dict` (unknown keys ignored), for a lossless import.

        Raises:
            KeyError, TypeError: required fields are missing or of the wrong kind.
        """
        known = {f.name for f in fields(cls)} - {"rowid"}
        return cls(**{name: data[name] for name in known if name in data})


COLUMNS: tuple[str, ...] = (
    "id",
    "version",
    "scope",
    "type",
    "title",
    "body",
    "key",
    "content_hash",
    "tags",
    "pinned",
    "state",
    "trust",
    "actor",
    "valid_from",
    "valid_to",
    "recorded_at",
    "retired_at",
    "superseded_by",
    "superseded_at",
    "expires_at",
    "use_count",
    "last_used_at",
    "source",
    "provenance",
    "reason",
    "conflict",
)
"""Table ``memory``'s columns besides ``rowid``, in the order :meth:`Version.to_row` gives."""

_JSON_COLUMNS = frozenset({"tags", "source", "provenance"})
_JSON_EMPTY: dict[str, Any] = {"tags": list, "provenance": list, "source": lambda: None}
_BOOL_COLUMNS = frozenset({"pinned", "conflict"})


@lru_cache(maxsize=1)
def _row_layout() -> tuple[tuple[tuple[int, Callable[[], Any]], ...], tuple[int, ...], tuple[int, ...]]:
    """Where :meth:`Version.from_row` finds each field: the JSON columns (with their empty value),
    the yes/no ones, and for each dataclass field in order its place among the columns (the rowid
    last)."""
    json_at = tuple((at, _JSON_EMPTY[name]) for at, name in enumerate(COLUMNS) if name in _JSON_COLUMNS)
    bool_at = tuple(at for at, name in enumerate(COLUMNS) if name in _BOOL_COLUMNS)
    places = {name: at for at, name in enumerate(COLUMNS)}
    order = tuple(places.get(f.name, len(COLUMNS)) for f in fields(Version))
    return json_at, bool_at, order
