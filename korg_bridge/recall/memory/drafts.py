"""Turning a caller's arguments into a :class:`~.policy.Draft`: validated, capped, redacted, classified.

Every way text enters the store (``remember``, ``revise``, a hand-edited or
hand-made mirror file) goes through here, so the same caps and the same safety
apply to all of them: at most 8 KB of body, secrets redacted unless the
operator allowed them -- in the text and in every other field a caller gives a
memory (key, tags, source, a revision's reason: :func:`redact_fields`) -- and
content that reads as an injected instruction marked ``untrusted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from korg_bridge.errors import UsageError
from korg_bridge.recall.memory.normalize import clip_title, content_hash, title_of
from korg_bridge.recall.memory.records import MEMORY_TYPES, check_id, user_time
from korg_bridge.recall.memory.safety import injection_signs, redact_text, redact_value
from korg_bridge.recall.memory.write_policy import Draft

__all__ = [
    "BODY_MAX_BYTES",
    "Text",
    "checked_key",
    "checked_tags",
    "checked_type",
    "make_draft",
    "prepare_text",
    "redact_fields",
]

BODY_MAX_BYTES = 8 * 1024
"""A memory is one fact: longer text is refused with advice to split it."""
TAGS_MAX = 20
TAG_MAX_CHARS = 64
KEY_MAX_CHARS = 200


@dataclass(slots=True)
class Text:
    """A body and title after redaction, with what the safety checks found."""

    body: str
    title: str
    title_given: bool
    content_hash: str
    trust: str
    secrets_redacted: int
    injection: list[str]

    def checks(self) -> dict[str, Any]:
        trust = self.trust if not self.injection else "untrusted: " + "; ".join(self.injection)
        return {"secrets_redacted": self.secrets_redacted, "trust": trust}


def prepare_text(
    body: str,
    title: str | None,
    *,
    allow_secrets: bool,
    what: str = "content",
    by_person: bool = False,
    seen: set[str] | None = None,
) -> Text:
    """Strip, redact (unless ``allow_secrets``), cap and classify a body and its title.

    ``by_person``: a person wrote it, so orders about the assistant's replies are their own
    preferences (see :func:`~.safety.injection_signs`). ``seen``: the secrets already counted in
    the memory's other fields (:func:`redact_fields`), so each counts once.

    Raises:
        UsageError: the body is empty or longer than :data:`BODY_MAX_BYTES`.
    """
    text = body.strip()
    if not text:
        raise UsageError(f"{what} is empty. Pass the fact to remember as text.")
    redacted = 0
    given = bool(title and title.strip())
    raw_title = title.strip() if title and given else ""
    if not allow_secrets:
        seen = set() if seen is None else seen
        text, redacted = redact_text(text, seen)
        if raw_title:
            raw_title, more = redact_text(raw_title, seen)
            redacted += more
    size = len(text.encode("utf-8"))
    if size > BODY_MAX_BYTES:
        raise UsageError(
            f"{what} is {size} bytes; a memory holds at most {BODY_MAX_BYTES} bytes (8 KB). "
            "Split it into several memories, one fact each."
        )
    final_title = clip_title(raw_title) if given else title_of(text)
    signs = injection_signs(text + "\n" + final_title, by_person=by_person)
    return Text(
        body=text,
        title=final_title,
        title_given=given,
        content_hash=content_hash(text),
        trust="untrusted" if signs else "trusted",
        secrets_redacted=redacted,
        injection=signs,
    )


def checked_type(value: Any) -> str:
    """Raises:
    UsageError: not one of the memory types."""
    if value not in MEMORY_TYPES:
        raise UsageError(f"bad type {value!r}: use one of {', '.join(MEMORY_TYPES)}.")
    return str(value)


def checked_tags(value: Any) -> list[str]:
    """Tags stripped and de-duplicated (order kept).

    Raises:
        UsageError: more than 20, or one that is empty, multi-line or over 64 characters.
    """
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise UsageError("tags must be a list of strings.")
    tags: list[str] = []
    for raw in value:
        tag = raw.strip()
        if not tag or "\n" in tag or len(tag) > TAG_MAX_CHARS:
            raise UsageError(
                f"bad tag {_shown(raw)!r}: a tag is one word or short phrase of at most {TAG_MAX_CHARS} characters."
            )
        if tag not in tags:
            tags.append(tag)
    if len(tags) > TAGS_MAX:
        raise UsageError(f"{len(tags)} tags; a memory takes at most {TAGS_MAX}.")
    return tags


def checked_key(value: Any) -> str | None:
    """Raises:
    UsageError: an empty, multi-line or over-long key."""
    if value is None:
        return None
    key = str(value).strip()
    if not key or "\n" in key or len(key) > KEY_MAX_CHARS:
        raise UsageError(
            f"bad key {_shown(str(value))!r}: a key is one line of at most {KEY_MAX_CHARS} characters."
        )
    return key


def _shown(value: str) -> str:
    """A refused value as an error may quote it: redacted (a message reaches the model and the
    terminal, which the value's secret must not) and cut short."""
    text, _ = redact_text(value)
    return text if len(text) <= 80 else text[:77] + "..."


def redact_fields(
    fields: Mapping[str, Any], *, allow_secrets: bool, seen: set[str]
) -> tuple[dict[str, Any], int]:
    """``fields`` (a key, tags, a source, a reason: whatever a memory carries besides its text)
    with every string through the one redactor, unless the operator allowed secrets; and how many
    secrets ``seen`` did not hold yet. Names are not read as secret names here: ``key`` is a
    memory's key, not a credential, so only what the values say is redacted."""
    if allow_secrets:
        return dict(fields), 0
    names = list(fields)
    values, count = redact_value([fields[name] for name in names], seen)
    return dict(zip(names, values, strict=True)), count


def make_draft(
    args: Mapping[str, Any], scope: str, *, allow_secrets: bool, by_person: bool = False
) -> tuple[Draft, Text]:
    """The draft of a ``remember`` call (arguments as the schema names them), every field redacted.

    Raises:
        UsageError: any argument is out of bounds (see the helpers above).
    """
    seen: set[str] = set()
    text = prepare_text(
        str(args.get("content") or ""),
        args.get("title"),
        allow_secrets=allow_secrets,
        by_person=by_person,
        seen=seen,
    )
    source = args.get("source")
    meta, count = redact_fields(
        {"key": args.get("key"), "tags": args.get("tags"), "source": str(source) if source else None},
        allow_secrets=allow_secrets,
        seen=seen,
    )
    text.secrets_redacted += count
    source = meta["source"]
    draft = Draft(
        body=text.body,
        title=text.title,
        title_given=text.title_given,
        type=checked_type(args.get("type")),
        scope=scope,
        content_hash=text.content_hash,
        trust=text.trust,
        tags=checked_tags(meta["tags"]),
        key=checked_key(meta["key"]),
        supersedes=check_id(args["supersedes"]) if args.get("supersedes") else None,
        valid_from=user_time(args["valid_from"], "valid_from") if args.get("valid_from") else None,
        valid_to=user_time(args["valid_until"], "valid_until") if args.get("valid_until") else None,
        pinned=bool(args.get("pinned")),
        source={"ref": str(source)} if source else None,
    )
    if draft.valid_from and draft.valid_to and draft.valid_to < draft.valid_from:
        raise UsageError("valid_until is before valid_from. Swap them, or leave one out.")
    return draft, text


def title_from(meta_title: Any, body: str) -> str:
    """A mirror file's title: its front matter's, else the body's first line."""
    if isinstance(meta_title, str) and meta_title.strip():
        return clip_title(meta_title)
    return title_of(body)
