"""Agent history: ledgers and transcripts read into the recall index, and the index searched.

``ingest/`` turns files into events and rows, ``query/`` searches them; ``index`` opens, migrates
and recovers the SQLite file, ``ownership`` makes sure it is ours, ``stats`` summarises it and
``walls`` confines a tenant's caller to the history the operator gave it. The index is a cache:
it can always be rebuilt from the files, which are only ever read.
"""
