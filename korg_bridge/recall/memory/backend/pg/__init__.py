"""The team memory store: PostgreSQL with pgvector, tenants walled off by row-level security.

``KORG_RECALL_STORE=postgresql://…`` puts korg-recall's memories in a database a
team shares; every tool behaves as it does on a SQLite file (the same write
policy, scopes, search, forget), within one **tenant** per caller. The design is
in ``docs/memory.md`` ("The team store") and the deployment in ``docs/deploy.md``.

===============  =================================================================
``url``          the URL without its password (for every message), the driver
``errors``       psycopg's errors translated, in one place (network 5, config 3)
``schema``       the named migrations: tables, row-level security, indexes
``migrate``      ``korg-recall store migrate``: apply them, grant the app role
``store``        :class:`~.store.PgStore`: connect, check the role and the schema,
                 one transaction per write with the tenant set (``SET LOCAL``)
``fulltext``     keyword search: a generated ``tsvector``, GIN, BM25 computed in SQL
``vectors``      ``halfvec`` embeddings, an HNSW index, iterative scans per tenant
``oplog``        the operation log as a table, hash-chained per tenant; verify
===============  =================================================================

Nothing here is imported unless the URL asks for it: a SQLite user never loads
psycopg.
"""
