"""What two near-identical texts disagree on that their word sets cannot show: roles, tense, function words.

:func:`~.normalize.differences` compares *which* words two texts hold. A word set is blind to
three kinds of change that keep (almost) every word and still state another fact, and a merge
would then hide one of the two facts:

* **Roles swapped** -- the same words in exchanged places: "use pnpm, not npm" / "use npm, not
  pnpm", two ports swapped, "Alice owns billing and Bob owns search" with the names exchanged,
  "the frontend calls the backend" / "the backend calls the frontend". :func:`swapped` finds two
  spans that trade places around a middle that says something (not just "and" or "or"), so
  moving a whole phrase ("In March the freeze starts" / "The freeze starts in March") or
  reordering a list ("A and B") stays a rewording.
* **Tense** -- "is" / "was" / "will be", "used to", "deploy" / "deployed": a fact that held, or
  will hold, is not the fact that holds (:func:`tense_marks`).
* **Function words** the word sets drop as stop words but which decide who, how many or which
  way: pronouns ("we" / "they"), quantifiers ("all" / "some"), modals ("must" / "may"),
  frequency ("always" / "sometimes") and opposite pairs ("before" / "after", "on" / "off", "up"
  / "down", "from" / "to"). One replaced by another of its class is a difference; one text adding
  such a word ("always commit the lockfile") is an elaboration (:func:`function_changes`).

Deterministic and model-free like the rest of the guard; each check is linear in the texts
(the swap search is bounded: :data:`MAX_SWAP_TRIES`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = ["MAX_SWAP_TRIES", "expand_contractions", "function_changes", "swapped", "tense_marks", "tokens"]

_TOKEN = re.compile(r"[^\W_](?:[\w'\u2019.:/@+-]*[^\W_])?")
"""A word, number or identifier kept whole: ``eu-west-1``, ``config.example.toml``, ``9:30``, ``3.12``."""
_ARTICLES = frozenset({"a", "an", "the"})
_CONTRACTIONS = (
    (re.compile(r"\b(can)['\u2019]t\b|\b(can)not\b", re.IGNORECASE), r"\1\2 not"),
    (re.compile(r"\bwon['\u2019]t\b", re.IGNORECASE), "will not"),
    (re.compile(r"\bshan['\u2019]t\b", re.IGNORECASE), "shall not"),
    (re.compile(r"\b(\w+)n['\u2019]t\b", re.IGNORECASE), r"\1 not"),
    (re.compile(r"\b(\w+)['\u2019]ll\b", re.IGNORECASE), r"\1 will"),
    (re.compile(r"\b(\w+)['\u2019]re\b", re.IGNORECASE), r"\1 are"),
    (re.compile(r"\b(\w+)['\u2019]ve\b", re.IGNORECASE), r"\1 have"),
    (re.compile(r"\b(it|that|there|here|what|who|he|she)['\u2019]s\b", re.IGNORECASE), r"\1 is"),
)
"""``don't`` → ``do not``, ``won't`` → ``will not``, ``it's`` → ``it is``: one spelling of each, so a
contraction is neither a replaced word nor a tense change. A possessive ``'s`` stays. Only the first
(``cannot``) matches a text without an apostrophe: keep it first (:func:`expand_contractions`)."""

_COORDINATORS = frozenset(
    {"and", "or", "nor", "but", "yet", "while", "whereas", "plus", "also", "as", "well", "both", "either"}
)
"""A middle made only of these joins two spans symmetrically: "A and B" is "B and A"."""
MAX_SWAP_TRIES = 64
"""Span pairs examined per text pair: far above what a sentence offers, a bound for a hostile one."""

_PERSON = {
    **dict.fromkeys(("i", "me", "my", "mine", "myself"), "I"),
    **dict.fromkeys(("we", "us", "our", "ours", "ourselves"), "we"),
    **dict.fromkeys(("you", "your", "yours", "yourself"), "you"),
    **dict.fromkeys(("he", "him", "his", "himself"), "he"),
    **dict.fromkeys(("she", "her", "hers", "herself"), "she"),
    **dict.fromkeys(("they", "them", "their", "theirs", "themselves"), "they"),
}
_QUANTITY = {
    **dict.fromkeys(("all", "every", "each"), "all"),
    **dict.fromkeys(("some", "several"), "some"),
    **dict.fromkeys(("most", "many"), "most"),
    **dict.fromkeys(("few", "fewer", "fewest", "least"), "few"),
    "any": "any",
    "only": "only",
    "both": "both",
}
_MODAL = {"can": "can", "could": "could", "may": "may", "might": "may", "must": "must", "should": "should"}
_FREQUENCY = {
    "always": "always",
    **dict.fromkeys(("usually", "often", "mostly", "generally", "normally"), "usually"),
    **dict.fromkeys(("sometimes", "occasionally"), "sometimes"),
    **dict.fromkeys(("rarely", "seldom"), "rarely"),
}
_OPPOSITES = {
    **dict.fromkeys(("before", "prior", "earlier"), "before"),
    **dict.fromkeys(("after", "later", "afterwards"), "after"),
    "above": "above",
    "below": "below",
    "over": "over",
    "under": "under",
    "up": "up",
    "down": "down",
    "on": "on",
    "off": "off",
    **dict.fromkeys(("in", "inside"), "in"),
    **dict.fromkeys(("out", "outside"), "out"),
    "from": "from",
    **dict.fromkeys(("to", "into", "onto", "towards", "toward"), "to"),
    "more": "more",
    "less": "less",
}
_OPPOSITE_PAIRS = frozenset(
    frozenset(pair)
    for pair in (
        ("before", "after"),
        ("above", "below"),
        ("over", "under"),
        ("up", "down"),
        ("on", "off"),
        ("in", "out"),
        ("from", "to"),
        ("more", "less"),
    )
)
"""Only these replace each other as opposites: "in" for "on" is a preposition reworded."""
_CLASSES: tuple[tuple[str, dict[str, str]], ...] = (
    ("who", _PERSON),
    ("how many", _QUANTITY),
    ("modality", _MODAL),
    ("how often", _FREQUENCY),
    ("direction", _OPPOSITES),
)

_PAST_AUXILIARIES = frozenset({"was", "were", "had", "did"})
_FUTURE_AUXILIARIES = frozenset({"will", "shall"})
_PARTICIPLE_AFTER = frozenset(
    {"is", "are", "am", "was", "were", "be", "been", "being", "has", "have", "had", "get", "gets", "got"}
)
"""A word in ``-ed`` within two words after one of these is a participle ("are updated", "has been
removed"), not a past tense."""


def expand_contractions(text: str) -> str:
    """``text`` with each contraction written out (``doesn't`` → ``does not``)."""
    # Most texts have no apostrophe: then only "cannot" can be there (a write compares its text
    # with twenty others, twice each: eight substitutions a time were a tenth of the comparison).
    patterns = _CONTRACTIONS if "'" in text or "\u2019" in text else _CONTRACTIONS[:1]
    for pattern, replacement in patterns:
        text = pattern.sub(replacement, text)
    return text


def tokens(text: str) -> list[str]:
    """Lower-cased words of ``text``, contractions written out, articles and possessive ``'s``
    dropped, identifiers and numbers whole."""
    folded = expand_contractions(unicodedata.normalize("NFKC", text)).casefold()
    found: list[str] = []
    for match in _TOKEN.finditer(folded):
        word = match.group(0).replace("\u2019", "'")
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in _ARTICLES:
            found.append(word)
    return found


def _borders(first: list[str], second: list[str]) -> list[int]:
    """Every length ``n`` > 0 with ``first[:n] == second[-n:]``, shortest first (a prefix function
    over ``first + [sep] + second``: linear time)."""
    joined: list[str | None] = [*first, None, *second]
    fail = [0] * len(joined)
    for i in range(1, len(joined)):
        k = fail[i - 1]
        while k and joined[i] != joined[k]:
            k = fail[k - 1]
        if joined[i] == joined[k]:
            k += 1
        fail[i] = k
    found: list[int] = []
    k = fail[-1] if joined else 0
    while k:
        found.append(k)
        k = fail[k - 1]
    return sorted(found)


def swapped(a: list[str], b: list[str]) -> tuple[str, str] | None:
    """The two spans ``a`` and ``b`` (from :func:`tokens`, stemmed or not) hold in exchanged
    places around a middle that is not just a coordinator, or None.

    ``a`` = *u P v Q w* and ``b`` = *u Q v P w* with *v* saying something ("not", "to",
    "calls", "is Postgres and port"): a swap of who does what, of which value goes where, or of
    what comes first. With *v* empty it is a phrase moved whole, with *v* only "and"/"or" a list
    reordered: rewordings, not a swap. Also two words exchanged wherever the texts differ, however
    often each occurs (:func:`_exchanged`).
    """
    if len(a) != len(b):
        return None
    exchanged = _exchanged(a, b)
    if exchanged is not None or Counter(a) != Counter(b):
        return exchanged
    start = 0
    while start < len(a) and a[start] == b[start]:
        start += 1
    end = len(a)
    while end > start and a[end - 1] == b[end - 1]:
        end -= 1
    mid_a, mid_b = a[start:end], b[start:end]
    size = len(mid_a)
    if size < 3:
        return None
    tries = 0
    for p in _borders(mid_a, mid_b):  # P: a's middle starts with it, b's middle ends with it
        for q in _borders(mid_b, mid_a):  # Q: b's middle starts with it, a's middle ends with it
            if p + q >= size:
                break
            tries += 1
            if tries > MAX_SWAP_TRIES:
                return None
            middle = mid_a[p : size - q]
            if middle == mid_b[q : size - p] and not set(middle) <= _COORDINATORS:
                return " ".join(mid_a[:p]), " ".join(mid_a[size - q :])
    return None


def _exchanged(a: list[str], b: list[str]) -> tuple[str, str] | None:
    """Two words that trade places wherever ``a`` and ``b`` (of one length) differ, with
    something other than a coordinator between them: "merge into develop, and develop merges
    into main" / "merge into main, and main merges into develop"."""
    differing = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    if len(differing) < 2:
        return None
    first = (a[differing[0]], b[differing[0]])
    if any((a[i], b[i]) not in (first, first[::-1]) for i in differing):
        return None
    if all((a[i], b[i]) == first for i in differing):
        return None  # one word replaced by another everywhere: the replaced-word check's
    at = set(differing)
    between = {a[i] for i in range(differing[0] + 1, differing[-1]) if i not in at}
    return first if between and not between <= _COORDINATORS else None


def _stem_ed(word: str) -> str:
    return word[:-1] if word.endswith("e") else word


def tense_marks(words: list[str], other: list[str]) -> frozenset[str]:
    """``past`` and ``future`` as ``words`` (from :func:`tokens`) state them, against ``other``.

    Auxiliaries mark them ("was", "had", "did", "will", "shall", "used to"). A regular past
    ("deployed") marks the past only where ``other`` has the same verb not in ``-ed``
    ("deploy", "deploys", "deploying") and it is not a participle ("are deployed").
    """
    marks: set[str] = set()
    bases = {_stem_ed(w.removesuffix("ing").removesuffix("s")) for w in other if not w.endswith("ed")}
    for i, word in enumerate(words):
        if word in _PAST_AUXILIARIES or (word == "used" and words[i + 1 : i + 2] == ["to"]):
            marks.add("past")
        elif word in _FUTURE_AUXILIARIES:
            marks.add("future")
        elif (
            len(word) > 3
            and word.endswith("ed")
            and word.isalpha()
            and not _PARTICIPLE_AFTER.intersection(words[max(0, i - 2) : i])
            and (_stem_ed(word[:-2]) in bases or _stem_ed(word[:-1]) in bases)
        ):
            marks.add("past")
    return frozenset(marks)


def function_changes(a: list[str], b: list[str]) -> list[str]:
    """``class (x / y)`` for each class of function word where each text has a value the other
    lacks: "who (we / they)", "how many (all / some)", "direction (before / after)"."""
    found: list[str] = []
    for label, classes in _CLASSES:
        values_a = {classes[w] for w in a if w in classes}
        values_b = {classes[w] for w in b if w in classes}
        only_a, only_b = sorted(values_a - values_b), sorted(values_b - values_a)
        if label == "direction":
            pairs = [(x, y) for x in only_a for y in only_b if frozenset((x, y)) in _OPPOSITE_PAIRS]
            if pairs:
                found.append(f"{label} ({pairs[0][0]} / {pairs[0][1]})")
        elif only_a and only_b:
            found.append(f"{label} ({only_a[0]} / {only_b[0]})")
    return found
