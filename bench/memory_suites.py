"""The generated quality suites of ``bench/memory_bench.py``: knowledge updates and dedup.

Both are made from templates with a fixed seed, so a run is repeatable, and both
are scored on the real write policy and retrieval, in process:

* **knowledge update** -- facts that change over time (a service's port, a
  dependency's version, a person's role, a deadline, a preferred tool). Each
  fact gets two to four values, each written on its own day in different words
  and by one of the four write paths (plain ``remember``, ``remember`` with a
  ``key``, ``supersedes``, ``revise``), among many facts of the same kind.
  Questions use yet other words. Scored: the top hit of ``search_memories`` is
  the newest value; and with ``as_of`` a moment between two values, the top
  hit is the value that held then.
* **dedup** -- pairs written one after the other into a fresh scope through
  ``remember``: paraphrases (the same fact reworded: reordered, inflected,
  elaborated, or with a synonym) should merge; contradictions (a different
  number, date, version, negation or named entity -- capitalised or a
  lower-case tool or service name -- or swapped sides) must never merge.
  Scored: precision of merges, contradiction merges (must be 0), and the
  recall of paraphrases.

The written corpora of ``tests/data`` are scored here too (``bench/memory_bench.py --safety``):
``contradictions.json`` through the same dedup run, and ``injections.json`` (reworded injected
instructions against ordinary facts) through the write path's instruction check, each per half.

Both run on a SQLite store in a temporary folder by default, or -- ``store_url`` -- on a
PostgreSQL team store, each run in a tenant of its own (the same policy and retrieval, with the
team store's keyword ranking).

Stdlib and korg_bridge only.
"""

from __future__ import annotations

import contextlib
import json
import random
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from korg_bridge.recall.memory.backend.protocols import Store
from korg_bridge.recall.memory.backend.sqlite.store import SqliteStore
from korg_bridge.recall.memory.operations import remember, revise
from korg_bridge.recall.memory.scopes import Context
from korg_bridge.recall.memory.search import search_memories

DAY = 86_400.0
START = 1_767_225_600.0
"""2026-01-01T00:00:00Z: the first write of every suite."""

SERVICES = (
    "billing-api", "auth-service", "search-indexer", "checkout", "notifications", "ledger-sync",
    "image-resizer", "payments-gateway", "feature-flags", "audit-trail", "inventory", "email-relay",
    "reporting", "geo-lookup", "webhooks", "session-store",
)  # fmt: skip
PORTS = (3000, 3001, 4000, 5000, 5432, 6379, 7000, 8000, 8080, 8081, 8443, 9000, 9090, 9200, 9443, 10000)
DEPS = (
    ("Postgres", ("14", "15", "16", "17")), ("Django", ("4.2", "5.0", "5.1", "5.2")),
    ("Node.js", ("18", "20", "22", "24")), ("React", ("17", "18.2", "18.3", "19")),
    ("Terraform", ("1.5", "1.6", "1.7", "1.9")), ("Python", ("3.10", "3.11", "3.12", "3.13")),
    ("Redis", ("6.2", "7.0", "7.2", "7.4")), ("Kafka", ("3.5", "3.6", "3.7", "3.8")),
    ("Go", ("1.21", "1.22", "1.23", "1.24")), ("Rust", ("1.75", "1.78", "1.80", "1.83")),
    ("Elasticsearch", ("7.17", "8.11", "8.13", "8.15")), ("Kubernetes", ("1.27", "1.28", "1.29", "1.30")),
)  # fmt: skip
PEOPLE = (
    "Ana Lima", "Ben Okafor", "Carla Diaz", "Dev Patel", "Emma Novak", "Farid Haddad", "Grace Kim",
    "Hugo Martin", "Ines Costa", "Jonas Berg", "Keiko Sato", "Liam Walsh",
)  # fmt: skip
ROLES = (
    "tech lead of the payments team", "engineering manager for platform", "release captain",
    "on-call owner for checkout", "security champion", "staff engineer on search", "product owner for billing",
    "incident commander this quarter", "maintainer of the design system", "data platform lead",
)  # fmt: skip
MILESTONES = (
    "the billing migration", "the v2 launch", "the SOC 2 audit", "the mobile release", "the data center move",
    "the API deprecation", "the pricing change", "the search rewrite", "the GDPR review", "the load test",
    "the Postgres upgrade", "the onboarding redesign",
)  # fmt: skip
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October")
TASKS = (
    ("package manager", ("pnpm", "npm", "yarn", "bun")), ("test runner", ("pytest", "unittest", "nox", "ward")),
    ("formatter", ("ruff", "black", "yapf", "autopep8")), ("CI system", ("GitHub Actions", "Buildkite", "CircleCI", "Jenkins")),
    ("container runtime", ("Docker", "Podman", "containerd", "nerdctl")), ("editor", ("Neovim", "VS Code", "Helix", "Zed")),
    ("task tracker", ("Linear", "Jira", "Shortcut", "GitHub Issues")), ("linter for shell", ("shellcheck", "shfmt", "bashate", "checkbashisms")),
    ("database client", ("psql", "pgcli", "DBeaver", "TablePlus")), ("secrets store", ("Vault", "1Password", "Doppler", "SOPS")),
)  # fmt: skip


# --- knowledge updates -------------------------------------------------------------------------

UPDATE_FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "port": {
        "say": (
            "{e} listens on port {v}.",
            "The {e} service now runs on port {v}.",
            "We moved {e} to port {v}.",
            "Port {v} is where {e} answers requests.",
            "{e} answers on local port {v} these days.",
        ),
        "ask": ("Which port does {e} use?", "what port is {e} on", "{e} port number?", "port for {e}"),
        "other": (
            "{p} owns the {e} on-call rotation.",
            "{e} deploys go out on Tuesdays after the standup.",
            "The {e} dashboard lives in Grafana under Services.",
        ),
    },
    "version": {
        "say": (
            "The project pins {e} version {v}.",
            "We upgraded {e} to version {v}.",
            "{e} version in use: {v}.",
            "Builds run on {e} release {v} now.",
            "Production is on {e} release {v}.",
        ),
        "ask": ("Which {e} version are we on?", "what release of {e} does the project use", "{e} version"),
        "other": (
            "{e} docs for this project are linked from the wiki home page.",
            "Connection settings for {e} live in config/settings.toml.",
        ),
    },
    "role": {
        "say": (
            "{e}'s role: {v}.",
            "{e} took over the role of {v}.",
            "{e} now works as {v}.",
            "As of this month {e}'s role is {v}.",
        ),
        "ask": ("What role does {e} have on the team?", "{e}'s current role", "what is {e} working as"),
        "other": (
            "{e} sits in the Lisbon office and prefers async reviews.",
            "{e} is out on leave during the first week of August.",
        ),
    },
    "deadline": {
        "say": (
            "{e} is due on {v}.",
            "Deadline for {e}: {v}.",
            "{e} moved to {v}, the new due date.",
            "We now target {v} as the deadline for {e}.",
            "{e} is due by {v} at the latest.",
        ),
        "ask": ("When is {e} due?", "what's the deadline for {e}", "{e} due date"),
        "other": (
            "{p} coordinates {e} and posts updates in the team channel.",
            "{e} is tracked in Linear under the platform project.",
        ),
    },
    "tool": {
        "say": (
            "Use {v} as the {e}.",
            "The team's {e} is {v}; use it.",
            "Switched the {e} to {v}, use that.",
            "For the {e}, we use {v}.",
            "{v} is the {e} to use from now on.",
        ),
        "ask": ("Which {e} should I use?", "what {e} does the team use", "{e} to use"),
        "other": ("The {e} config lives in the repository root.",),
    },
}
"""Per family: statements of a value (``say``), questions (``ask``), and statements of other
attributes of the same subject (``other``: distractors that share the subject's name)."""

PATHS = ("plain", "key", "supersedes", "revise")


@dataclass(slots=True)
class Fact:
    family: str
    entity: str
    values: list[str]
    texts: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    """The id each version landed on (several lineages when plain writes created new ones)."""


def _values(family: str, entity: str, rng: random.Random, count: int) -> list[str]:
    if family == "port":
        return [str(p) for p in rng.sample(PORTS, count)]
    if family == "version":
        versions = dict(DEPS)[entity]
        start = rng.randint(0, len(versions) - count)
        return list(versions[start : start + count])
    if family == "role":
        return rng.sample(ROLES, count)
    if family == "deadline":
        months = rng.sample(MONTHS, count)
        return [
            f"{month} {rng.randint(1, 28)}"
            if rng.random() < 0.5
            else f"2026-{MONTHS.index(month) + 1:02d}-{rng.randint(1, 28):02d}"
            for month in months
        ]
    return rng.sample(dict(TASKS)[entity], count)


def update_facts(seed: int) -> list[Fact]:
    """Facts of every family (every entity of each family), each with two to four values over time."""
    rng = random.Random(seed)
    entities = {
        "port": SERVICES,
        "version": tuple(name for name, _ in DEPS),
        "role": PEOPLE,
        "deadline": MILESTONES,
        "tool": tuple(name for name, _ in TASKS),
    }
    facts: list[Fact] = []
    for family, names in entities.items():
        for entity in names:
            count = rng.randint(2, 4)
            fact = Fact(family, entity, _values(family, entity, rng, count))
            templates = rng.sample(UPDATE_FAMILIES[family]["say"], count)
            keyed = rng.random() < 0.35
            for number, (template, value) in enumerate(zip(templates, fact.values, strict=True)):
                text = template.format(e=entity, v=value)
                fact.texts.append(text[0].upper() + text[1:])
                if number == 0:
                    fact.paths.append("key" if keyed else "plain")
                else:
                    fact.paths.append(rng.choice(PATHS if keyed else ("plain", "supersedes", "revise")))
            facts.append(fact)
    rng.shuffle(facts)
    return facts


def distractors(facts: list[Fact], seed: int) -> list[tuple[float, str]]:
    """For each fact, one or two other attributes of its subject, each written at a random moment."""
    rng = random.Random(seed + 3)
    out: list[tuple[float, str]] = []
    for fact in facts:
        others = UPDATE_FAMILIES[fact.family]["other"]
        for template in rng.sample(others, min(len(others), rng.randint(1, 2))):
            text = template.format(e=fact.entity, p=rng.choice(PEOPLE))
            out.append((START + rng.uniform(0, 120) * DAY, text[0].upper() + text[1:]))
    return out


def _context(env: Mapping[str, str], project: Path, now: float) -> Context:
    return Context.from_env(env, cwd=str(project), now=now)


@contextlib.contextmanager
def opened(
    root: Path, env: Mapping[str, str], store_url: str | None
) -> Iterator[tuple[Store, dict[str, str]]]:
    """A fresh store for one run -- a SQLite file under ``root``, or a new tenant of the team store
    at ``store_url`` -- and the environment its calls see."""
    if store_url is None:
        with SqliteStore(root / "store" / "memory.sqlite") as store:
            yield store, dict(env)
        return
    from korg_bridge.recall.memory.backend.pg.store import PgStore

    team = {**env, "KORG_RECALL_STORE": store_url, "KORG_RECALL_TENANT": f"bench-{uuid.uuid4().hex[:12]}"}
    team.pop("KORG_RECALL_MIRROR", None)  # a team store has none
    with PgStore.open(store_url, team) as store:
        yield store, team


def write_facts(store: Store, env: Mapping[str, str], project: Path, facts: list[Fact], seed: int) -> float:
    """Write every version on its own day, interleaving facts (and other attributes of their
    subjects) as a real store would see them; return the moment of the last write."""
    rng = random.Random(seed + 1)
    events: list[tuple[float, int, int]] = []
    extra: dict[int, str] = {}
    for index, fact in enumerate(facts):
        moment = START + rng.uniform(0, 20) * DAY
        for number in range(len(fact.values)):
            fact.times.append(moment)
            events.append((moment, index, number))
            moment += rng.uniform(5, 40) * DAY
    for moment, text in distractors(facts, seed):
        events.append((moment, -1, len(events)))
        extra[len(events) - 1] = text
    for moment, index, number in sorted(events):
        if index < 0:
            ctx = _context(env, project, moment)
            remember(store, ctx, {"content": extra[number], "type": "project", "scope": "project"})
            continue
        fact = facts[index]
        ctx = _context(env, project, moment)
        path, text = fact.paths[number], fact.texts[number]
        args: dict[str, Any] = {"content": text, "type": "project", "scope": "project"}
        key = f"{fact.family}:{fact.entity}"
        if path == "key":
            result = remember(store, ctx, {**args, "key": key})
        elif path == "supersedes":
            result = remember(store, ctx, {**args, "supersedes": fact.ids[-1]})
        elif path == "revise":
            result = revise(store, ctx, {"id": fact.ids[-1], "content": text})
        else:
            result = remember(store, ctx, args)
        fact.ids.append(str(result["id"]))
    return max(moment for moment, _, _ in events)


@dataclass(slots=True)
class UpdateScore:
    """Per kind of question (``now``, ``as_of``): asked, answered right among the fact's own
    versions (the target), answered right by the very first hit (other facts included)."""

    asked: dict[str, int] = field(default_factory=lambda: {"now": 0, "as_of": 0})
    right: dict[str, int] = field(default_factory=lambda: {"now": 0, "as_of": 0})
    top1: dict[str, int] = field(default_factory=lambda: {"now": 0, "as_of": 0})
    misses: list[str] = field(default_factory=list)

    def rate(self, kind: str, top: bool = False) -> float:
        return (self.top1 if top else self.right)[kind] / self.asked[kind] if self.asked[kind] else 0.0


TOP_N = 10
"""Hits read per question: the fact's versions are looked for among them."""


def _ask(
    conn: Any, score: UpdateScore, kind: str, question: str, fact: Fact, want: str, **search: Any
) -> None:
    hits = search_memories(conn, question, top_n=TOP_N, **search)
    mine = [hit.version.body for hit in hits if hit.version.body in fact.texts]
    score.asked[kind] += 1
    score.right[kind] += bool(mine) and mine[0] == want
    score.top1[kind] += bool(hits) and hits[0].version.body == want
    if not mine or mine[0] != want:
        score.misses.append(
            f"{kind}: {question!r} -> {mine[0] if mine else None!r} (want {want!r}; {fact.paths})"
        )


def score_updates(
    store: Store, project: Path, env: Mapping[str, str], facts: list[Fact], seed: int, now: float
) -> UpdateScore:
    """Ask each fact's questions now (its newest value must come before its older ones) and at a
    moment between two values (with ``as_of``, the value that held then must)."""
    rng = random.Random(seed + 2)
    scope = _context(env, project, START).project
    score = UpdateScore()
    with store.reading() as conn:
        for fact in facts:
            asks = UPDATE_FAMILIES[fact.family]["ask"]
            for template in asks:
                _ask(
                    conn,
                    score,
                    "now",
                    template.format(e=fact.entity),
                    fact,
                    fact.texts[-1],
                    scopes=[scope],
                    now=now,
                )
            for number in range(len(fact.values) - 1):
                at = rng.uniform(fact.times[number], fact.times[number + 1])
                question = rng.choice(asks).format(e=fact.entity)
                _ask(
                    conn,
                    score,
                    "as_of",
                    question,
                    fact,
                    fact.texts[number],
                    scopes=[scope],
                    as_of=at,
                    now=now,
                )
    return score


def run_updates(seed: int, env: Mapping[str, str], store_url: str | None = None) -> UpdateScore:
    with tempfile.TemporaryDirectory(prefix="memory-updates-") as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        facts = update_facts(seed)
        with opened(root, env, store_url) as (store, run_env):
            last = write_facts(store, run_env, project, facts, seed)
            return score_updates(store, project, run_env, facts, seed, last + 3 * DAY)


# --- dedup --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pair:
    kind: str
    """``paraphrase`` or the kind of contradiction (number, date, version, negation, entity, order)."""
    first: str
    second: str


Slots = dict[str, str]
Template = Callable[[Slots], str]

DEDUP_FAMILIES: list[dict[str, Any]] = [
    {
        "say": (
            "Run `make db` before `pytest` in the {repo} repo.",
            "In the {repo} repo, run `make db` before running `pytest`.",
            "In the {repo} repo, `make db` has to be run before `pytest` runs.",
            "Always run `make db` before running `pytest` in the {repo} repo.",
        ),
        "synonym": "In the {repo} repo, execute `make db` before `pytest`.",
        "slots": lambda rng: {"repo": rng.choice(("shop", "billing", "blog", "ops", "search"))},
        "change": {
            "entity": lambda s, rng: {
                "repo": rng.choice(
                    [r for r in ("shop", "billing", "blog", "ops", "search") if r != s["repo"]]
                )
            },
            "negation": "Never run `make db` before `pytest` in the {repo} repo.",
            "order": "Run `pytest` before `make db` in the {repo} repo.",
        },
    },
    {
        "say": (
            "The {svc} API listens on port {port}.",
            "Port {port} is where the {svc} API listens.",
            "The {svc} API listens for requests on port {port}.",
            "Requests to the {svc} API go to port {port}; it listens there.",
        ),
        "synonym": "The {svc} API is served on port {port}.",
        "slots": lambda rng: {"svc": rng.choice(SERVICES), "port": str(rng.choice(PORTS))},
        "change": {
            "number": lambda s, rng: {"port": str(rng.choice([p for p in PORTS if str(p) != s["port"]]))},
            "entity": lambda s, rng: {"svc": rng.choice([v for v in SERVICES if v != s["svc"]])},
        },
    },
    {
        "say": (
            "The project uses {dep} {ver} in production.",
            "In production the project uses {dep} {ver}.",
            "{dep} {ver} is what the project uses in production.",
            "Production: the project uses {dep} {ver}.",
        ),
        "synonym": "The project runs {dep} {ver} in production.",
        "slots": lambda rng: (lambda d: {"dep": d[0], "ver": rng.choice(d[1])})(rng.choice(DEPS)),
        "change": {
            "version": lambda s, rng: {"ver": rng.choice([v for v in dict(DEPS)[s["dep"]] if v != s["ver"]])},
            "entity": lambda s, rng: (lambda d: {"dep": d[0], "ver": s["ver"]})(
                rng.choice([d for d in DEPS if d[0] != s["dep"]])
            ),
        },
    },
    {
        "say": (
            "The release freeze for {ms} starts on {date}.",
            "Starting on {date}, the release freeze for {ms} starts.",
            "For {ms}, the release freeze starts on {date}.",
            "The {ms} release freeze starts {date}.",
        ),
        "synonym": "The release freeze for {ms} begins on {date}.",
        "slots": lambda rng: {
            "ms": rng.choice(MILESTONES),
            "date": f"{rng.choice(MONTHS)} {rng.randint(1, 28)}",
        },
        "change": {
            "date": lambda s, rng: {"date": f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"},
            "entity": lambda s, rng: {"ms": rng.choice([m for m in MILESTONES if m != s["ms"]])},
        },
    },
    {
        "say": (
            "Use the staging database for {what} tests.",
            "For {what} tests, use the staging database.",
            "{what} tests use the staging database.",
            "The staging database is used for {what} tests.",
        ),
        "synonym": "Use the staging DB for {what} tests.",
        "slots": lambda rng: {"what": rng.choice(("integration", "load", "smoke", "end-to-end", "contract"))},
        "change": {
            "negation": "Never use the staging database for {what} tests.",
            "negation2": "Do not use the staging database for {what} tests.",
            "entity": lambda s, rng: {
                "what": rng.choice(
                    [w for w in ("integration", "load", "smoke", "end-to-end", "contract") if w != s["what"]]
                )
            },
        },
    },
    {
        "say": (
            "The user prefers {a} over {b} for {task}.",
            "For {task}, the user prefers {a} over {b}.",
            "When it comes to {task}, the user prefers {a} over {b}.",
            "The user's preference for {task}: {a} over {b}.",
        ),
        "synonym": "For {task}, the user likes {a} better than {b}.",
        "slots": lambda rng: (lambda t: dict(zip(("a", "b"), rng.sample(t[1], 2), strict=True), task=t[0]))(
            rng.choice(TASKS)
        ),
        "change": {
            "order": lambda s, rng: {"a": s["b"], "b": s["a"]},
            "entity": lambda s, rng: {
                "a": rng.choice([x for x in dict(TASKS)[s["task"]] if x not in (s["a"], s["b"])])
            },
        },
    },
    {
        "say": (
            "Standup is at {time} in room {room}.",
            "The standup is at {time}, in room {room}.",
            "In room {room}, standup is at {time}.",
            "Standup happens in room {room} at {time}.",
        ),
        "synonym": "The daily standup meets at {time} in room {room}.",
        "slots": lambda rng: {
            "time": rng.choice(("09:00", "09:30", "9:45am", "10:00", "10:15")),
            "room": rng.choice(("Tulip", "Orchid", "Cedar", "Maple", "Birch")),
        },
        "change": {
            "number": lambda s, rng: {
                "time": rng.choice(
                    [t for t in ("09:00", "09:30", "9:45am", "10:00", "10:15") if t != s["time"]]
                )
            },
            "entity": lambda s, rng: {
                "room": rng.choice(
                    [r for r in ("Tulip", "Orchid", "Cedar", "Maple", "Birch") if r != s["room"]]
                )
            },
        },
    },
    {
        "say": (
            "{first} owns the {svc} on-call rotation.",
            "The {svc} on-call rotation is owned by {first}.",
            "{first} is who owns the {svc} on-call rotation.",
            "Owner of the {svc} on-call rotation: {first}.",
        ),
        "synonym": "{first} runs the {svc} on-call rotation.",
        "slots": lambda rng: {"first": rng.choice(PEOPLE).split()[0], "svc": rng.choice(SERVICES)},
        "change": {
            "entity": lambda s, rng: {
                "first": rng.choice([p.split()[0] for p in PEOPLE if p.split()[0] != s["first"]])
            },
            "entity2": lambda s, rng: {"svc": rng.choice([v for v in SERVICES if v != s["svc"]])},
        },
    },
    {
        "say": (
            "Install dependencies with {tool} and commit the lockfile in the {repo} repo.",
            "In the {repo} repo, install dependencies with {tool} and commit the lockfile.",
            "In the {repo} repo, dependencies are installed with {tool}, and the lockfile is committed.",
            "Commit the lockfile and install dependencies with {tool} in the {repo} repo.",
        ),
        "synonym": "In the {repo} repo, add dependencies with {tool} and check in the lockfile.",
        "slots": lambda rng: {
            "tool": rng.choice(("pnpm", "npm", "yarn", "bun")),
            "repo": rng.choice(("shop", "billing", "blog", "ops")),
        },
        "change": {
            "entity": lambda s, rng: {
                "tool": rng.choice([t for t in ("pnpm", "npm", "yarn", "bun") if t != s["tool"]])
            },
            "negation": "In the {repo} repo, install dependencies with {tool} and never commit the lockfile.",
        },
    },
    {
        "say": (
            "Backups of the {svc} database run every night at {time} UTC.",
            "Every night at {time} UTC, backups of the {svc} database run.",
            "The {svc} database backups run nightly at {time} UTC.",
            "At {time} UTC every night the {svc} database is backed up.",
        ),
        "synonym": "Each night at {time} UTC the {svc} database gets a backup.",
        "slots": lambda rng: {
            "svc": rng.choice(SERVICES),
            "time": rng.choice(("01:00", "02:30", "03:00", "04:15")),
        },
        "change": {
            "number": lambda s, rng: {
                "time": rng.choice([t for t in ("01:00", "02:30", "03:00", "04:15") if t != s["time"]])
            },
            "entity": lambda s, rng: {"svc": rng.choice([v for v in SERVICES if v != s["svc"]])},
        },
    },
]


def _fill(template: str, slots: Slots) -> str:
    text = template.format(**slots)
    return text[0].upper() + text[1:]


def dedup_pairs(seed: int, per_family: int = 12) -> list[Pair]:
    """Paraphrase pairs (two wordings of the same slots; some with a synonym) and contradiction
    pairs (one slot changed, a negation, or swapped sides), ``per_family`` of each kind per family."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for family in DEDUP_FAMILIES:
        say: tuple[str, ...] = family["say"]
        for _ in range(per_family):
            slots = family["slots"](rng)
            a, b = rng.sample(say, 2)
            pairs.append(Pair("paraphrase", _fill(a, slots), _fill(b, slots)))
            if rng.random() < 0.3:
                pairs.append(Pair("paraphrase (synonym)", _fill(a, slots), _fill(family["synonym"], slots)))
            for kind, change in family["change"].items():
                base = _fill(rng.choice(say), slots)
                if isinstance(change, str):
                    other = _fill(change, slots)
                else:
                    other = _fill(rng.choice(say), {**slots, **change(slots, rng)})
                if other.lower() != base.lower():
                    pairs.append(Pair(kind.rstrip("2"), base, other))
    rng.shuffle(pairs)
    return pairs


@dataclass(slots=True)
class DedupScore:
    paraphrases: int = 0
    paraphrases_merged: int = 0
    contradictions: int = 0
    contradictions_merged: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    """kind -> [pairs, merged]."""
    wrong: list[str] = field(default_factory=list)

    @property
    def merges(self) -> int:
        return self.paraphrases_merged + self.contradictions_merged

    @property
    def precision(self) -> float:
        return self.paraphrases_merged / self.merges if self.merges else 1.0

    @property
    def recall(self) -> float:
        return self.paraphrases_merged / self.paraphrases if self.paraphrases else 0.0

    def add(self, pair: Pair, merged: bool) -> None:
        counts = self.by_kind.setdefault(pair.kind, [0, 0])
        counts[0] += 1
        counts[1] += merged
        if pair.kind.startswith("paraphrase"):
            self.paraphrases += 1
            self.paraphrases_merged += merged
            if not merged:
                self.wrong.append(f"kept apart: {pair.first!r} / {pair.second!r}")
        else:
            self.contradictions += 1
            self.contradictions_merged += merged
            if merged:
                self.wrong.append(f"MERGED {pair.kind}: {pair.first!r} / {pair.second!r}")


def run_dedup(
    seed: int,
    env: Mapping[str, str],
    decide_with: Callable[..., str] | None = None,
    store_url: str | None = None,
    pairs: list[Pair] | None = None,
) -> DedupScore:
    """Write each pair into a scope of its own through ``remember`` and count the merges.

    ``decide_with(store, ctx, first, second)``, when given, returns the status of the second
    write instead (the semantic column: the same policy fed the model's cosine). ``pairs``:
    these instead of the generated ones of ``seed`` (the written corpus, :func:`corpus_pairs`).
    """
    score = DedupScore()
    with tempfile.TemporaryDirectory(prefix="memory-dedup-") as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        with opened(root, env, store_url) as (store, run_env):
            for number, pair in enumerate(dedup_pairs(seed) if pairs is None else pairs):
                ctx = _context(run_env, project, START + number)
                scope = f"agent:pair{number}"
                if decide_with is not None:
                    status = decide_with(store, ctx, scope, pair.first, pair.second)
                else:
                    remember(store, ctx, {"content": pair.first, "type": "project", "scope": scope})
                    status = str(
                        remember(store, ctx, {"content": pair.second, "type": "project", "scope": scope})[
                            "status"
                        ]
                    )
                score.add(pair, status == "merged")
    return score


# --- the written corpora (tests/data) ---------------------------------------------------------------

CORPUS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data"
SPLITS = ("tune", "held-out")
"""Each written corpus alternates its entries of a kind between a half looked at while the code
changed and a half that was not tuned on (see the corpora's ``_comment``)."""


def corpus_pairs(split: str) -> list[Pair]:
    """``tests/data/contradictions.json``'s pairs of one half: contradictions under their kind,
    paraphrases as ``paraphrase (<how>)``."""
    data = json.loads((CORPUS_DIR / "contradictions.json").read_text(encoding="utf-8"))
    pairs = [Pair(e["kind"], e["first"], e["second"]) for e in data["contradictions"] if e["split"] == split]
    pairs += [
        Pair(f"paraphrase ({e['kind']})", e["first"], e["second"])
        for e in data["paraphrases"]
        if e["split"] == split
    ]
    return pairs


@dataclass(slots=True)
class InjectionScore:
    """Instructions flagged (detection) and ordinary facts flagged (false positives), with which."""

    instructions: int = 0
    detected: int = 0
    facts: int = 0
    flagged: int = 0
    wrong: list[str] = field(default_factory=list)

    @property
    def detection(self) -> float:
        return self.detected / self.instructions if self.instructions else 0.0

    @property
    def false_positives(self) -> float:
        return self.flagged / self.facts if self.facts else 0.0


def score_injections(split: str) -> InjectionScore:
    """``tests/data/injections.json``'s half through the write path's check, as an agent's write."""
    from korg_bridge.recall.memory.safety import injection_signs

    data = json.loads((CORPUS_DIR / "injections.json").read_text(encoding="utf-8"))
    score = InjectionScore()
    for entry in data["instructions"]:
        if entry["split"] == split:
            found = bool(injection_signs(entry["text"]))
            score.instructions += 1
            score.detected += found
            if not found:
                score.wrong.append(f"missed {entry['kind']}: {entry['text']!r}")
    for entry in data["facts"]:
        if entry["split"] == split:
            signs = injection_signs(entry["text"])
            score.facts += 1
            score.flagged += bool(signs)
            if signs:
                score.wrong.append(f"flagged {entry['kind']}: {entry['text']!r} ({signs[0]})")
    return score
