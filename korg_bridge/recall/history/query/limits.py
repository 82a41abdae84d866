"""How much one korg-recall call may ask for, and the checks that say so.

Every argument can come from a model through the bridge, so each one that
reaches SQLite or a Python limit has a cap: a 1,500-word query once built a
``LIKE`` chain deeper than SQLite's 1,000-level expression limit, 600 agent
filters an ``OR`` chain as deep, and both surfaced as an internal error. The
caps sit in the schemas (``maxLength``, ``maxItems``: the bridge refuses before
anything runs) and are checked again here for what a schema cannot see
(distinct terms in a query, refs inside a comma-separated string, ledgers
from the environment). Each check raises a one-line
:class:`~korg_bridge.errors.UsageError` (exit 2) naming the limit; the
environment's ledgers a :class:`~korg_bridge.errors.ConfigError` (exit 3).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from korg_bridge.errors import ConfigError, UsageError
from korg_bridge.recall.history.query.fts import query_terms

__all__ = [
    "MAX_FILTERS",
    "MAX_FILTER_CHARS",
    "MAX_LEDGERS",
    "MAX_PATH_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "MAX_REFS",
    "MAX_TIME_CHARS",
    "check_query",
    "check_source_count",
    "split_refs",
]

MAX_QUERY_CHARS = 4000
"""A long pasted error message fits; a document does not."""
MAX_QUERY_TERMS = 100
"""Distinct words searched: each is an FTS5 phrase (keyword) or a ``LIKE`` (substring), and
SQLite's expression tree is at most 1,000 deep."""
MAX_FILTERS = 50
"""Values per filter (``tool_filter``, ``agent_filter``); an agent filter is two ``OR``-ed terms."""
MAX_FILTER_CHARS = 200
MAX_LEDGERS = 100
"""Ledger files or folders per call: each adds an ``OR``-ed path test to every query."""
MAX_PATH_CHARS = 4096
"""Linux's ``PATH_MAX``: a longer path cannot be opened anyway."""
MAX_REFS = 50
"""Refs per ``show`` call; their events and context are bounded again by the response cap."""
MAX_TIME_CHARS = 64
"""An ISO-8601 date-time with fractions and an offset is about 35 characters."""

_REF_SEPARATORS = re.compile(r"[\s,]+")


def check_query(query: str) -> None:
    """Refuse a query that is empty, too long, or has too many distinct terms to search.

    Raises:
        UsageError: the query is empty or blank (it would find nothing, and say only "no relevant
            matches"), over :data:`MAX_QUERY_CHARS` characters or :data:`MAX_QUERY_TERMS` distinct terms.
    """
    if not query.strip():
        raise UsageError(
            'query is empty: pass the words to look for, e.g. --query "postgres migration fails".'
        )
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(
            f"query is {len(query)} characters long; at most {MAX_QUERY_CHARS} are searched. "
            "Keep the distinctive words."
        )
    terms = len(query_terms(query, drop_stopwords=False))
    if terms > MAX_QUERY_TERMS:
        raise UsageError(
            f"query has {terms} distinct terms; at most {MAX_QUERY_TERMS} are searched. Keep the distinctive words."
        )


def check_source_count(count: int, origin: str) -> None:
    """Refuse more ledger files or folders than a query can test.

    ``origin`` is ``ledger`` for the argument, else the environment variable's name.

    Raises:
        UsageError: too many ``ledger`` arguments.
        ConfigError: too many entries in the environment variable.
    """
    if count <= MAX_LEDGERS:
        return
    if origin == "ledger":
        raise UsageError(
            f"{count} ledger paths given; at most {MAX_LEDGERS}. Pass their common folder instead."
        )
    raise ConfigError(
        f"{origin} lists {count} paths; at most {MAX_LEDGERS}. List their common folders instead."
    )


def split_refs(value: str | Sequence[str]) -> list[str]:
    """Return the refs in ``value``: one string or a list, each possibly comma- or space-separated.

    Duplicates are dropped, order kept.

    Raises:
        UsageError: no ref at all, or more than :data:`MAX_REFS`.
    """
    items = [value] if isinstance(value, str) else list(value)
    refs = [ref for item in items for ref in _REF_SEPARATORS.split(item) if ref]
    refs = list(dict.fromkeys(refs))
    if not refs:
        raise UsageError("no ref given: pass refs from a recall result, such as e42 or e42,e43.")
    if len(refs) > MAX_REFS:
        raise UsageError(
            f"{len(refs)} refs given; at most {MAX_REFS} per call. Split them over several calls."
        )
    return refs
