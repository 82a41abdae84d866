"""The console's service layer: what a person can see and do, as plain functions over the very
operations the command line and the MCP tools run.

Both the REST API (:mod:`.api`) and the HTML pages call :class:`Console` and nothing below it, so
a memory revised in the browser is the same :func:`~korg_bridge.recall.memory.operations.revise`,
the same operation-log entry and the same mirror file as one revised by an agent.

**Who acts.** Every method takes a :class:`Caller`: the tenant and actor of the bearer token the
request carried (``korg_bridge.auth``), or :data:`PERSON` on an open loopback server. The caller
becomes the environment the operations read (``KORG_BRIDGE_TENANT``/``KORG_BRIDGE_ACTOR`` with
``KORG_BRIDGE_TRANSPORT=http``, exactly as the HTTP bridge gives its children), so a team store
walls the caller into its tenant and a SQLite store becomes the tenant's own file; no argument
can name another tenant. A console caller is a person: writes are recorded with the token's actor,
or ``user`` without one, and are not held by ``KORG_RECALL_WRITES=confirm`` (approving is theirs).

**Kept warm.** Stores and the history index are opened once per worker thread and tenant and
reused (:mod:`.warm`); the embedding model is loaded once per process
(:func:`~korg_bridge.recall.semantic.modes.shared_embedder`). Methods are synchronous and
thread-safe: the web layer runs them in Starlette's thread pool.

Return values are JSON-ready ``dict``/``list`` values (what the REST API sends as is); texts
are as stored -- escaping is the page's, secrets were redacted when written (memories) or are
redacted here on the way out (history), unless the operator set ``KORG_RECALL_ALLOW_SECRETS``.

Errors are :class:`~korg_bridge.errors.KorgError` subclasses with the CLI's messages: the API maps
their exit codes to HTTP statuses (:func:`http_status`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from korg_bridge.errors import KorgError, UsageError
from korg_bridge.recall.console import memview
from korg_bridge.recall.console.core import PERSON, Caller, Core

if TYPE_CHECKING:
    from korg_bridge.recall.memory.backend.protocols import Store

__all__ = ["MEMORY_STATES", "PERSON", "SOURCES", "Caller", "Console", "http_status"]

T = TypeVar("T")

MEMORY_STATES = memview.STATES
"""The ``state`` filter's values: live, pending, superseded, retired, untrusted, all."""
SOURCES = memview.SOURCES
"""The ``source`` filter's values: agent, user, claude, import."""

HTTP_STATUS = {1: 500, 2: 400, 3: 409, 4: 502, 5: 503, 7: 501}
"""HTTP status per exit code of the ``korg:introspect@v1`` table: a usage error is the client's
(400), a configuration that refuses the act (writes off, a store that cannot be used) a conflict
with the server's state (409), an unreachable database 503, a missing extra (a model) 501."""


def http_status(exc: KorgError) -> int:
    """The HTTP status of an error (see :data:`HTTP_STATUS`); "no such …" is 404."""
    if exc.exit_code == 2 and exc.message.startswith(("no memory ", "no event ", "no session ")):
        return 404
    return HTTP_STATUS.get(exc.exit_code, 500)


class Console(Core):
    """Every act the console offers, over the warm, shared state of one ``korg-recall serve``
    (:class:`~.core.Core`: ``env`` is the server's environment -- store, index, ledgers,
    ``KORG_RECALL_ALLOW_SECRETS`` -- and ``cwd`` the folder whose project ``project`` scope means).
    """

    # --- memories: reads ------------------------------------------------------------------------

    def memories(
        self,
        caller: Caller,
        *,
        scope: str | None = None,
        type: str | None = None,
        state: str = "live",
        tag: str | None = None,
        pinned: bool | None = None,
        source: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """One page of memories, pinned first, newest first: ``{"memories": [summary…], "total",
        "next_cursor", "pending"}``; a summary has id, version, scope, type, title, excerpt, tags,
        pinned, state, trust, actor, source_kind, recorded_at, age. ``state`` ``superseded``
        lists older versions (one row per version).

        Raises:
            UsageError: a bad filter value or cursor.
        """
        filters = memview.Filters.checked(
            scope=scope,
            type=type,
            state=state,
            tag=tag,
            pinned=pinned,
            source=source,
            project=self._project(),
        )
        offset = memview.parse_cursor(cursor)
        if not self.store_exists(caller):
            return {"memories": [], "total": 0, "next_cursor": None, "pending": 0}
        ctx = self.context(caller)
        return self.with_store(caller, lambda store: memview.page(store, filters, offset, limit, ctx.now))

    def search_memories(
        self,
        caller: Caller,
        query: str,
        *,
        mode: str = "auto",
        scope: str | None = None,
        type: str | None = None,
        tag: str | None = None,
        top_n: int = 20,
    ) -> dict[str, Any]:
        """Memories matching ``query`` in every scope (or ``scope``), best first, each with its
        score ``breakdown`` (bm25, vector, recency, pinned, decay, total) and ``how`` in words:
        ``{"mode", "query", "hits": […]}``.

        Raises:
            UsageError: an empty or too long query, a bad scope or mode.
            DependencyMissing: ``hybrid``/``semantic`` asked for without a model.
        """
        from korg_bridge.recall.history.query.limits import check_query

        check_query(query)
        if not self.store_exists(caller):
            return {"mode": "keyword", "query": query, "hits": []}
        ctx = self.context(caller)
        env = self.env_for(caller)
        project = self._project()
        scopes = [memview.checked_scope(scope, project)] if scope else None
        return self.with_store(
            caller,
            lambda store: memview.search(store, env, query, mode, scopes, type, tag, top_n, ctx.now),
        )

    def memory(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        """A memory in full: ``current`` (the version shown), ``versions`` (every version, oldest
        first, with actor, reason, provenance, source ref/session linked to history), ``pending``
        (a proposal awaiting approval, or None), ``links`` (``{"outgoing", "incoming"}``: similar
        links and ``[[id]]`` wiki-links both ways), ``oplog`` (its operation-log entries, oldest
        first), ``reviewed_at``.

        Raises:
            UsageError: a malformed id; "no memory …" (404) for an unknown or purged one.
        """
        from korg_bridge.recall.memory.records import check_id

        memory_id = check_id(memory_id)
        if not self.store_exists(caller):
            raise UsageError(f"no memory {memory_id}: nothing has been remembered yet.")
        env = self.env_for(caller)
        ctx = self.context(caller)
        return self.with_store(caller, lambda store: memview.detail(store, env, memory_id, ctx.now))

    def diff(self, caller: Caller, memory_id: str, old: int, new: int) -> dict[str, Any]:
        """A word-level diff of two versions' text: ``{"id", "old", "new", "title": [part…],
        "body": [part…]}``, each part ``{"op": "equal"|"insert"|"delete", "text"}`` (raw text:
        the page escapes it).

        Raises:
            UsageError: an unknown id or version.
        """
        from korg_bridge.recall.console.diff import word_diff

        detail = self.memory(caller, memory_id)
        by_number = {v["version"]: v for v in detail["versions"]}
        missing = [n for n in (old, new) if n not in by_number]
        if missing:
            raise UsageError(
                f"no version {missing[0]} of {memory_id}: it has versions {', '.join(map(str, sorted(by_number)))}."
            )
        a, b = by_number[old], by_number[new]
        return {
            "id": memory_id,
            "old": old,
            "new": new,
            "title": [p.to_dict() for p in word_diff(a["title"], b["title"])],
            "body": [p.to_dict() for p in word_diff(a["body"], b["body"])],
        }

    def scopes(self, caller: Caller) -> list[dict[str, Any]]:
        """Every scope holding a current memory, with its count: ``[{"scope", "memories"}]``."""
        if not self.store_exists(caller):
            return []
        return self.with_store(caller, memview.scopes)

    def pending(self, caller: Caller, *, cursor: str | None = None, limit: int = 50) -> dict[str, Any]:
        """Proposals awaiting approval, each with the live text it would replace (``before``, None
        for a new memory): ``{"memories": […], "total", "next_cursor"}``.

        Raises:
            UsageError: a bad cursor.
        """
        offset = memview.parse_cursor(cursor)
        if not self.store_exists(caller):
            return {"memories": [], "total": 0, "next_cursor": None}
        ctx = self.context(caller)
        return self.with_store(caller, lambda store: memview.pending(store, offset, limit, ctx.now))

    def pending_count(self, caller: Caller) -> int:
        """How many proposals await approval (shown on every page)."""
        if not self.store_exists(caller):
            return 0
        return self.with_store(caller, memview.pending_count)

    def due_for_review(self, caller: Caller, *, cursor: str | None = None, limit: int = 50) -> dict[str, Any]:
        """Live memories neither changed nor reviewed for
        :data:`~korg_bridge.recall.memory.review.REVIEW_AFTER_DAYS`, the longest untouched first:
        ``{"memories": [summary…], "total", "next_cursor", "days"}``.

        Raises:
            UsageError: a bad cursor.
        """
        from korg_bridge.recall.memory.review import REVIEW_AFTER_DAYS

        offset = memview.parse_cursor(cursor)
        if not self.store_exists(caller):
            return {"memories": [], "total": 0, "next_cursor": None, "days": REVIEW_AFTER_DAYS}
        ctx = self.context(caller)

        def read(store: Store) -> dict[str, Any]:
            found, total = memview.due(store, ctx.now, REVIEW_AFTER_DAYS, limit, offset)
            return {
                "memories": [memview.summary(v, ctx.now) for v in found],
                "total": total,
                "next_cursor": memview.next_cursor(offset, len(found), total),
                "days": REVIEW_AFTER_DAYS,
            }

        return self.with_store(caller, read)

    # --- memories: writes (the operations the CLI runs) ------------------------------------------

    def remember(self, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
        """``remember`` (REMEMBER_SCHEMA's arguments) as the caller: its result.

        Raises:
            UsageError, ConfigError: as :func:`~korg_bridge.recall.memory.operations.remember`.
        """
        from korg_bridge.recall.memory.drafts import make_draft
        from korg_bridge.recall.memory.operations import remember

        ctx = self.context(caller)
        ctx.check_writes("remember")
        make_draft(dict(args), ctx.write_scope(args.get("scope")), allow_secrets=ctx.allow_secrets)
        return self._write(caller, lambda store: remember(store, ctx, args))

    def revise(self, caller: Caller, args: Mapping[str, Any]) -> dict[str, Any]:
        """``revise`` (REVISE_SCHEMA's arguments; pass ``expected_version``, the version the person
        read: a newer one is refused, not overwritten).

        Raises:
            UsageError, ConfigError: as :func:`~korg_bridge.recall.memory.operations.revise`.
        """
        from korg_bridge.recall.memory.operations import revise, validate_revise

        ctx = self.context(caller)
        ctx.check_writes("revise")
        validate_revise(args)
        self._require_store(caller, args["id"])
        return self._write(caller, lambda store: revise(store, ctx, args))

    def pin(
        self, caller: Caller, memory_id: str, pinned: bool, expected_version: int | None = None
    ) -> dict[str, Any]:
        """Pin or unpin: a ``revise`` of ``set.pinned``.

        Raises:
            UsageError, ConfigError: as :meth:`revise`.
        """
        args: dict[str, Any] = {"id": memory_id, "set": {"pinned": bool(pinned)}}
        if expected_version is not None:
            args["expected_version"] = expected_version
        return self.revise(caller, args)

    def retire(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        """``forget`` by id, mode retire (hidden, restorable).

        Raises:
            UsageError, ConfigError: as :func:`~korg_bridge.recall.memory.forget.forget`.
        """
        return self._forget(caller, memory_id, "retire")

    def restore(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        """``restore``: a retired memory back as a new live version.

        Raises:
            UsageError, ConfigError: as :func:`~korg_bridge.recall.memory.operations.restore`.
        """
        from korg_bridge.recall.memory.operations import restore
        from korg_bridge.recall.memory.records import check_id

        ctx = self.context(caller)
        ctx.check_writes("restore")
        memory_id = check_id(memory_id)
        self._require_store(caller, memory_id)
        return self._write(caller, lambda store: restore(store, ctx, memory_id))

    def purge(self, caller: Caller, memory_id: str, confirm_id: str) -> dict[str, Any]:
        """``forget`` by id, mode purge (erased from the store, its index and mirror) -- only when
        ``confirm_id`` repeats the id: a person typed it.

        Raises:
            UsageError: ``confirm_id`` is not the id; as :meth:`retire` otherwise.
        """
        if confirm_id.strip() != memory_id:
            raise UsageError(
                f"purge erases {memory_id} for good: type its id exactly to confirm (nothing was erased)."
            )
        return self._forget(caller, memory_id, "purge")

    def mark_reviewed(self, caller: Caller, memory_id: str) -> dict[str, Any]:
        """Record that a person checked the memory (see :mod:`~korg_bridge.recall.memory.review`).

        Raises:
            UsageError, ConfigError: a bad or unknown id; writes are off.
        """
        from korg_bridge.recall.memory.review import mark_reviewed

        ctx = self.context(caller)
        ctx.check_writes("review")
        self._require_store(caller, memory_id)
        return self._write(caller, lambda store: mark_reviewed(store, ctx, memory_id))

    def approve(self, caller: Caller, ids: Sequence[str]) -> dict[str, Any]:
        """``memories --approve``: make proposals live (all or none), recorded with the caller's actor.

        Raises:
            UsageError: an id with nothing pending; ConfigError: writes are off.
        """
        from korg_bridge.recall.memory.operations import approve

        ctx = self.context(caller)
        ctx.check_writes("approve")
        self._require_ids(ids)
        return self._write(caller, lambda store: approve(store, ctx, list(ids)))

    def reject(self, caller: Caller, ids: Sequence[str]) -> dict[str, Any]:
        """End proposals without applying them (see :func:`~korg_bridge.recall.memory.review.reject`).

        Raises:
            UsageError: an id with nothing pending; ConfigError: writes are off.
        """
        from korg_bridge.recall.memory.review import reject

        ctx = self.context(caller)
        ctx.check_writes("reject")
        self._require_ids(ids)
        return self._write(caller, lambda store: reject(store, ctx, list(ids)))

    def edit_and_approve(self, caller: Caller, memory_id: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Approve a proposal, then revise it with the person's edit (``content`` and/or ``set``):
        two acts, both in the log, ``{"approved": …, "revised": …}``.

        Raises:
            UsageError, ConfigError: as :meth:`approve` and :meth:`revise`.
        """
        approved = self.approve(caller, [memory_id])
        edit = {name: args[name] for name in ("content", "set", "reason") if args.get(name) is not None}
        revised = self.revise(caller, {**edit, "id": memory_id}) if edit else None
        return {"approved": approved, "revised": revised}

    # --- history, context, health (:mod:`.history`, :mod:`.insight`) ------------------------------

    def projects(self, caller: Caller) -> list[dict[str, Any]]:
        """Projects with indexed history: ``[{"project", "sessions", "events", "last"}]``, newest first."""
        from korg_bridge.recall.console import history

        return history.projects(self, caller)

    def sessions(
        self, caller: Caller, *, project: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> dict[str, Any]:
        """Sessions, newest first: ``{"sessions": [{"session", "title", "agent", "branch", "project",
        "started", "ended", "events"}], "total", "next_cursor"}``.

        Raises:
            UsageError: a bad cursor.
        """
        from korg_bridge.recall.console import history

        return history.sessions(self, caller, project=project, cursor=cursor, limit=limit)

    def timeline(
        self, caller: Caller, session: str, *, cursor: str | None = None, limit: int = 100
    ) -> dict[str, Any]:
        """A session's events in order, a page at a time: ``{"session", "total", "events": [item…],
        "next_cursor"}``. An item: ref, seq, session, agent, tool, kind (prompt, reply, summary --
        a compaction summary --, tool, or another event kind), success, timestamp, text, input and
        output (a tool call paired with its result, as text), folded (whether any of them was cut
        at 2,000 characters: the whole event is at :meth:`event`), chars, branch. Secrets redacted.

        Raises:
            UsageError: "no session …" (404), a bad cursor.
        """
        from korg_bridge.recall.console import history

        return history.timeline(self, caller, session, cursor=cursor, limit=limit)

    def event(self, caller: Caller, ref: str) -> dict[str, Any]:
        """One event in full (``show``'s fields), secrets redacted.

        Raises:
            UsageError: a malformed ref; "no event …" (404).
        """
        from korg_bridge.recall.console import history

        return history.event(self, caller, ref)

    def search_history(self, caller: Caller, query: str, **filters: Any) -> dict[str, Any]:
        """``recall`` over history: ``filters`` = mode (keyword|hybrid|semantic|substring|auto),
        project, agent, tool, since, until, top_n; ``{"mode", "query", "hits": [… breakdown]}``.

        Raises:
            UsageError: a bad query or filter; DependencyMissing: a semantic mode without a model.
        """
        from korg_bridge.recall.console import history

        return history.search(self, caller, query, **filters)

    def remember_draft(self, caller: Caller, ref: str) -> dict[str, Any]:
        """What "Remember this" on an event prefills: ``{"content", "title", "source", "scope",
        "type", "event"}`` (source = the event's ref, so the memory's provenance links back).

        Raises:
            UsageError: a malformed or unknown ref.
        """
        from korg_bridge.recall.console import history

        return history.remember_draft(self, caller, ref)

    def context_preview(
        self, caller: Caller, project: str | None = None, budget: int | None = None
    ) -> dict[str, Any]:
        """The session-start brief the hook would inject now for ``project`` (a folder; default the
        server's): ``{"project", "text", "tokens", "budget", "left_out": {...}, "hooks": [...],
        "notes"}``.

        Raises:
            UsageError: a bad budget; ConfigError: a bad setting.
        """
        from korg_bridge.recall.console import insight

        return insight.context_preview(self, caller, project, budget)

    def health(self, caller: Caller) -> dict[str, Any]:
        """Index freshness and coverage, skipped lines, unreadable Claude Code memory files, store
        integrity, the op-log verdict, sources and sizes: ``{"index", "memory", "oplog"}``."""
        from korg_bridge.recall.console import insight

        return insight.health(self, caller)

    def changes(
        self, caller: Caller, since: Mapping[str, int] | None
    ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """For live updates: the caller's current marks (newest memory row, pending count, newest
        event) and what happened since ``since`` (None: nothing, just the marks):
        ``[{"type": "memory"|"pending"|"events", …}]``."""
        from korg_bridge.recall.console import live

        return live.changes(self, caller, since)

    # --- helpers --------------------------------------------------------------------------------

    def _require_store(self, caller: Caller, memory_id: object) -> None:
        """Raises:
        UsageError: no store exists yet, so no memory does (and none is created to say so)."""
        if not self.store_exists(caller):
            raise UsageError(f"no memory {memory_id}: nothing has been remembered yet.")

    @staticmethod
    def _require_ids(ids: Sequence[str]) -> None:
        if not ids:
            raise UsageError("pass at least one memory id.")
        if len(ids) > 100:
            raise UsageError(f"{len(ids)} ids; act on at most 100 at a time.")

    def _forget(self, caller: Caller, memory_id: str, mode: str) -> dict[str, Any]:
        from korg_bridge.recall.memory.forget import forget, validate_forget
        from korg_bridge.recall.memory.records import check_id

        ctx = self.context(caller)
        ctx.check_writes("forget")
        args: dict[str, Any] = {"id": check_id(memory_id), "mode": mode}
        validate_forget(ctx, args)
        self._require_store(caller, memory_id)
        return self._write(caller, lambda store: forget(store, ctx, args))
