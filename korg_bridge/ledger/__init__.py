"""``korg-ledger@v1``: the hash-chained JSONL journal, shared by the bridge's audit and korg-recall.

``chain`` is the format (canonical JSON, the chain, verify, crash-safe appends), ``file`` decides
whether a file on disk is a ledger and sets a torn tail aside without losing it, ``check`` is the
verifier's other duties (number domain, ``event_sig``, anchors). Below both programs, it imports
only ``_fs/`` and the top-level modules.
"""
