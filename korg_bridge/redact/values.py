"""What a value is: a secret, or a reference that stands for one, or code.

A rule that finds ``NAME=value`` knows the name is secret-like; whether the
value is a secret is decided here. ``$VAR``, ``<your-token>``, ``***``,
``[redacted]``, ``YOUR_TOKEN``, ``getpass()``, ``settings.API_KEY``, an agent's
session UUID: none of these is a secret, and redacting them would only make a
ledger harder to read (and redaction not idempotent).

Also here: the lookahead that captures a value after its separator, quoted or
not, shared by every rule that reads values by their name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from korg_bridge.redact.names import CACHED_CHARS, is_secret_name, words

__all__ = [
    "FLAG_VALUE",
    "NOT_REDACTED",
    "PROSE_VALUE",
    "QUOTED",
    "REST_OF_LINE",
    "UNQUOTED",
    "UNQUOTED_NO_COLON",
    "Check",
    "Span",
    "is_reference",
    "is_session_number",
    "judge",
    "looks_like_prose_secret",
    "value",
    "value_span",
]

Span = tuple[int, int]
"""Where a secret is: ``text[start:end]``."""
Check = Callable[[str, re.Match[str]], Span | None]
"""Turns a rule's match into the secret's span, or None when the match holds no secret."""

_REFERENCE = re.compile(
    r"""
      \$.*                                  # $VAR, ${VAR}, $(cmd), ${{ secrets.X }}
    | %[A-Za-z_][A-Za-z0-9_]*%              # %VAR%
    | <[^<>\n]*>                            # <your-token>
    | \{\{.*\}\} | \#\{.*\}                 # {{ template }}, #{interp}
    | [*•xX#.]{3,} | …+                     # ***, xxxx, ...
    | \[[A-Za-z -]{0,20}\]                  # [redacted], [hidden]
    | (?i:redacted|null|none|nil|undefined|true|false|hidden|masked)
    | [A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+         # YOUR_API_KEY: the name of a variable
    | (?i:your|insert|replace)[-_ ].*       # your-token, insert_key_here
    """,
    re.VERBOSE | re.DOTALL,
)
"""Values that name or stand for a secret instead of holding one."""
_CODE_PATH = re.compile(r"[a-z_]{1,20}(?:\.[A-Za-z_$][\w$]*)+")
"""``settings.API_KEY``, ``process.env.DB_PASS``, ``self.token``: an unquoted value that is code."""
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_VARIABLE_NAME = re.compile(r"[a-z]+(?:_[a-z0-9]+)+|[a-z]+(?:[A-Z][a-z]+)+|[A-Z]+(?:_[A-Z0-9]+)+")
"""snake_case, camelCase or SCREAMING_SNAKE made of words: written by a person, unlike ``r91kzCB2p8``."""
_TYPE_WORDS = frozenset(
    {
        *("str", "int", "bytes", "bool", "float", "string", "number", "boolean", "String", "Optional"),
        *("SecretStr", "SecretBytes", "Any", "None", "list", "dict", "object", "Option", "Secret"),
    }
)
"""``password: str`` at the start of a line is a type annotation, not YAML."""
_YAML_STRUCTURE = re.compile(r"[{\[]|[|>][-+0-9]*$|[&*!]{1,2}[\w.-]*(?:\s|$)")
"""A YAML value that is a mapping, a list, a block (``|-``), an anchor, an alias or a tag."""
_SCHEME = re.compile(
    r"(?i:basic|bearer|token|digest|negotiate|ntlm|apikey|api-key|key|sso-key|otp|hmac|ssws|dpop"
    r"|aws4-hmac-sha256)[ \t]++"
)
"""An ``Authorization`` scheme: kept, so a reader still sees how the call authenticated."""


def is_reference(value: str) -> bool:
    value = value.strip()
    return not value or _REFERENCE.fullmatch(value) is not None


def is_code(value: str, name: str, spaced: bool) -> bool:
    """An unquoted value that is code passing a variable along.

    ``api_key=api_key``, ``password = new_password``, ``API_KEY = apiKeyValue``,
    ``token = self.token``: a name after a secret's name, or an attribute path
    (whose parts read as names, not as ``hvs.<random>``). After `` = `` (spaced,
    as code is written and a shell cannot), any compound name is a variable.
    """
    if _CODE_PATH.fullmatch(value):
        return not any(_looks_random(part) for part in value.split("."))
    if _IDENTIFIER.fullmatch(value):
        parts, named = words(value), words(name)
        if parts and named and parts[-1] == named[-1]:
            return True
        return _VARIABLE_NAME.fullmatch(value) is not None and (spaced or is_secret_name(value))
    return False


def _looks_random(word: str) -> bool:
    """Long, with upper case, lower case and digits: generated, not written by a person."""
    return (
        len(word) >= 16
        and any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() for c in word)
    )


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def is_session_number(name: str, value: str) -> bool:
    """An agent's or a process's session id (a UUID, a number) names a session; it grants nothing.

    Agent transcripts carry them everywhere (``"sessionId": "…"``, ``--session-id …``);
    a web session's cookie value is neither, so it is still redacted.
    """
    return "session" in name.lower() and (value.isdigit() or _UUID.fullmatch(value) is not None)


QUOTED = (
    r"\"(?P<dq>(?:[^\"\\\n]|\\.)*+)\"?"
    r"|'(?P<sq>[^'\n]*+)'?"
    r"|`(?P<bq>[^`\n]*+)`?"
    r"|\\\"(?P<eq>(?:[^\"\\\n]|\\(?!\"))*+)"
)
"""A quoted value (double, single, back quotes, or escaped JSON ``\\"…\\"``); a cut one runs to the line's end."""


NOT_REDACTED = r"(?![\"'`]?\[redacted\])"
"""A value that is already ``[redacted]`` is no candidate: a redacted text (a ledger read back,
the rescan of a changed line) then costs no Python call per secret."""


def value(unquoted: str) -> str:
    """A lookahead capturing the value after a separator: quoted, else a run of ``unquoted``."""
    return rf"{NOT_REDACTED}(?={QUOTED}|(?P<uq>{unquoted}))"


UNQUOTED = r"[^\s\"'`,;&|=()<>\[\]{}\\]*+"
"""An unquoted value in ``NAME=value``: stops at ``=`` and ``&`` so ``url=…?token=x`` still sees ``token``."""
UNQUOTED_NO_COLON = r"[^\s\"'`,;&|=:()<>\[\]{}\\]*+"
"""An unquoted value after ``"NAME":``: a JSON number or literal (``:`` ends it, so ``a:a:a:…`` stays linear)."""
REST_OF_LINE = r"(?:[^\r\n\"\\]|\\(?!n))*+"
"""The rest of a line (a literal ``\\n`` of escaped JSON ends it too)."""
FLAG_VALUE = r"(?!-)[^\s\"'`;&|()<>\\]++"


_CLAUSE_END = (
    r"(?=[.,;:!?)\]]|[ \t]*+(?:[\r\n]|$)|[ \t]++(?:and|but|or|so|for|on|in|to|at|with|if|until|when|then)\b)"
)
_PROSE_WORD = r"[^\s\"'`,;()<>\[\]{}]"
PROSE_VALUE = (
    rf"[0-9]{{4,128}}+{_CLAUSE_END}"
    rf"|(?={_PROSE_WORD}{{0,127}}?(?:[0-9!@#$%^&*+=~_\\/-]|[a-z][A-Z]))(?={_PROSE_WORD}{{0,127}}?[^\W\d_])"
    rf"{_PROSE_WORD}{{1,128}}+"
)
"""One word after "the password is": digits at the end of a clause ("is 4821.", not "is 12
characters"), or letters with a digit, a symbol or a capital inside. "The password is stored in
Vault" holds no such word, and the regex rejects it without a Python call per candidate."""
_LETTER = re.compile(r"[^\W\d_]")
_NUMERIC_SECRETS = frozenset({"pin", "pin code", "passcode", "password", "passwd"})


def looks_like_prose_secret(word: str, name: str) -> bool:
    """An unquoted word :data:`PROSE_VALUE` let through after "the NAME is": digits are a PIN or
    a password only; a path, a flag, a URL or a version ("pin: 3.11") is none."""
    if word.isdigit():
        return name in _NUMERIC_SECRETS
    return not (
        word.startswith(("/", "~", "./", "../", "-")) or "://" in word or _LETTER.search(word) is None
    )


def value_span(
    text: str, match: re.Match[str], name: str, *, line: bool = False, code: bool = False, eq: bool = False
) -> Span | None:
    """The span of the value captured by :func:`value` (or a bare ``uq`` group), None if no secret.

    ``code`` marks a place where an unquoted value may be code (``NAME = expr``,
    an object's ``name: expr,``), ``eq`` that the separator was ``=``, so a space
    before the value says it is code; ``line`` a ``NAME: value`` line, where YAML
    structure and type annotations are not values.
    """
    group = match.lastgroup or "uq"  # the value's group closes last
    start, end = match.span(group)
    spaced = eq and text[start - 1 : start] in (" ", "\t")
    verdict = judge(name, text[start:end], group == "uq", text[end : end + 1], line, code, spaced)
    return None if verdict is None else (start + verdict[0], start + verdict[1])


def judge(
    name: str, raw: str, unquoted: bool, after: str, line: bool, code: bool, spaced: bool
) -> Span | None:
    """Which part of a value named ``name`` is a secret (offsets into ``raw``), if any.

    A pure function of its arguments, cached for short values: repetitive text
    (a log, an adversarial input) repeats its name/value pairs, and each costs
    Python time.
    """
    decide = _cached_judge if len(raw) <= CACHED_CHARS else _judge
    return decide(name, raw, unquoted, after, line, code, spaced)


def _judge(
    name: str, raw: str, unquoted: bool, after: str, line: bool, code: bool, spaced: bool
) -> Span | None:
    start, end = 0, len(raw)
    code = code and unquoted
    if unquoted:
        end = len(raw.rstrip(" \t,;"))
        if code and after in ("(", "["):
            return None  # getpass(), os.environ["X"]: code, not a value
        if line:
            head = raw.strip()
            word = _IDENTIFIER.match(head)
            if _YAML_STRUCTURE.match(head) or (word is not None and word.group() in _TYPE_WORDS):
                return None
            if head.endswith((",", ";")) or "(" in head or "[" in head:
                return None  # a JavaScript object's `key: expr,` line or a call, not YAML
    value = raw[:end]
    if " " in value or "\t" in value:
        scheme = _SCHEME.match(value)
        if scheme and scheme.end() < len(value):
            start = scheme.end()
            value = value[start:]
    if is_reference(value) or (code and is_code(value.strip().rstrip("…"), name, spaced)):
        return None
    if value.startswith(("/", "~")) and name.lower().lstrip("$-") in ("pwd", "oldpwd"):
        return None  # the shell's working directory
    if is_session_number(name, value):
        return None
    return (start, end) if end > start else None


_cached_judge = functools.lru_cache(maxsize=4096)(_judge)
