"""Our own export read back: the header, every version checked field by field, the links.

An import of ``korg-recall-memory@v1`` writes versions verbatim (ids, versions,
timestamps, actors, states, provenance), so nothing else stands between the
file and the store: every field is checked here, against the types and forms
the store itself writes, before the store is opened. A line that fails is a
one-line error naming the file, the line and the field; nothing is imported.

Two things are re-checked rather than trusted, because a file can be written
by hand: content that reads as an injected instruction is marked
``untrusted`` (a genuine export already says so), and secrets are redacted
unless the operator allowed them (a genuine export has none left, so this
changes nothing for it and the round trip stays lossless).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory import storable
from korg_bridge.recall.memory.drafts import BODY_MAX_BYTES
from korg_bridge.recall.memory.normalize import content_hash
from korg_bridge.recall.memory.records import COLUMNS, MEMORY_TYPES, STATES, Version
from korg_bridge.recall.memory.safety import injection_signs, redact_text
from korg_bridge.recall.memory.transfer.export import EXPORT_FORMAT

__all__ = ["Exported", "Link", "read_exported"]

_ID = re.compile(r"^m[a-z2-7]{10}$")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_SCOPE = re.compile(
    r"^(?:user|project:/.*|(?:agent|session):[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127})$", re.DOTALL
)
_LINK_KIND_MAX = 200
_INT32_MAX = 2**31 - 1
"""The team store keeps version numbers and use counts in 32-bit columns."""


@dataclass(slots=True)
class Link:
    src: str
    dst: str
    kind: str
    created_at: str


@dataclass(slots=True)
class Exported:
    """What an export file holds, checked: its header, versions in file order, links."""

    header: dict[str, Any]
    versions: list[Version] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    secrets_redacted: int = 0
    marked_untrusted: int = 0


def _fail(where: str, what: str) -> UsageError:
    return UsageError(f"{where}: {what}. This is not an intact korg-recall export; export it again.")


def _string(value: Any, *, optional: bool = False) -> bool:
    return (optional and value is None) or isinstance(value, str)


def _time(value: Any, *, optional: bool = False) -> bool:
    return (optional and value is None) or (isinstance(value, str) and _TIME.match(value) is not None)


def _int(value: Any, minimum: int, *, optional: bool = False) -> bool:
    if optional and value is None:
        return True
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= _INT32_MAX


_CHECKS: dict[str, tuple[str, Any]] = {
    "id": ("an id such as m3x7k2p9qaz", lambda v: isinstance(v, str) and _ID.match(v) is not None),
    "version": (f"an integer >= 1 (at most {_INT32_MAX})", lambda v: _int(v, 1)),
    "scope": (
        "user, project:/path, agent:NAME or session:ID",
        lambda v: isinstance(v, str) and bool(_SCOPE.match(v)),
    ),
    "type": (f"one of {', '.join(MEMORY_TYPES)}", lambda v: v in MEMORY_TYPES),
    "title": ("a string", _string),
    "body": ("a string", _string),
    "key": ("a string or null", lambda v: _string(v, optional=True)),
    "content_hash": ("a string", _string),
    "tags": ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v)),
    "pinned": ("true or false", lambda v: isinstance(v, bool)),
    "state": (f"one of {', '.join(STATES)}", lambda v: v in STATES),
    "trust": ("trusted or untrusted", lambda v: v in ("trusted", "untrusted")),
    "actor": ("a string", lambda v: isinstance(v, str) and bool(v)),
    "valid_from": ("a timestamp or null", lambda v: _time(v, optional=True)),
    "valid_to": ("a timestamp or null", lambda v: _time(v, optional=True)),
    "recorded_at": ("a timestamp", _time),
    "retired_at": ("a timestamp or null", lambda v: _time(v, optional=True)),
    "superseded_by": (f"an integer or null (at most {_INT32_MAX})", lambda v: _int(v, 1, optional=True)),
    "superseded_at": ("a timestamp or null", lambda v: _time(v, optional=True)),
    "expires_at": ("a timestamp or null", lambda v: _time(v, optional=True)),
    "use_count": (f"an integer >= 0 (at most {_INT32_MAX})", lambda v: _int(v, 0)),
    "last_used_at": ("a timestamp or null", lambda v: _time(v, optional=True)),
    "source": ("an object or null", lambda v: v is None or isinstance(v, dict)),
    "provenance": (
        "a list of objects",
        lambda v: isinstance(v, list) and all(isinstance(p, dict) for p in v),
    ),
    "reason": ("a string or null", lambda v: _string(v, optional=True)),
    "conflict": ("true or false", lambda v: isinstance(v, bool)),
}
"""Every column of a version line and the form the store writes it in (timestamps in the store's
one form, ``2026-05-27T10:00:00.000000Z``, so that comparing them as strings compares times)."""

assert set(_CHECKS) == set(COLUMNS)


def check_header(header: Any, where: str) -> dict[str, Any]:
    """Raises:
    UsageError: not our header, a newer format, or counts that are not numbers."""
    if not isinstance(header, dict) or not isinstance(header.get("format"), str):
        raise _fail(where, "the first line is not a korg-recall export header")
    if header["format"] != EXPORT_FORMAT:
        raise UsageError(
            f"{where}: format {header['format']!r} is not {EXPORT_FORMAT}; it was written by another "
            "(perhaps newer) korg-recall. Upgrade korg-recall to import it."
        )
    for name in ("versions", "links"):
        if not _int(header.get(name), 0):
            raise _fail(where, f"the header's {name} is not a count")
    return header


def _version(obj: Mapping[str, Any], where: str, out: Exported, allow_secrets: bool) -> Version:
    for name, (form, ok) in _CHECKS.items():
        if name not in obj:
            raise _fail(where, f"the version has no {name}")
        if not ok(obj[name]):
            raise _fail(where, f"{name} is not {form} (got {str(obj[name])[:40]!r})")
    for name in ("source", "provenance"):
        storable.check(obj[name], name, lambda reason: _fail(where, reason), storable.MAX_STORED_DEPTH)
    version = Version.from_dict(obj)
    if len(version.body.encode("utf-8")) > BODY_MAX_BYTES:
        raise _fail(where, f"the body is over {BODY_MAX_BYTES} bytes, more than a memory holds")
    if version.state == "purged":
        return version
    if "\ufffd" in version.body and content_hash(version.body) != version.content_hash:
        # A lone surrogate or a NUL of a hand-made file, replaced on reading: hash what is stored.
        version.content_hash = content_hash(version.body)
    if not allow_secrets:
        body, found = redact_text(version.body)
        title, more = redact_text(version.title)
        if found or more:
            version.body, version.title = body, title
            version.content_hash = content_hash(body)
            out.secrets_redacted += found + more
    if version.trust == "trusted" and injection_signs(version.body + "\n" + version.title):
        version.trust = "untrusted"
        out.marked_untrusted += 1
    return version


def _link(obj: Mapping[str, Any], where: str) -> Link:
    values = [obj.get(name) for name in ("src", "dst", "kind", "created_at")]
    src, dst, kind, created = values
    if not (isinstance(src, str) and _ID.match(src) and isinstance(dst, str) and _ID.match(dst)):
        raise _fail(where, "a link needs src and dst memory ids")
    if not (isinstance(kind, str) and 0 < len(kind) <= _LINK_KIND_MAX) or not _time(created):
        raise _fail(where, "a link needs a kind and a created_at timestamp")
    return Link(src, dst, kind, str(created))


def read_exported(lines: list[tuple[int, str]], where: str, *, allow_secrets: bool) -> Exported:
    """Check an export's ``(line number, text)`` pairs (blank lines left out) and return what it holds.

    Raises:
        UsageError: a line that is not JSON or not what an export holds, two versions with the same
            id and version, or counts that differ from the header's (a file cut short).
    """
    if not lines:
        raise UsageError(f"{where} is empty. Pass a file written by `korg-recall export`.")
    out: Exported | None = None
    seen: set[tuple[str, int]] = set()
    for number, text in lines:
        at = f"{where} line {number}"
        try:
            obj = storable.loads(text)
        except ValueError as exc:
            raise _fail(at, f"not JSON ({getattr(exc, 'msg', exc)})") from None
        if out is None:
            out = Exported(check_header(obj, at))
            continue
        record = obj.get("record") if isinstance(obj, dict) else None
        if record == "version":
            version = _version(obj, at, out, allow_secrets)
            if (version.id, version.version) in seen:
                raise _fail(at, f"{version.id} version {version.version} appears twice")
            seen.add((version.id, version.version))
            out.versions.append(version)
        elif record == "link":
            out.links.append(_link(obj, at))
        else:
            raise _fail(at, 'a line after the header must have "record": "version" or "link"')
    assert out is not None
    expected = (out.header["versions"], out.header["links"])
    if (len(out.versions), len(out.links)) != expected:
        raise UsageError(
            f"{where} is incomplete: its header promises {expected[0]} versions and {expected[1]} links, "
            f"the file holds {len(out.versions)} and {len(out.links)}. It was cut short; export it again."
        )
    return out
