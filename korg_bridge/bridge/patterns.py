"""JSON Schema ``pattern``\\ s on regular-expression engines that cannot hang the bridge.

A binary's schema supplies the pattern and the agent supplies the text, so
both are untrusted. Python's ``re`` backtracks: ``^(a+)+$`` against thirty
``a``\\ s and a ``!`` runs for minutes, holding the GIL, so no other request is
answered meanwhile and no thread can stop it. Hence two engines:

* **RE2** (``google-re2``, Google's maintained binding) for every pattern it
  accepts: matching is linear in the text, whatever the pattern.
* **mrab-regex** (``regex``) for the rest - lookaround, backreferences,
  possessive quantifiers and other syntax RE2 refuses. It is a backtracker
  too, but every search carries a ``timeout`` and runs with
  ``concurrent=True``, which releases the GIL, so a pathological pattern costs
  one worker thread for a bounded time and blocks nobody.

Why not one of them: RE2 alone would refuse real schemas that use a
lookahead, and ``regex`` alone would burn a core for the whole time limit on
every pathological call that RE2 answers in microseconds.

JSON Schema patterns are ECMA-262 regular expressions; what this module
translates is kept minimal:

* ``\\uXXXX`` becomes ``\\x{XXXX}`` for RE2 (``regex`` reads it natively).
* ``$`` outside a character class means the end of the text, as in ECMA-262.
  RE2 already reads it so; for ``regex`` it becomes ``\\Z``, because Python's
  ``$`` also matches before a final newline.

What differs from Python's ``re`` (which jsonschema used before): under RE2
``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII-only (``\\d`` and ``\\w`` as in
ECMA-262; ECMA-262's ``\\s`` also covers Unicode spaces); ``regex`` keeps
Python's Unicode classes. Counted repetitions are bounded at compile time:
RE2 refuses a count (or a product of nested counts) above 1000, and
``regex`` expands them while compiling, so beyond :data:`MAX_REPEAT` a
pattern is refused outright.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import re2
import regex

from korg_bridge.errors import DocumentError

RE2_MAX_REPEAT = 1000
"""RE2's own bound on a counted repetition (and on nested counts multiplied)."""

MAX_REPEAT = 10_000
"""Largest product of nested counted repetitions the fallback engine is given:
``regex`` expands them when compiling, so ``(a{1000}){1000}`` costs ~300 MB and
a second, while 10,000 stays within milliseconds and ~20 MB."""

_QUANTIFIER = re.compile(r"\{([0-9]+)(?:,([0-9]*))?\}")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_MULTILINE_FLAG = re.compile(r"\(\?[a-zA-Z]*m")


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.never_capture = True  # only "does it match" is asked
    return options


_RE2_OPTIONS = _re2_options()


@dataclass(frozen=True, slots=True)
class _Translated:
    for_re2: str
    for_regex: str
    repeat: int
    """The largest product of nested counted repetitions."""


def _translate(source: str) -> _Translated:
    """One pass over the pattern: the two engines' spellings and the repeat product."""
    re2_out: list[str] = []
    regex_out: list[str] = []
    keep_dollar = _MULTILINE_FLAG.search(source) is not None  # (?m): "$" is per line on purpose
    # Per open group: the largest repeat product inside it so far.
    stack = [1]
    last_group = 0  # the product of the group that just closed, for a quantifier after ")"
    in_class = False
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\" and i + 1 < n:
            nxt = source[i + 1]
            if nxt == "u" and _HEX4.fullmatch(source, i + 2, i + 6):
                re2_out.append(f"\\x{{{source[i + 2 : i + 6]}}}")
                regex_out.append(source[i : i + 6])
                i += 6
            else:
                re2_out.append(source[i : i + 2])
                regex_out.append(source[i : i + 2])
                i += 2
            last_group = 0
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            # A "]" right after "[" or "[^" is a literal in both engines.
            j = i + 1 + (source[i + 1 : i + 2] == "^")
            if source[j : j + 1] == "]":
                re2_out.append(source[i : j + 1])
                regex_out.append(source[i : j + 1])
                i = j + 1
                continue
        elif c == "(":
            stack.append(1)
        elif c == ")" and len(stack) > 1:
            last_group = stack.pop()
            stack[-1] = max(stack[-1], last_group)
            re2_out.append(c)
            regex_out.append(c)
            i += 1
            continue
        elif c == "{" and (m := _QUANTIFIER.match(source, i)):
            count = max(int(m.group(1)), int(m.group(2) or 0))
            stack[-1] = max(stack[-1], max(last_group, 1) * count)
            re2_out.append(m.group(0))
            regex_out.append(m.group(0))
            i = m.end()
            last_group = 0
            continue
        elif c == "$" and not keep_dollar:
            re2_out.append(c)
            regex_out.append("\\Z")
            i += 1
            last_group = 0
            continue
        re2_out.append(c)
        regex_out.append(c)
        last_group = 0
        i += 1
    return _Translated("".join(re2_out), "".join(regex_out), max(stack))


class Pattern:
    """A compiled schema pattern; :meth:`search` never runs unbounded."""

    __slots__ = ("_re2", "_regex", "engine", "source")

    def __init__(self, source: str, engine: str, compiled: Any) -> None:
        self.source = source
        self.engine = engine
        self._re2 = compiled if engine == "re2" else None
        self._regex = compiled if engine == "regex" else None

    def search(self, text: str, timeout: float) -> bool:
        """Whether the pattern matches anywhere in ``text`` (JSON Schema's unanchored search).

        Raises:
            TimeoutError: the backtracking engine did not finish within
                ``timeout`` seconds (RE2 needs no limit: it is linear).
        """
        if self._re2 is not None:
            try:
                return self._re2.search(text) is not None
            except UnicodeEncodeError:
                # A lone surrogate (JSON allows "\ud800") cannot be UTF-8 for RE2.
                clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
                return self._re2.search(clean) is not None
        if timeout <= 0:
            raise TimeoutError(f"no time left to match {self.source!r}")
        compiled: Any = self._regex
        return compiled.search(text, timeout=timeout, concurrent=True) is not None

    def __repr__(self) -> str:
        return f"Pattern({self.source!r}, engine={self.engine!r})"


def _compile(source: str) -> Pattern:
    translated = _translate(source)
    if translated.repeat <= RE2_MAX_REPEAT:
        try:
            return Pattern(source, "re2", re2.compile(translated.for_re2, _RE2_OPTIONS))
        except (re2.error, UnicodeEncodeError, ValueError, TypeError):
            pass  # syntax RE2 does not support: the fallback decides
    if translated.repeat > MAX_REPEAT:
        raise DocumentError(
            f"pattern {short(source)} repeats {translated.repeat:,} times when its counted "
            f"repetitions are multiplied; at most {MAX_REPEAT:,} are supported. "
            "Use minLength/maxLength for lengths."
        )
    try:
        compiled = regex.compile(translated.for_regex, regex.V0)
    except (regex.error, RecursionError, OverflowError, ValueError, MemoryError) as exc:
        raise DocumentError(f"pattern {short(source)} is not a valid regular expression: {exc}") from exc
    return Pattern(source, "regex", compiled)


@functools.lru_cache(maxsize=4096)
def compile_pattern(source: str) -> Pattern:
    """The compiled form of a schema's pattern, once per distinct source.

    Raises:
        DocumentError: neither engine accepts the pattern, or it repeats too much.
    """
    return _compile(source)


def check_pattern(source: object) -> bool:
    """``format: "regex"``: whether a value is a pattern we could use (non-strings pass).

    Not cached, so callers cannot fill memory with distinct compiled patterns.

    Raises:
        DocumentError: it is not (the format checker turns this into a violation).
    """
    if isinstance(source, str):
        _compile(source)
    return True


def short(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
