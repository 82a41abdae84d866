"""The input schemas of korg-recall's callables that are more than a line or two.

They are the wire contract the bridge validates against and turns into
argv, so they live apart from the handlers in :mod:`korg_bridge.recall.cli.app`:
reviewing a schema change should not mean reading handler code. The recall
tool's properties are compatible with the ecosystem's recall tool (``query``,
``top_n``, ``min_score``, ``mode``, ``tool_filter``) plus this one's.

Every string and list carries a cap (:mod:`korg_bridge.recall.history.query.limits`), so the
bridge refuses an oversized argument before anything runs. Nothing here can
switch redaction off: a model that reads an injected sentence in a recalled
page must not be able to ask for the secrets; that is the operator's
``KORG_RECALL_ALLOW_SECRETS``.
"""

from __future__ import annotations

from typing import Any

from korg_bridge.recall.history.ingest.event import KINDS
from korg_bridge.recall.history.query.limits import (
    MAX_FILTER_CHARS,
    MAX_FILTERS,
    MAX_LEDGERS,
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    MAX_REFS,
    MAX_TIME_CHARS,
)
from korg_bridge.recall.history.query.paging import DEFAULT_LIMIT, MAX_LIMIT, MIN_LIMIT, RESPONSE_CHARS
from korg_bridge.recall.semantic.modes import RECALL_MODES

__all__ = [
    "CONTEXT_CLI_FLAGS",
    "CONTEXT_SCHEMA",
    "HOOKS_SCHEMA",
    "JSON_CLI_FLAG",
    "LEDGER_PROP",
    "PROJECT_PROP",
    "RECALL_KINDS",
    "RECALL_SCHEMA",
    "SHOW_SCHEMA",
    "VERIFY_CLI_FLAGS",
    "VERIFY_SCHEMA",
    "WEIGHTS_PROP",
]

JSON_CLI_FLAG: dict[str, Any] = {
    "json": {
        "type": "boolean",
        "description": (
            "Print the answer as JSON even on a terminal (piped, it always is: scripts and the bridge get JSON). "
            "Command line only."
        ),
    }
}
"""``--json`` for the commands that show a person text at a terminal (:mod:`~korg_bridge.recall.cli.terminal`).
Kept out of ``input_schema``: the bridge's child writes to a pipe, so it always gets JSON, and a tool
schema offering a flag that changes nothing would only mislead a model."""

LEDGER_PROP: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string", "maxLength": MAX_PATH_CHARS},
    "maxItems": MAX_LEDGERS,
    "description": (
        "Ledger files or directories (scanned recursively for *.jsonl); each must exist. Default: "
        "$KORG_RECALL_LEDGER, else ~/.korg/sessions, ~/.korg/claude-events.jsonl, Claude Code transcripts "
        "under $CLAUDE_CONFIG_DIR/projects (~/.claude/projects) and Codex sessions under "
        "$CODEX_HOME/sessions (~/.codex/sessions)."
    ),
}

PROJECT_PROP: dict[str, Any] = {
    "type": "string",
    "maxLength": MAX_PATH_CHARS,
    "description": (
        "Only events of this project: a folder path, matched by its git repository's root (worktrees of "
        "one repository are one project). Pass the current working directory to recall what was done "
        "here. Default: every project."
    ),
}

WEIGHTS_PROP: dict[str, Any] = {
    "type": "object",
    "description": (
        "Hybrid weights: total = bm25*bm25_score + vector*cosine + recency*exp(-age_days/tau_days). "
        "Optional keys bm25, vector, recency (numbers >= 0; defaults 0.45, 0.45, 0.10) and tau_days "
        '(> 0; default 30). Example: {"recency": 0, "vector": 0.8}.'
    ),
    "properties": {
        "bm25": {"type": "number", "minimum": 0, "maximum": 100},
        "vector": {"type": "number", "minimum": 0, "maximum": 100},
        "recency": {"type": "number", "minimum": 0, "maximum": 100},
        "tau_days": {"type": "number", "exclusiveMinimum": 0, "maximum": 36500},
    },
    "additionalProperties": False,
}

RECALL_KINDS = ("memory", "history")
"""What ``recall`` searches: memories (ranked first, as a group) and past sessions."""

RECALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "maxLength": MAX_QUERY_CHARS,
            "description": "What you are looking for, in words or keywords (at most 100 distinct terms).",
        },
        "top_n": {
            "type": "integer",
            "description": "Max number of results (default 5).",
            "default": 5,
            "minimum": 1,
            "maximum": 50,
        },
        "min_score": {
            "type": "number",
            "description": (
                "Cosine-similarity floor (default 0.30): semantic drops hits below it. Ignored by hybrid (every "
                "candidate with a keyword match or a positive cosine competes), keyword and substring."
            ),
            "default": 0.3,
            "minimum": 0.0,
            "maximum": 1.0,
        },
        "mode": {
            "type": "string",
            "enum": RECALL_MODES,
            "description": (
                "auto: hybrid when a local embedding model has embedded at least 90 % of events, else keyword. "
                "substring: every term present. keyword: BM25 ranking. semantic: embedding similarity. "
                "hybrid: BM25 + embeddings + recency."
            ),
            "default": "auto",
        },
        "tool_filter": {
            "type": "array",
            "items": {"type": "string", "maxLength": MAX_FILTER_CHARS},
            "maxItems": MAX_FILTERS,
            "description": (
                "Only these tool names or event kinds (e.g. ['user_prompt'] for what the user typed, "
                f"['Read', 'Bash']). Kinds besides tool names: {', '.join(KINDS)}."
            ),
        },
        "agent_filter": {
            "type": "array",
            "items": {"type": "string", "maxLength": MAX_FILTER_CHARS},
            "maxItems": MAX_FILTERS,
            "description": "Only these agents (exact, or a prefix such as 'claude-code' or 'codex').",
        },
        "project": PROJECT_PROP,
        "since": {
            "type": "string",
            "maxLength": MAX_TIME_CHARS,
            "description": "Only events at or after this ISO-8601 date-time, or this long ago (7d, 12h, 30m, 2w).",
        },
        "until": {
            "type": "string",
            "maxLength": MAX_TIME_CHARS,
            "description": "Only events at or before this ISO-8601 date-time, or this long ago.",
        },
        "weights": WEIGHTS_PROP,
        "ledger": LEDGER_PROP,
        "json": {
            "type": "boolean",
            "description": (
                "Print hits as JSON, each with its score breakdown {bm25, vector, recency, total}; with a local "
                "embedding model, also the model and embedding: events, embedded, not_embedded, coverage, and the "
                "background indexer when one was started for the rest. Memories come as objects under memories."
            ),
        },
        "kinds": {
            "type": "array",
            "items": {"type": "string", "enum": list(RECALL_KINDS)},
            "minItems": 1,
            "maxItems": 2,
            "default": list(RECALL_KINDS),
            "description": (
                "What to search: memory (what was remembered; shown first) and history (past sessions). "
                'Default both; ["memory"] alone is fastest.'
            ),
        },
        "scope": {
            "type": "string",
            "maxLength": MAX_PATH_CHARS + 16,
            "description": (
                "Memories of this scope only: user, project, project:/absolute/path, agent:NAME or session:ID "
                "(default: user and the project). History is narrowed by project instead."
            ),
        },
        "as_of": {
            "type": "string",
            "maxLength": MAX_TIME_CHARS,
            "description": (
                "Memories as they stood at this time (ISO-8601 date-time, or this long ago: 30d): what was "
                "believed then. History hits are not affected (use until)."
            ),
        },
        "include_superseded": {
            "type": "boolean",
            "description": "Also show older versions of memories (marked superseded), not just the current ones.",
        },
    },
    "required": ["query"],
}

SHOW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref": {
            "type": ["string", "array"],
            "items": {"type": "string", "maxLength": 64 * MAX_REFS},
            "minItems": 1,
            "maxItems": MAX_REFS,
            "maxLength": 64 * MAX_REFS,
            "description": (
                f'Refs from recall output: "e42", a list ["e42", "e43"], or comma-separated "e42,e43" '
                f"(at most {MAX_REFS})."
            ),
        },
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": 50,
            "default": 0,
            "description": "Events to include before and after each one (default 0).",
        },
        "offset": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1_000_000_000,
            "default": 0,
            "description": (
                "Where long strings start: a string longer than limit characters is shown from this character "
                "on (default 0). The answer's next and notice give the offset that reads on."
            ),
        },
        "limit": {
            "type": "integer",
            "minimum": MIN_LIMIT,
            "maximum": MAX_LIMIT,
            "default": DEFAULT_LIMIT,
            "description": (
                f"Characters shown of each string longer than this (default {DEFAULT_LIMIT}); shorter strings are "
                f"shown whole. The whole answer stays under {RESPONSE_CHARS} characters; events that do not fit "
                "are named in next."
            ),
        },
        "full": {
            "type": "boolean",
            "description": "Show everything uncut, however long (for a terminal; an agent should page with offset).",
        },
        "query": {
            "type": "string",
            "maxLength": MAX_QUERY_CHARS,
            "description": (
                "The recall query the refs came from: each event then carries its hybrid score breakdown "
                "{bm25, vector, recency, total} for it (vector is null without a local embedding model)."
            ),
        },
        "weights": WEIGHTS_PROP,
    },
    "required": ["ref"],
}

VERIFY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "maxLength": MAX_PATH_CHARS,
            "description": (
                "The ledger file (.jsonl) to verify: a regular file (directories, devices and FIFOs are refused). "
                "Required (on the command line, --store may name a memory store instead)."
            ),
        },
        "pubkey": {
            "type": "string",
            "maxLength": 128,
            "description": (
                "An Ed25519 public key as 64 hex characters: also verify every event's event_sig over its canonical "
                "preimage; an event without a valid signature makes the ledger not intact. Needs the [verify] extra."
            ),
        },
        "anchors": {
            "type": "string",
            "maxLength": MAX_PATH_CHARS,
            "description": (
                "An anchors sidecar (anchors.jsonl; one {seq_id, entry_hash, anchor_kind, anchor_proof, anchored_at} "
                "per line) to check: each anchored entry_hash must be the ledger's at that seq_id. Not read unless given."
            ),
        },
    },
}

VERIFY_CLI_FLAGS: dict[str, Any] = {
    "store": {
        "type": "string",
        "maxLength": MAX_PATH_CHARS,
        "description": (
            "Instead of --path: a memory store whose operation log to verify, a SQLite store's path (its "
            "memory-ops.jsonl) or a postgresql:// URL (the chain of the tenant in KORG_RECALL_TENANT). Command "
            "line only: a tool argument must not make an fs_read call connect to a server."
        ),
    },
}

CONTEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "budget": {
            "type": "integer",
            "minimum": 100,
            "maximum": 8000,
            "default": 1500,
            "description": (
                "Tokens the brief may take at most (counted as UTF-8 bytes / 2.5, which over-counts English). "
                "Default 1500."
            ),
        },
        "project": {
            "type": "string",
            "maxLength": MAX_PATH_CHARS,
            "description": (
                "The project to brief on: a folder path, matched by its git repository's root. Default: the "
                "working directory."
            ),
        },
    },
}

CONTEXT_CLI_FLAGS: dict[str, Any] = {
    "hook": {
        "type": "string",
        "enum": ["claude", "codex"],
        "description": (
            "Print the brief as a SessionStart hook's JSON for that agent (hookSpecificOutput.additionalContext) "
            "and leave out what the agent loads itself (claude: its auto memory). Nothing is printed when "
            "there is nothing to say; problems become notes on stderr and the exit status stays 0."
        ),
    },
}

HOOKS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "claude": {"type": "boolean", "description": "Claude Code's settings.json (the default agent)."},
        "codex": {"type": "boolean", "description": "Codex's hooks.json instead."},
        "user": {
            "type": "boolean",
            "description": "The user's file (~/.claude/settings.json, ~/.codex/hooks.json): every project (default).",
        },
        "project": {
            "type": "boolean",
            "description": "This project's file (.claude/settings.json, .codex/hooks.json at the git root).",
        },
    },
}
