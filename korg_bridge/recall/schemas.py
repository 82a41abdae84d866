"""The input schemas of korg-recall's callables that are more than a line or two.

They are the wire contract the bridge validates against and turns into
argv, so they live apart from the handlers in :mod:`korg_bridge.recall.cli`:
reviewing a schema change should not mean reading handler code. The recall
tool's properties are compatible with the ecosystem's recall tool (``query``,
``top_n``, ``min_score``, ``mode``, ``tool_filter``) plus this one's.
"""

from __future__ import annotations

from typing import Any

from korg_bridge.recall.event import KINDS
from korg_bridge.recall.modes import RECALL_MODES

__all__ = ["ALLOW_SECRETS_PROP", "LEDGER_PROP", "PROJECT_PROP", "RECALL_SCHEMA", "WEIGHTS_PROP"]

LEDGER_PROP: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "description": (
        "Ledger files or directories (scanned recursively for *.jsonl). Default: $KORG_RECALL_LEDGER, "
        "else ~/.korg/sessions, ~/.korg/claude-events.jsonl, Claude Code transcripts under "
        "$CLAUDE_CONFIG_DIR/projects (~/.claude/projects) and Codex sessions under $CODEX_HOME/sessions "
        "(~/.codex/sessions)."
    ),
}
ALLOW_SECRETS_PROP: dict[str, Any] = {
    "type": "boolean",
    "description": "Show recognisable secrets instead of [redacted] (also KORG_RECALL_ALLOW_SECRETS=1).",
}

PROJECT_PROP: dict[str, Any] = {
    "type": "string",
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
        "bm25": {"type": "number", "minimum": 0},
        "vector": {"type": "number", "minimum": 0},
        "recency": {"type": "number", "minimum": 0},
        "tau_days": {"type": "number", "exclusiveMinimum": 0},
    },
    "additionalProperties": False,
}

RECALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What you are looking for, in words or keywords."},
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
                "Cosine-similarity floor (default 0.30): semantic drops hits below it; in hybrid a hit needs a "
                "keyword match or a cosine at least this. Ignored by keyword and substring."
            ),
            "default": 0.3,
            "minimum": 0.0,
            "maximum": 1.0,
        },
        "mode": {
            "type": "string",
            "enum": RECALL_MODES,
            "description": (
                "auto: hybrid when an embedding model is available locally, else keyword. "
                "substring: every term present. keyword: BM25 ranking. semantic: embedding similarity. "
                "hybrid: BM25 + embeddings + recency."
            ),
            "default": "auto",
        },
        "tool_filter": {
            "type": "array",
            "items": {"type": "string"},
            "description": (
                "Only these tool names or event kinds (e.g. ['user_prompt'] for what the user typed, "
                f"['Read', 'Bash']). Kinds besides tool names: {', '.join(KINDS)}."
            ),
        },
        "agent_filter": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Only these agents (exact, or a prefix such as 'claude-code' or 'codex').",
        },
        "project": PROJECT_PROP,
        "since": {
            "type": "string",
            "description": "Only events at or after this ISO-8601 date-time, or this long ago (7d, 12h, 30m, 2w).",
        },
        "until": {
            "type": "string",
            "description": "Only events at or before this ISO-8601 date-time, or this long ago.",
        },
        "weights": WEIGHTS_PROP,
        "ledger": LEDGER_PROP,
        "json": {
            "type": "boolean",
            "description": (
                "Print hits as JSON, each with its score breakdown {bm25, vector, recency, total}; semantic and "
                "hybrid add the model, the events embedded by this call and those not embedded yet."
            ),
        },
        "allow_secrets": ALLOW_SECRETS_PROP,
    },
    "required": ["query"],
}
