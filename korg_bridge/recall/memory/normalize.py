"""Text comparisons of the write policy: normalised hashes, word sets, and the difference guard.

No model and no randomness: the same two texts always get the same verdict.

* :func:`content_hash` -- SHA-256 of the normalised text (NFKC, case-folded,
  whitespace collapsed, trailing sentence punctuation dropped): an exact
  repeat, however spaced or capitalised, is the same memory.
* :func:`word_set` / :func:`jaccard` -- similarity of two texts' content words
  (stop words dropped, light stemming).
* :func:`differences` -- what two similar texts disagree on: numbers
  (versions, sizes, ports), dates and times, negations, named entities, the
  order of things around a preference ("pnpm over npm"), and what
  :mod:`.contrast` sees beyond word sets (roles swapped, tense, who / how many /
  which way). A merge needs high similarity *and* no difference, because a
  wrong merge hides a fact while a missed one costs a line.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from korg_bridge.recall.memory.contrast import (
    expand_contractions,
    function_changes,
    swapped,
    tense_marks,
    tokens,
)

__all__ = [
    "content_hash",
    "differences",
    "has_value",
    "jaccard",
    "normalise",
    "title_of",
    "word_set",
    "words",
]

_SPACE = re.compile(r"\s+")
_TRAILING = ".!?;:…。"
_APOSTROPHE = "\u2019"
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
TITLE_MAX = 80

STOP_WORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just me more
    most my myself of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your
    yours please must need needs should always""".split()  # noqa: SIM905 (a word list reads best as words)
)
"""Dropped from word sets: they carry no fact. Negations are *not* here: ``not``, ``no`` and
``never`` change a fact, so the guard counts them."""

_NEGATIONS = frozenset(
    """not no never none nothing nobody nowhere neither nor without cannot disable disabled disables
    disabling stop stopped stops avoid avoided avoids don't doesn't didn't isn't aren't wasn't
    weren't won't wouldn't can't couldn't shouldn't mustn't haven't hasn't hadn't dont doesnt didnt
    isnt arent wont cant shouldnt""".split()  # noqa: SIM905
)
_NEGATION_PHRASES = re.compile(r"\binstead\s+of\b|\brather\s+than\b|\bno\s+longer\b", re.IGNORECASE)
_CONNECTORS = frozenset(
    "over than instead rather before after from to into vs versus above below".split()  # noqa: SIM905
)
"""Words that order two things ("pnpm over npm", "from MySQL to Postgres"): swapping the sides
swaps the fact while keeping every word."""

_NUMBER = re.compile(
    r"(?<![\w.])[-+]?\d+(?:[.,:]\d+)*(?:st|nd|rd|th|\s?(?:%|[kKmMgGtT]i?[bB]|ms|s|px))?(?![\w])"
)
"""Integers, decimals, versions, times, sizes, and ordinals ("the 1st" / "the 15th")."""
_NUMBER_WORDS = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "twenty",
        "thirty",
        "hundred",
        "thousand",
        "million",
        "billion",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "half",
        "twice",
        "double",
    ]
)
_MONTHS = (
    "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    "|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
    r"|\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b(?:\s+\d{{4}})?"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow|yesterday)\b"
    # A month alone ("ends in September"); "may" only with a day: alone it is a verb.
    r"|\b(?:january|february|march|april|june|july|august|september|october|november|december)\b"
    r"|\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b",
    re.IGNORECASE,
)
_CALENDAR_WORD = re.compile(rf"(?:{_MONTHS})|(?:mon|tues|wednes|thurs|fri|satur|sun)day", re.IGNORECASE)
_CODE = re.compile(r"`([^`\n]+)`")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>()\"']+", re.IGNORECASE)
_PATH = re.compile(r"(?<![\w])(?:~|\.{1,2})?/[\w.@~+-]+(?:/[\w.@~+-]*)*")
_QUOTED = re.compile(r"\"([^\"\n]{1,80})\"|'([^'\n]{2,80})'|“([^”\n]{1,80})”")
_IDENTIFIER = re.compile(r"\b[A-Za-z][\w]*(?:[._-][\w]+)+\b|\b[A-Za-z]+\d[\w]*\b")
_CAPITALISED = re.compile(r"\b[A-Z][\w]*(?:[A-Z][\w]*)*\b")
_SENTENCE_END = re.compile(r"[.!?:;]\s+|\n")


def normalise(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed and trimmed, trailing sentence punctuation dropped."""
    folded = _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    return folded.rstrip(_TRAILING).rstrip()


def content_hash(text: str) -> str:
    """SHA-256 (hex) of :func:`normalise` of ``text``: equal for exact repeats."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def title_of(body: str) -> str:
    """A one-line title from the body's first non-empty line, at most 80 characters."""
    for line in body.splitlines():
        line = _SPACE.sub(" ", line).strip().lstrip("#").strip()
        if line:
            return clip_title(line)
    return "(empty)"


def clip_title(text: str) -> str:
    """One line, at most :data:`TITLE_MAX` characters (cut at a word, with an ellipsis)."""
    line = _SPACE.sub(" ", text).strip()
    if len(line) <= TITLE_MAX:
        return line
    cut = line[: TITLE_MAX - 1]
    if " " in cut[TITLE_MAX // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:-") + "…"


_TEXTS_CACHED = 4096
"""Texts whose analysis is kept: the write policy compares a new memory with up to 20 others,
and an import compares each memory of the scope with many new ones."""


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` (letters and digits; apostrophes kept inside a word)."""
    return [
        w.replace(_APOSTROPHE, "'") for w in _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    ]


_VOWEL = re.compile(r"[aeiouy]")


def _stem(word: str) -> str:
    """Light stemming: plural and verb endings, so "tests"/"test", "runs"/"running"/"going"/"go"
    and "updates"/"updated"/"updating" meet (a final ``e`` goes with the ending)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("ing") and _VOWEL.search(word[:-3]):
        word = word[:-3]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
        return word[:-1] if len(word) > 3 and word[-1] == word[-2] else word
    if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:-1] if len(word) > 4 and word.endswith("e") else word


_PLAIN_NEGATIONS = frozenset({"not", "no", "never"})
"""Said alike in a word set ("never use npm", "do not use npm"): the guard counts negations."""


@lru_cache(maxsize=_TEXTS_CACHED)
def word_set(text: str) -> frozenset[str]:
    """Content words of ``text``, stemmed, contractions written out, possessive ``'s`` dropped
    (stop words dropped; negations kept, "not", "no" and "never" as one word)."""
    found: set[str] = set()
    for word in words(expand_contractions(text)):
        if word in STOP_WORDS:
            continue
        word = "not" if word in _PLAIN_NEGATIONS else word
        found.add(_stem(word))
    return frozenset(found)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared words over all words (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def has_value(text: str) -> bool:
    """Whether ``text`` states a number, a date or a time (what a value update changes)."""
    return (
        _NUMBER.search(text) is not None
        or _DATE.search(text) is not None
        or any(w in _NUMBER_WORDS for w in words(text))
    )


def _numbers(text: str) -> Counter[str]:
    found = Counter(m.group(0).replace(" ", "").replace(",", "").lower() for m in _NUMBER.finditer(text))
    found.update(w for w in words(text) if w in _NUMBER_WORDS)
    return found


def _dates(text: str) -> Counter[str]:
    return Counter(_SPACE.sub(" ", m.group(0).lower()) for m in _DATE.finditer(text))


def _negations(text: str) -> int:
    count = sum(1 for w in words(text) if w in _NEGATIONS or w.endswith("n't"))
    return count + len(_NEGATION_PHRASES.findall(text))


def _entities(text: str) -> set[str]:
    """Named things: code spans, URLs, paths, identifiers, quoted strings, capitalised words
    that do not start a sentence."""
    found: set[str] = set()
    for pattern in (_CODE, _QUOTED):
        for match in pattern.finditer(text):
            found.add(next(g for g in match.groups() if g).strip().casefold())
    for pattern in (_URL, _PATH, _IDENTIFIER):
        found.update(m.group(0).rstrip(".,;:").casefold() for m in pattern.finditer(text))
    starts = {0} | {m.end() for m in _SENTENCE_END.finditer(text)}
    for match in _CAPITALISED.finditer(text):
        at_start = match.start() in starts or _is_after_quote_start(text, match.start(), starts)
        # "March", "Friday": dates, compared as such by the date check
        if not at_start and not _CALENDAR_WORD.fullmatch(match.group(0)):
            found.add(match.group(0).casefold())
    return {entity for entity in found if entity}


def _is_after_quote_start(text: str, pos: int, starts: set[int]) -> bool:
    # "- Postgres …" or "(Postgres …" at a sentence start is still a sentence start.
    head = pos
    while head > 0 and text[head - 1] in " \t-*>(\"'“":
        head -= 1
    return head in starts


def _mentions(entity: str, other_lower: str, other_words: frozenset[str]) -> bool:
    return entity in other_words or entity in other_lower


def _sides(sequence: list[str], connector: str) -> tuple[set[str], set[str]]:
    """Content words only before / only after the first ``connector``."""
    at = sequence.index(connector)

    def content(part: list[str]) -> set[str]:
        return {_stem(w) for w in part if w not in STOP_WORDS and w not in _CONNECTORS}

    left, right = content(sequence[:at]), content(sequence[at + 1 :])
    return left - right, right - left


def _swapped(words_a: list[str], words_b: list[str]) -> bool:
    """True when a connector both texts use (their :func:`words`) has the same words on opposite sides."""
    for connector in sorted(_CONNECTORS & set(words_a) & set(words_b)):
        left_a, right_a = _sides(words_a, connector)
        left_b, right_b = _sides(words_b, connector)
        if left_a & right_b and right_a & left_b:
            return True
    return False


def differences(a: str, b: str) -> list[str]:
    """What ``a`` and ``b`` disagree on, one phrase per kind ([] when nothing differs).

    Numbers and dates must be the same multiset; negations the same count (so "never use
    npm" and "do not use npm" agree); each named entity of one text must be mentioned by
    the other (in any case); a connector both use ("over", "than", "before", "from … to")
    must not have the same words on opposite sides; no content word of one may stand where the
    other has a different one (see :func:`_replaced`); and, from :mod:`.contrast`, no two
    spans may have traded places ("npm, not pnpm"), the tense must agree, and no pronoun,
    quantifier, modal, frequency or direction word may stand for another of its kind.
    """
    one, two = _reading(a), _reading(b)
    found: list[str] = []
    if one.numbers != two.numbers:
        only = sorted(set((one.numbers - two.numbers) + (two.numbers - one.numbers)))
        found.append("numbers differ (" + ", ".join(only[:4]) + ")")
    if one.dates != two.dates:
        found.append("dates or times differ")
    if one.negations != two.negations:
        found.append("negation differs")
    missing = sorted(
        {e for e in one.entities if not _mentions(e, two.lower, two.word_set)}
        | {e for e in two.entities if not _mentions(e, one.lower, one.word_set)}
    )
    if missing:
        found.append("names differ (" + ", ".join(missing[:4]) + ")")
    if _swapped(list(one.words), list(two.words)):
        found.append("order differs (what is preferred or comes first)")
    replaced = _replaced(_plain_words(a), _plain_words(b))
    if replaced:
        found.append("words differ (" + ", ".join(replaced[:4]) + ")")
    tokens_a, tokens_b = list(one.tokens), list(two.tokens)
    roles = swapped(list(one.stems), list(two.stems))
    if roles and not any(item.startswith("order differs") for item in found):
        found.append(f"order differs ({roles[0]} / {roles[1]} swapped)")
    if tense_marks(tokens_a, tokens_b) != tense_marks(tokens_b, tokens_a):
        found.append("tense differs")
    found.extend(function_changes(tokens_a, tokens_b))
    return found


@dataclass(frozen=True, slots=True)
class _Reading:
    """What :func:`differences` reads from one text, read once per text: the write policy compares
    a new memory with up to 20 others, each comparison reading both again (a third of a
    ``remember``)."""

    numbers: Counter[str]
    dates: Counter[str]
    negations: int
    entities: frozenset[str]
    lower: str
    words: tuple[str, ...]
    word_set: frozenset[str]
    tokens: tuple[str, ...]
    stems: tuple[str, ...]


@lru_cache(maxsize=_TEXTS_CACHED)
def _reading(text: str) -> _Reading:
    found = words(text)
    parts = tokens(text)
    return _Reading(
        numbers=_numbers(text),
        dates=_dates(text),
        negations=_negations(text),
        entities=frozenset(_entities(text)),
        lower=unicodedata.normalize("NFKC", text).casefold(),
        words=tuple(found),
        word_set=frozenset(found),
        tokens=tuple(parts),
        stems=tuple(_stems(parts)),
    )


def _stems(found: list[str]) -> list[str]:
    return [_stem(word) if word.isalpha() else word for word in found]


SAME_STEM = 5
"""Two words sharing this many first letters (or one the start of the other) are one word in two
forms ("manager"/"management", "own"/"owner"): a rewording, not a replacement."""


@lru_cache(maxsize=_TEXTS_CACHED)
def _plain_words(text: str) -> frozenset[str]:
    """Content words the other checks do not already compare: negations are counted, numbers and
    dates compared as values."""
    return frozenset(
        w
        for w in word_set(text)
        if w not in _NEGATIONS
        and w not in _NUMBER_WORDS
        and not w.endswith("n't")
        and not any(c.isdigit() for c in w)
        and not _CALENDAR_WORD.fullmatch(w)
    )


def _akin(x: str, y: str) -> bool:
    common = 0
    for left, right in zip(x, y, strict=False):
        if left != right:
            break
        common += 1
    return common >= min(SAME_STEM, len(x), len(y))


def _replaced(a: frozenset[str], b: frozenset[str]) -> list[str]:
    """``x / y`` for content words of one text that the other has a different word in place of.

    A word only one text has is an addition ("… in the shop repo"); a word each text has where the
    other has another is a replacement -- "pnpm" for "npm", "billing" for "shop", "Keiko" for "Dev"
    -- which the name check cannot see in lower case or at the start of a sentence. A synonym is a
    replacement too: the merge it prevents costs one line, a wrong one would hide a fact.
    """
    only_a = sorted(w for w in a - b if not any(_akin(w, v) for v in b - a))
    only_b = sorted(w for w in b - a if not any(_akin(w, v) for v in a - b))
    if not only_a or not only_b:
        return []
    return [f"{x} / {y}" for x, y in zip(only_a, only_b, strict=False)] + (
        [f"{x} / ?" for x in only_a[len(only_b) :]] + [f"? / {y}" for y in only_b[len(only_a) :]]
    )
