"""The rules that find secrets in text: formats by their shape, values by their name.

Each rule is a compiled pattern, the substrings one of which a text must hold
for the rule to run at all (a cheap ``in`` before any regex), and a check that
turns a match into the secret's span. Every pattern is linear: it starts at a
literal (``re`` then searches for it fast) or checks a token boundary right after
its first character, and repeats only with possessive or bounded quantifiers;
the comments say where a pattern needed more care than that.
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
from collections.abc import Iterator
from typing import NamedTuple

from korg_bridge.redact.names import is_secret_name, is_secret_text_name
from korg_bridge.redact.values import (
    FLAG_VALUE,
    NOT_REDACTED,
    PROSE_VALUE,
    QUOTED,
    REST_OF_LINE,
    UNQUOTED,
    UNQUOTED_NO_COLON,
    Check,
    Span,
    is_reference,
    judge,
    looks_like_prose_secret,
    value,
    value_span,
)

__all__ = ["RULES", "Rule"]


class _Lazy:
    """A pattern compiled the first time a text holds one of its rule's needles.

    Compiling every rule costs about 30 ms, paid by each fresh process -- and korg-recall
    is one per tool call -- while a typical text reaches few rules past their needles.
    """

    __slots__ = ("_compiled", "_flags", "_source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled

    def finditer(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text, pos, endpos)


def _lazy(source: str, flags: int = 0) -> _Lazy:
    return _Lazy(source, flags)


class Rule(NamedTuple):
    """One way of finding secrets; ``needles`` (one of which must occur) skip it cheaply."""

    label: str
    pattern: _Lazy
    needles: tuple[str, ...] = ()
    check: Check | None = None


def _whole_or_s(_text: str, match: re.Match[str]) -> Span | None:
    return match.span("s") if "s" in match.re.groupindex else match.span()


def _checked_reference(_text: str, match: re.Match[str]) -> Span | None:
    """The ``s`` group, unless it is a reference (``$VAR``, ``[redacted]``)."""
    found = match.group("s")
    return None if found is None or is_reference(found.strip("\"'")) else match.span("s")


def _vendor(label: str, prefix: str, body: str, check: Check = _whole_or_s) -> Rule:
    """A secret by its shape: the literal ``prefix`` at the start of a token, then ``body``.

    The pattern starts with the literal, so ``re`` finds candidates with a fast
    substring search; the boundary is checked right after it (a lookbehind over
    the prefix), before the body is scanned, so ``task-…`` is not an ``sk-…`` key
    and ``sk-sk-sk-…`` is not scanned once per ``sk-``.
    """
    literal = re.escape(prefix)
    return Rule(label, _lazy(rf"{literal}(?<![A-Za-z0-9_\]-]{literal}){body}"), (prefix,), check)


_E = r"(?![A-Za-z0-9_\[-])"
_VENDORS = [
    _vendor("anthropic", "sk-ant-", r"[A-Za-z0-9_-]{20,}+"),
    _vendor("openai", "sk-", r"(?=[A-Za-z_-]*+[0-9])[A-Za-z0-9_-]{20,}+"),
    _vendor("github", "gh", r"[pousr]_[A-Za-z0-9]{30,}+" + _E),
    _vendor("github-fine-grained", "github_pat_", r"[A-Za-z0-9_]{22,}+"),
    _vendor("gitlab", "gl", r"(?:pat|ptt|dt|rt|cbt|soat|ft|imt|agent|oas|ffct)-[A-Za-z0-9_-]{20,}+"),
    _vendor("grafana", "gl", r"(?:sa|c)_[A-Za-z0-9+/_=]{32,}+"),
    _vendor("huggingface", "hf_", r"(?=[a-z0-9]*+[A-Z])[A-Za-z0-9]{30,}+" + _E),
    _vendor("huggingface-org", "api_org_", r"[A-Za-z0-9]{30,}+" + _E),
    _vendor("npm", "npm_", r"[A-Za-z0-9]{36}" + _E),
    _vendor("sendgrid", "SG.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _E),
    _vendor("slack", "xox", r"(?:e\.xox)?[abposre]-[A-Za-z0-9-]{10,}+"),
    _vendor("slack-app", "xapp-", r"[0-9]-[A-Za-z0-9-]{10,}+"),
    _vendor(
        "slack-webhook", "hooks.slack.com/", r"(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]{20,}+)"
    ),
    _vendor(
        "discord-webhook", "discord", r"(?:app)?\.com/api/webhooks/(?P<s>[0-9]{5,30}+/[A-Za-z0-9_-]{20,}+)"
    ),
    _vendor("stripe-secret", "sk_", r"(?:live|test)_[0-9A-Za-z]{10,}+"),
    _vendor("stripe-restricted", "rk_", r"(?:live|test)_[0-9A-Za-z]{10,}+"),
    _vendor("stripe-webhook", "whsec_", r"[A-Za-z0-9+/=]{20,}+"),
    _vendor("google-api-key", "AIza", r"[0-9A-Za-z_-]{35}" + _E),
    _vendor("google-oauth-secret", "GOCSPX-", r"[A-Za-z0-9_-]{20,}+"),
    _vendor("google-oauth-token", "ya29.", r"[0-9A-Za-z_-]{30,}+"),
    _vendor("pypi", "pypi-AgE", r"[A-Za-z0-9_-]{50,}+"),
    _vendor("docker", "dckr_pat_", r"[A-Za-z0-9_-]{20,}+"),
    _vendor("digitalocean", "do", r"[opr]_v1_[a-f0-9]{64}" + _E),
    _vendor("shopify", "shp", r"(?:at|ss|ca|pa)_[a-fA-F0-9]{32}" + _E),
    _vendor("twilio", "SK", r"[0-9a-fA-F]{32}" + _E),
    _vendor("age", "AGE-SECRET-KEY-1", r"[0-9A-Z]{50,}+"),
    _vendor("linear", "lin_api_", r"[A-Za-z0-9]{30,}+"),
    _vendor("atlassian", "ATATT3", r"[A-Za-z0-9_=-]{50,}+"),
    _vendor("supabase", "sbp_", r"[a-f0-9]{40}" + _E),
    _vendor("databricks", "dapi", r"[a-f0-9]{32}" + _E),
    _vendor("postman", "PMAK-", r"[a-f0-9]{24}-[a-f0-9]{34}" + _E),
    _vendor("newrelic", "NRAK-", r"[A-Z0-9]{27}" + _E),
    _vendor("sentry", "sntry", r"[su]_[A-Za-z0-9+/=_-]{40,}+"),
    _vendor("groq", "gsk_", r"[A-Za-z0-9]{40,}+"),
    _vendor("xai", "xai-", r"[A-Za-z0-9]{60,}+"),
    _vendor("replicate", "r8_", r"[A-Za-z0-9]{30,}+"),
    _vendor("perplexity", "pplx-", r"[A-Za-z0-9]{40,}+"),
    _vendor("notion", "ntn_", r"[A-Za-z0-9]{40,}+"),
    _vendor("square", "sq0", r"(?:atp|csp)-[A-Za-z0-9_-]{22,}+"),
    _vendor("jwt", "eyJ", r"[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]*+"),
    _vendor("azure-account-key", "AccountKey=", r"(?P<s>[A-Za-z0-9+/]{20,}+={0,2})"),
    _vendor("azure-sas", "SharedAccessSignature", r"[ =](?P<s>[^;\s\"'<>]{10,}+)", _checked_reference),
    _vendor("azure-sas-sig", "sig=", r"(?<=[?&]sig=)(?P<s>[A-Za-z0-9%+/=]{10,}+)"),
    Rule(
        "aws-access-key-id",
        _lazy(
            r"A(?<![A-Za-z0-9\]]A)(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|PKA|ROA|SCA)[A-Z0-9]{16}(?![A-Za-z0-9\[])"
        ),
        ("A",),
    ),
    _vendor("vault", "hv", r"[sbr]\.[A-Za-z0-9_-]{24,}+"),
    Rule(
        "telegram-bot",
        _lazy(r"(?:(?<=/bot)|(?<![\w:/\]-]))[0-9]{8,10}+:AA[A-Za-z0-9_-]{33}" + _E),
        (":AA",),
    ),
    Rule(
        "discord-bot",
        _lazy(r"[MNO](?<![\w.\]-][MNO])[A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}" + _E),
        (".",),
    ),
]


def _basic(_text: str, match: re.Match[str]) -> Span | None:
    """``Basic`` is followed by ``user:password`` in base64; anything else is a word."""
    found = match.group("s")
    if len(found) > 1024:
        return None
    try:
        decoded = base64.b64decode(found + "=" * (-len(found) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return match.span("s") if ":" in decoded and decoded.isprintable() else None


def _assignment(text: str, match: re.Match[str]) -> Span | None:
    name = match.group("n")
    if not is_secret_text_name(name):
        return None
    return value_span(text, match, name, code=True, eq=match.group("assign") is not None)


def _line(text: str, match: re.Match[str]) -> Span | None:
    name = match.group("n")
    return value_span(text, match, name, line=True, code=True) if is_secret_text_name(name) else None


def _header(text: str, match: re.Match[str]) -> Span | None:
    name = match.group("n")
    return value_span(text, match, name) if is_secret_name(name) else None


def _auth_header(text: str, match: re.Match[str]) -> Span | None:
    return value_span(text, match, "authorization")


def _flag(text: str, match: re.Match[str]) -> Span | None:
    name = match.group("n") or match.group("n1")
    return value_span(text, match, name) if is_secret_text_name(name) else None


def _at_token_start(*words: str, boundary: str = r"[\w.\]-]") -> str:
    """``words`` as a branch of literal-first alternatives, each at the start of a token.

    ``re`` skips to candidate positions by the first characters of a branch whose
    alternatives all start with a literal; a lookbehind *before* the word would
    make it try every position. So the boundary is checked after the first character.
    """
    return (
        "(?:"
        + "|".join(rf"{re.escape(w[0])}(?<!{boundary}{re.escape(w[0])}){re.escape(w[1:])}" for w in words)
        + ")"
    )


def _command(commands: tuple[str, ...], flag: str) -> _Lazy:
    """``flag`` within the first 20 arguments of one of ``commands`` (each argument read once)."""
    return _lazy(
        _at_token_start(*commands)
        + rf"(?:[ \t]++[^\s|;&]++){{0,20}}?[ \t]++{flag}"
        + r"(?P<s>\"[^\"\n]*+\"|'[^'\n]*+'|[^\s'\"|;&]++)"
    )


_PROSE_NAMES = _at_token_start(
    *(form for word in ("password", "passwd", "passphrase", "passcode", "secret", "token") for form in
      (word, word.capitalize(), word.upper())),
    *("pin code", "PIN code", "Pin code", "pin", "PIN", "Pin"),
    *("api key", "API key", "Api key", "API Key", "API KEY", "secret key", "Secret key", "Secret Key"),
    *("SECRET KEY", "access key", "Access key", "Access Key", "ACCESS KEY"),
    boundary=r"[\w\]-]",
)  # fmt: skip
"""The names in their three spellings, each a literal: ``re`` skips to a candidate by its first
letter instead of trying a case-blind alternation at every position."""
_PREVIOUS_WORD = re.compile(r"([A-Za-z][\w-]{0,30})[ \t]+$")
_PROSE_NEEDLES = ("ass", "ASS", "pin", "PIN", "Pin", "key", "Key", "KEY", "ecret", "ECRET", "oken", "OKEN")
"""Each is a scan of the whole text when none occurs: few and short."""
_CLOSING = {"dq": '"', "sq": "'", "bq": "`"}
_QUALIFIED = frozenset({"token", "api key", "secret key", "access key", "secret"})
"""Names a word before can make plain: "the page token is 2", "the sort key is created_at"."""


def _prose(text: str, match: re.Match[str]) -> Span | None:
    """ "the staging password is hunter2", "PIN: 4821", "the API key was `k3y`": a name in
    words, then the value -- quoted, or one word that a person would not write as prose."""
    name = match.group("n").lower()
    if " " in name or "\t" in name:
        name = " ".join(name.split())
    if name in _QUALIFIED:
        before = _PREVIOUS_WORD.search(text, max(0, match.start() - 32), match.start())
        if before is not None and not is_secret_name(f"{before.group(1)}_{name.replace(' ', '_')}"):
            return None
    group = match.lastgroup or "uq"
    if group != "uq":
        close = _CLOSING.get(group)
        if close is not None and text[match.end(group) : match.end(group) + 1] != close:
            return None  # a quote the line never closes: Markdown code, not a quoted password
        return value_span(text, match, name.replace(" ", "_"))
    start, end = match.span("uq")
    word = text[start:end].rstrip(".!?:")
    if not looks_like_prose_secret(word, name):
        return None
    after = text[start + len(word) : start + len(word) + 1]
    found = judge(name.replace(" ", "_"), word, True, after, True, True, False)  # type words are code
    return None if found is None else (start + found[0], start + found[1])


_SECRETISH = (
    r"(?=[\w.$-]{0,63}?(?=[AaBbCcJjKkMmPpSsTt])(?i:auth|bearer|jwt|cookie|cred|pass|pw|secret|key|token|session"
    r"|mnemonic))"
)
"""A name holds one of the words :func:`is_secret_name` looks for: checked in ``re`` (cheap) before
the name reaches Python (not cheap), so ``a:a:a:…`` costs no call per ``a``."""
_NAME = _SECRETISH + r"(?P<n>\$?[A-Za-z_][\w.-]{0,63}+)"
_ASSIGN = r"(?::=|=>|=(?![=~>])|:(?![:/=]))"
RULES: list[Rule] = [
    Rule(
        "private-key-block",
        # The body runs to the first `-----`, which must start the END line; a block cut
        # short (a preview, a truncated log) has no END, and its body is the lines that
        # look like key material: base64 or `Proc-Type: …` headers, each alone on its
        # line (real or JSON-escaped newlines), so prose after the cut stays. Either way
        # every character is read a bounded number of times, even with repeated BEGINs.
        _lazy(
            r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:(?:[^-]|-(?!----))*+-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:(?:\r?\n|(?:\\r)?\\n)[ \t]*+(?:[A-Za-z0-9+/=]++|[A-Za-z][\w-]*+:[^\r\n\\]*+)?[ \t]*+"
            r"(?=[\r\n]|\\[rn]|\Z))*+)"
        ),
        ("PRIVATE KEY",),
    ),
    *_VENDORS,
    Rule(
        "url-password",
        # Greedy to the last `@` before the host (a password may hold `@`), bounded.
        _lazy(
            r"(?<![A-Za-z0-9+.\]-])[A-Za-z][A-Za-z0-9+.-]{0,31}+://[^\s:/?#@\"'<>]{0,256}+:"
            r"(?P<s>[^\s/?#\"'<>]{1,512})@(?=[A-Za-z0-9\[_%-])"
        ),
        ("://",),
        _checked_reference,
    ),
    Rule(
        "bearer",
        # A token has a digit: "Bearer authentication" in prose is not a secret.
        _lazy(
            _at_token_start("Bearer", "bearer", "BEARER", boundary=r"[\w\]-]")
            + r"[ \t]++(?=[A-Za-z._~+/-]*+[0-9])(?P<s>[A-Za-z0-9._~+/-]{12,}+=*+)"
        ),
        ("earer", "EARER"),
        _whole_or_s,
    ),
    Rule(
        "basic",
        _lazy(
            _at_token_start("Basic", "basic", "BASIC", boundary=r"[\w\]-]")
            + r"[ \t]++(?P<s>[A-Za-z0-9+/]{6,}+={0,2})(?![\w+/=\[-])"
        ),
        ("asic", "ASIC"),
        _basic,
    ),
    Rule(
        "aws-secret-access-key",
        # Also with a space (`aws configure set aws_secret_access_key …`), which no name rule reads.
        _lazy(
            r"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|SecretAccessKey|secretAccessKey|aws_secret_key"
            r"|AWS_SECRET_KEY)[\"']?[ \t]*+(?:[:=][ \t]*+)?[\"']?(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+\[])"
        ),
        ("ecret", "ECRET"),
        _whole_or_s,
    ),
    Rule(
        "assignment",
        # NAME=value, --NAME=value, $NAME = "value", NAME := value, 'NAME' => 'value',
        # "NAME": value (JSON, Python dicts), NAME: "value" (JavaScript objects). The lookahead
        # finds the separator first: most words are followed by none and cost one scan.
        _lazy(
            r"(?<![\w.$\]-])(?:-{1,2})?(?P<nq>\\?[\"'])?"
            r"(?=\$?[\w.-]{1,64}+(?(nq)(?P=nq))[ \t]{0,8}+"
            + _ASSIGN
            + ")"
            + _NAME
            + r"(?(nq)(?P=nq))[ \t]{0,8}+"
            # `name: value` mid-line is prose unless the name or the value is quoted.
            r"(?:(?P<assign>:=|=>|=)|:(?(nq)|(?=[ \t]{0,8}+[\"'`\\])))[ \t]{0,8}+"
            + NOT_REDACTED
            + rf"(?={QUOTED}|(?P<uq>(?(assign){UNQUOTED}|{UNQUOTED_NO_COLON})))"
        ),
        ("=", ":"),
        _assignment,
    ),
    Rule(
        "line",
        # NAME: value at the start of a line: YAML, HTTP headers (also `> ` of curl -v), .env.
        _lazy(
            r"(?:(?m:^)|(?<=\\n))[ \t]*+(?:[-*>+<#][ \t]*+)?(?:export[ \t]++)?(?P<nq>[\"']?)"
            + _NAME
            + r"(?P=nq)[ \t]*+:[ \t]*+"
            + value(REST_OF_LINE)
        ),
        (":",),
        _line,
    ),
    Rule(
        "header",
        # -H "X-Api-Key: …" (curl, httpie's wget's --header).
        _lazy(
            r"-(?<![\w\]-]-)(?:H|-header)[ \t]*+=?[ \t]*+[\"']?"
            r"(?P<n>[A-Za-z][\w-]{0,63}+)[ \t]*+:[ \t]*+"
            + NOT_REDACTED
            + r"(?=(?P<uq>(?:[^\r\n\"':\\]|\\(?!n))*+))"
        ),
        ("-H", "--header"),
        _header,
    ),
    Rule(
        "auth-header",
        # Authorization and Cookie headers anywhere in a line (prose, logs, code).
        _lazy(
            _at_token_start(
                *("Authorization", "authorization", "AUTHORIZATION", "Proxy-Authorization"),
                *("proxy-authorization", "Cookie", "cookie", "COOKIE", "Set-Cookie", "set-cookie"),
                boundary=r"[\w\]-]",
            )
            + r"[ \t]*+:[ \t]*+"
            + NOT_REDACTED
            + r"(?=(?P<uq>(?:[^\r\n\"':\\]|\\(?!n))*+))"
        ),
        ("uthorization", "UTHORIZATION", "ookie", "OOKIE"),
        _auth_header,
    ),
    Rule(
        "flag",
        # --NAME value, and the one-dash spellings of keytool and friends (-storepass x); a
        # one-dash flag is otherwise a letter with its value attached (-psecret, -p 8080).
        _lazy(
            r"-(?<![\w\]-]-)(?:-"
            + _SECRETISH
            + r"(?P<n>[A-Za-z][\w-]{0,63}+)|(?P<n1>(?:src|dest)?(?:store|key)pass"
            r"|password|passwd|passphrase|token|secret|apikey))[ \t]++" + value(FLAG_VALUE)
        ),
        ("-",),
        _flag,
    ),
    Rule(
        "mysql-password",
        _command(
            (
                "mysql",
                "mysqldump",
                "mysqladmin",
                "mysqlimport",
                "mysqlshow",
                "mysqlcheck",
                "mariadb",
                "mariadb-dump",
                "mariadb-admin",
            ),
            "-p",
        ),
        ("mysql", "mariadb"),
        _checked_reference,
    ),
    Rule("sshpass", _command(("sshpass",), r"-p[ \t]*+"), ("sshpass",), _checked_reference),
    Rule("redis-cli", _command(("redis-cli",), r"(?:-a|--pass)[ \t]++"), ("redis-cli",), _checked_reference),
    Rule(
        "mongo-password",
        _command(
            ("mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport"), r"-p[ \t]++(?!-)"
        ),
        ("mongo",),
        _checked_reference,
    ),
    Rule(
        "http-basic-user",
        _command(
            ("curl", "http", "https", "xh", "wget"),
            r"(?:-u|--user|-a|--auth)(?:[ \t]++|=)?[\"']?[^\s:'\"]{0,256}+:",
        ),
        ("curl", "http", "xh", "wget"),
        _checked_reference,
    ),
    Rule(
        "openssl-pass",
        _lazy(r"-pass(?:in|out)?[ \t]++pass:(?P<s>\S++)"),
        ("pass:",),
        _checked_reference,
    ),
    Rule(
        "netrc",
        _lazy(r"login(?<![\w\]-]login)[ \t]++\S{1,256}+[ \t]++password[ \t]++(?P<s>\S{1,512}+)"),
        ("login",),
        _checked_reference,
    ),
    Rule(
        "prose",
        # "the password is X", "API key: X", "the PIN for the door was 4821", mid-line, where the
        # line and assignment rules read no value: a name in words, "is"/"was"/":", one value.
        _lazy(
            rf"(?P<n>{_PROSE_NAMES})\b"
            r"(?:[ \t]++(?i:for|of|to|on)[ \t]++[^\r\n.,;:!?\"'`=]{1,40}?)?"
            r"(?:[ \t]++(?i:is|was|are|were)(?:[ \t]++(?i:now|still|set[ \t]to|just|currently))?[ \t]++"
            r"|[ \t]*+(?P<colon>:)[ \t]*+)"
            # After a colon only an unquoted word: a quoted one is the assignment rule's.
            + NOT_REDACTED
            + rf"(?=(?(colon)(?!)|(?:{QUOTED}))|(?P<uq>{PROSE_VALUE}))"
        ),
        _PROSE_NEEDLES,
        _prose,
    ),
    Rule(
        "netrc-line",
        _lazy(r"(?m:^)[ \t]*+password[ \t]++(?P<s>\S{1,512}+)[ \t]*+$", re.MULTILINE),
        ("password",),
        _checked_reference,
    ),
]
