"""The memory store's interface, its factory, and the two databases behind it.

``protocols`` is the interface every store offers (standard library only, so anything may import
it); ``factory`` opens the store ``KORG_RECALL_STORE`` names and is the one place that picks an
implementation: ``sqlite/`` (the default, one file) or ``pg/`` (PostgreSQL + pgvector for a team).
"""
