"""Searching the recall index: every mode's keyword side, filters, hits, snippets, paging.

``search`` dispatches a query (substring, keyword, or to ``semantic/`` for the vector side);
``keyword`` and ``fts`` rank with BM25 through FTS5, the SQL built apart from running it and user
text quoted so it can never become syntax; ``hits``, ``scores``, ``context`` and ``snippets`` make a
hit; ``limits``, ``paging`` and ``timeparse`` bound what one call may ask for and return.
"""
