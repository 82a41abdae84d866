"""The memory store: what agents are told to keep, versioned, deduplicated, forgettable.

The design is ``docs/memory.md``. One concept per module:

==============  ====================================================================
``records``     one version row (:class:`~.records.Version`), ids, timestamps
``backend``     the store interface: a store, its transactions, the concerns whose SQL
                differs (full text, vectors, the log); which backend a location opens
``schema``      the SQLite store's named migrations
``store``       the SQLite file: where it lives, opening it safely, transactions
``fulltext``    the SQLite store's keyword search (FTS5, BM25)
``tenancy``     who calls: the tenant of a team store, the actor of each write
``pg``          the team store: PostgreSQL + pgvector, tenants isolated by row-level security
``scopes``      ``user`` / ``project:<root>`` / ``agent:`` / ``session:``; the context
                of a call (actor, approval mode, working directory)
``normalize``   normalised text, content hashes, word sets, the difference guard
``safety``      redaction, injected-instruction heuristics, the delimited block
``policy``      the deterministic write decisions of ``remember``
``vectors``     embeddings of memories, when a model is present (a SQLite store's kept here)
``search``      memory retrieval (ranked hits with a score breakdown), forget's matching
``oplog``       the operation log: pending rows in the transaction, appended after commit
``mirror``      the Markdown mirror: who owns each file, what changed, writing files back
``mirror_io``   files below the mirror folder: never through a link, never blocking
``sync``        taking the mirror's changes in (edits, new files, conflicts, confirm)
``operations``  remember, revise, forget, restore, approve: one transaction each
``listing``     ``memories``: index lines within a token budget, full records by id
``stats``       :func:`~.stats.memory_stats`
``commands``    the korg-recall callables, declared through the toolkit
==============  ====================================================================

Importing this package (or any module but ``vectors``' model path) never imports
numpy, jsonschema or the MCP SDK, and only a ``postgresql://`` store imports psycopg:
korg-recall is a fresh process per tool call.
"""
