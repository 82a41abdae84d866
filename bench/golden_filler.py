"""Filler for the golden set's long targets: where a "deep" query's answer sits inside a long event.

A golden target with ``"long": {"style": …, "before": N, "after": M}`` is
written with N lines (paragraphs, for prose) of generated filler before its
own text or output and M after, so that its answer lies deep inside a long
tool result or reply, as in real transcripts. The filler is drawn from a
random generator seeded by the target's id, so ``--make-golden`` writes the
same bytes every time, and from vocabulary that none of the deep queries
uses.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["STYLES", "expand"]

_COMPONENTS = (
    "invoice", "session_store", "webhook", "user_profile", "scheduler_cron", "exporter", "pagination",
    "feature_flags", "audit_log", "notifications", "csv_import", "image_resizer", "queue_consumer",
    "search_suggest", "geo_lookup", "report_builder", "avatar_upload", "email_digest",
)  # fmt: skip
_VERBS = ("returns_empty", "handles_unicode", "paginates", "retries", "rejects_bad_input", "sorts_results",
          "caches_hits", "logs_request", "validates_schema", "merges_pages")  # fmt: skip
_PROSE = (
    "I read through the {c} module to see how its handlers are wired up.",
    "The {c} tests pass locally, and the linter reports nothing new in that area.",
    "Most of the time in the {c} path goes to JSON encoding, which is fine for now.",
    "I also looked at how {c} logs its requests; the format matches the rest of the service.",
    "There is some duplication between {c} and {d}, but merging them is out of scope here.",
    "The documentation for {c} was a little out of date, so I refreshed the examples.",
    "Next I checked the {d} integration, which only reads from {c} and never writes.",
    "The error messages in {c} now name the field that was wrong.",
    "I kept the public interface of {d} unchanged so that callers need no edits.",
    "A quick profile of {d} showed nothing unusual under the usual load.",
    "The {c} changes are covered by three new unit tests.",
    "For {d}, the configuration stays where it was; only the defaults moved.",
)
_YAML_KEYS = (
    "enabled",
    "timeout_ms",
    "workers",
    "log_level",
    "region",
    "bucket",
    "batch",
    "ttl_s",
    "endpoint",
)
_GREP_NOTES = ("handle empty input", "log the request id", "use the shared client", "split this function",
               "add a unit test", "move to settings", "remove after the migration", "document the flags")  # fmt: skip
_PACKAGES = (
    "left-pad",
    "request",
    "querystring",
    "har-validator",
    "uuid",
    "glob",
    "inflight",
    "rimraf",
    "svgo",
)
_COLUMNS = ("note TEXT", "archived BOOLEAN DEFAULT false", "region TEXT", "updated_by INTEGER", "flags JSONB")


def _pytest(rng: random.Random) -> str:
    component = rng.choice(_COMPONENTS)
    return (
        f"tests/test_{component}.py::test_{component}_{rng.choice(_VERBS)} PASSED [{rng.randint(1, 99):3d}%]"
    )


def _log(rng: random.Random) -> str:
    moment = f"2026-03-0{rng.randint(1, 9)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    return f"{moment} INFO {rng.choice(_COMPONENTS)}: processed batch {rng.randint(1, 9999)} ({rng.randint(2, 900)} ms)"


def _prose(rng: random.Random) -> str:
    sentences = [
        rng.choice(_PROSE).format(c=rng.choice(_COMPONENTS), d=rng.choice(_COMPONENTS)) for _ in range(3)
    ]
    return " ".join(sentences)


def _yaml(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return f"{rng.choice(_COMPONENTS)}:"
    return f"  {rng.choice(_YAML_KEYS)}: {rng.choice(('true', 'false', str(rng.randint(1, 5000)), 'eu-central-1'))}"


def _grep(rng: random.Random) -> str:
    component = rng.choice(_COMPONENTS)
    return f"src/{component}/{rng.choice(_COMPONENTS)}.py:{rng.randint(1, 900)}: # FIXME: {rng.choice(_GREP_NOTES)}"


def _cargo(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return f"   Compiling {rng.choice(_COMPONENTS).replace('_', '-')} v0.{rng.randint(1, 30)}.{rng.randint(0, 9)}"
    return f"warning: unused variable: `{rng.choice(_COMPONENTS)}`"


def _npm(rng: random.Random) -> str:
    package = rng.choice(_PACKAGES)
    return f"npm WARN deprecated {package}@{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}: no longer maintained"


def _gotest(rng: random.Random) -> str:
    component = rng.choice(_COMPONENTS)
    return f"ok  \tgithub.com/acme/platform/internal/{component}\t0.{rng.randint(1, 999):03d}s"


def _sql(rng: random.Random) -> str:
    return f"ALTER TABLE {rng.choice(_COMPONENTS)}s ADD COLUMN {rng.choice(_COLUMNS)};"


STYLES: dict[str, Callable[[random.Random], str]] = {
    "pytest": _pytest,
    "log": _log,
    "prose": _prose,
    "yaml": _yaml,
    "grep": _grep,
    "cargo": _cargo,
    "npm": _npm,
    "gotest": _gotest,
    "sql": _sql,
}


def expand(target_id: str, core: str, long: dict[str, object], seed: int) -> str:
    """``core`` with the filler ``long`` asks for around it (lines, or paragraphs for prose)."""
    style = str(long["style"])
    make = STYLES[style]
    rng = random.Random(f"{seed}:{target_id}")
    before = [make(rng) for _ in range(int(str(long.get("before", 0))))]
    after = [make(rng) for _ in range(int(str(long.get("after", 0))))]
    joiner = "\n\n" if style == "prose" else "\n"
    return joiner.join([*before, core, *after])
