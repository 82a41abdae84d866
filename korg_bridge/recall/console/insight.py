"""What the console tells a person about the machinery: the brief an agent is given at session
start (and what it left out, and why), and the health of the index and the store.

Both reuse what the command line prints: :func:`~korg_bridge.recall.interop.brief.build_brief`
(``korg-recall context``), :func:`~korg_bridge.recall.memory.stats.memory_stats` and the index's
``stats`` (``korg-recall stats``), :func:`~korg_bridge.recall.memory.backend.factory.verify_store`
(``korg-recall verify --store``) and the hook status of ``korg-recall hooks status``.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

from korg_bridge.errors import KorgError, UsageError
from korg_bridge.recall.memory.records import iso

if TYPE_CHECKING:
    from korg_bridge.recall.console.core import Caller
    from korg_bridge.recall.console.core import Core as Console
    from korg_bridge.recall.history.index import Index
    from korg_bridge.recall.memory.backend.protocols import Store

__all__ = ["context_preview", "health"]

BUDGET_MAX = 20_000
_MORE = re.compile(r"\((\d+) more: `korg-recall memories` lists them\)")
"""The brief's last line when memories were left out for the budget (only the last line is read:
a stored text can never stand in for it)."""

PREVIEW_TTL_S = 5.0
"""How long a context preview is reused unless the console wrote meanwhile: building the brief
reads the store, the Claude Code folders and the index (a few hundred ms on a large store), and
a change made elsewhere shows within these seconds."""


HEALTH_TTL_S = 15.0
"""How long a health report is reused: it runs the store's integrity check, verifies the whole
operation log and counts the index (seconds on a large store), so a page reloaded, a probe or
several people share one report; ``measured_at`` says when it was made."""


def context_preview(
    console: Console, caller: Caller, project: str | None, budget: int | None
) -> dict[str, Any]:
    """Raises:
    UsageError: a bad budget or a project folder that does not exist; ConfigError: a bad setting."""
    from korg_bridge.recall.interop.brief import DEFAULT_BUDGET, build_brief, tokens
    from korg_bridge.recall.interop.hooks import status
    from korg_bridge.recall.memory.scopes import Context

    budget = DEFAULT_BUDGET if budget is None else int(budget)
    if not 50 <= budget <= BUDGET_MAX:
        raise UsageError(f"budget {budget}: pass 50 to {BUDGET_MAX} tokens.")
    env = console.env_for(caller)
    where = os.path.abspath(os.path.expanduser(project)) if project else console.cwd or os.getcwd()
    if not os.path.isdir(where):
        raise UsageError(f"project {project!r}: no such folder here. Pass a project folder (its git root).")
    previews = console.keep("previews")
    key = (caller.warm_key, where, budget, console.warm.generation)
    with console.kept_lock:
        kept: tuple[float, dict[str, Any]] | None = previews.get(key)
    if kept is not None and time.monotonic() - kept[0] < PREVIEW_TTL_S:
        return kept[1]
    text, notes = build_brief(env, budget=budget, project=where)
    ctx = Context.from_env({k: v for k, v in env.items() if k != "KORG_RECALL_PROJECT"}, cwd=where)
    root = ctx.project.removeprefix("project:")
    found = _MORE.fullmatch(text.rstrip("\n").rpartition("\n")[2])
    left_out: dict[str, int] = {"budget": int(found.group(1)) if found else 0}
    if console.store_exists(caller):
        left_out.update(
            console.with_store(caller, lambda store: _not_in_brief(store, list(ctx.visible_scopes)))
        )
    preview = {
        "project": root,
        "text": text,
        "tokens": tokens(text) if text else 0,
        "budget": budget,
        "left_out": left_out,
        "hooks": status(env, root)["hooks"],
        "notes": notes,
        "measured_at": iso(),
    }
    with console.kept_lock:
        for old in [k for k in previews if k[:3] == key[:3]]:
            del previews[old]
        previews[key] = (time.monotonic(), preview)
    return preview


def _not_in_brief(store: Store, scopes: list[str]) -> dict[str, int]:
    """What a brief never shows, by reason, in ``scopes``."""
    marks = ", ".join("?" * len(scopes))
    with store.reading() as conn:
        rows = conn.execute(
            "SELECT "
            "sum(CASE WHEN state IN ('live', 'pending') AND trust = 'untrusted' THEN 1 ELSE 0 END), "
            "sum(CASE WHEN state = 'retired' THEN 1 ELSE 0 END), "
            "sum(CASE WHEN state = 'pending' THEN 1 ELSE 0 END) "
            f"FROM memory WHERE superseded_by IS NULL AND scope IN ({marks})",
            scopes,
        ).fetchone()
    untrusted, retired, pending = (int(value or 0) for value in rows)
    return {"untrusted": untrusted, "retired": retired, "pending": pending}


def health(console: Console, caller: Caller) -> dict[str, Any]:
    """The report :func:`measure_health` made for this caller's tenant in the last
    :data:`HEALTH_TTL_S`, else a new one."""
    reports = console.keep("health")
    key = caller.warm_key
    with console.kept_lock:
        found: tuple[float, dict[str, Any]] | None = reports.get(key)
    if found is not None and time.monotonic() - found[0] < HEALTH_TTL_S:
        return found[1]
    report = measure_health(console, caller)
    with console.kept_lock:
        reports[key] = (time.monotonic(), report)
    return report


def measure_health(console: Console, caller: Caller) -> dict[str, Any]:
    """Never raises for a part that cannot be read: that part says why."""
    from korg_bridge.recall.console.history import ensure_fresh

    env = console.env_for(caller)
    out: dict[str, Any] = {}
    try:
        ensure_fresh(console, caller)
        out["index"] = console.warm.with_index(caller.warm_key, env, lambda index: _index_health(index, env))
    except KorgError as exc:
        out["index"] = {"error": exc.message}
    try:
        from korg_bridge.recall.memory.stats import memory_stats

        out["memory"] = memory_stats(env)
    except KorgError as exc:
        out["memory"] = {"error": exc.message}
    out["oplog"] = _verify(env)
    out["measured_at"] = iso()
    return out


def _index_health(index: Index, env: Any) -> dict[str, Any]:
    from korg_bridge.recall.semantic.indexer import state
    from korg_bridge.recall.semantic.model import resolve_model
    from korg_bridge.recall.semantic.vectors import counts, coverage

    described = index.stats()
    spec = resolve_model(env)
    embedding: dict[str, Any] = {"indexer": state(index, index.path)}
    if spec is not None:
        embedding = {**coverage(index, spec.model_id, spec.dim).to_dict(), **embedding}
    return {**described, "vectors": counts(index), "embedding": embedding}


def _verify(env: Any) -> dict[str, Any]:
    from korg_bridge.recall.memory.backend.factory import store_exists, verify_store
    from korg_bridge.recall.paths import store_location

    try:
        if not store_exists(env):
            return {"intact": None, "note": "no memory store yet"}
        where = store_location(env)
        report = verify_store(where.url or str(where.path), env)
    except KorgError as exc:
        return {"intact": None, "error": exc.message}
    return report.to_dict()
