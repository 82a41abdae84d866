"""The memory store: what agents are told to keep, versioned, deduplicated, forgettable.

The design is ``docs/memory.md``. A write reads top-down: the operation (``operations``,
``forget``) → its draft and the write policy (``drafts``, ``write_policy``, ``normalize``,
``contrast``, ``safety``) → one store transaction (``backend/``, ``writes``, ``records``, ``rows``)
→ the operation log (``oplog``) → after commit, the projections (``mirror/``, and Claude Code's
folder in ``interop/claude``). Reads: ``search`` and ``scoring`` rank, ``listing`` answers
``memories``, ``recall_view`` is the memory part of ``recall``; ``scopes`` is the context of a call,
``embedding`` and ``backfill`` the vectors, ``storable`` strict JSON, ``stats`` the store's health,
``transfer/`` export and import.

Importing this package (or any module but the embedding model's path) never imports numpy,
jsonschema or the MCP SDK, and only a ``postgresql://`` store imports psycopg: korg-recall is a
fresh process per tool call.
"""
