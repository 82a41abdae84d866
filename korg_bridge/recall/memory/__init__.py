"""The memory store: what agents are told to keep, versioned, deduplicated, forgettable.

The design is ``docs/memory.md``. One concept per module:

==============  ====================================================================
``records``     one version row (:class:`~.records.Version`), ids, timestamps
``schema``      the store's named migrations
``store``       the SQLite file: where it lives, opening it safely, transactions, rows
``scopes``      ``user`` / ``project:<root>`` / ``agent:`` / ``session:``; the context
                of a call (actor, approval mode, working directory)
``normalize``   normalised text, content hashes, word sets, the difference guard
``safety``      redaction, injected-instruction heuristics, the delimited block
``policy``      the deterministic write decisions of ``remember``
``vectors``     embeddings of memories, when a model is present
``search``      memory retrieval (ranked hits with a score breakdown), forget's matching
``oplog``       the operation log: pending rows in the transaction, appended after commit
``mirror``      the Markdown mirror: render, parse, write atomically, import hand edits
``operations``  remember, revise, forget, restore, approve: one transaction each
``listing``     ``memories``: index lines within a token budget, full records by id
``stats``       :func:`~.stats.memory_stats`
``commands``    the korg-recall callables, declared through the toolkit
==============  ====================================================================

Importing this package (or any module but ``vectors``' model path) never imports
numpy, jsonschema or the MCP SDK: korg-recall is a fresh process per tool call.
"""
