"""Ledgers and transcripts into the index, in one direction: file → line → shape → event → row.

Which files (``sources``), what changed since last time (``refresh``), one slice parsed in
process or by a worker process (``batches``, ``worker``), the line shapes (``shapes/``), the
normalised event (``event``), its searchable text (``text``), its row (``rows``) and the one place a
tool call meets its result (``pairing``).
"""
