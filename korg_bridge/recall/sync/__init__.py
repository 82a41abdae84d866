"""Sync between one person's machines through a git remote or a shared folder, end to end encrypted.

Every machine appends its own operations to its own file in the remote; a sync pulls, verifies
every other machine's file, applies what is new in one order every machine shares, and pushes
its own. See ``docs/sync.md`` for the design, the threat model and what a purge leaves.

==================  ===========================================================================
:mod:`.steps`       the steps of ``sync init``, ``sync``, ``sync status`` and ``sync config``
:mod:`.background`  the session-start hook's sync, detached
:mod:`.replicate`   the store's changes to records and back (puts, metas, purges, conflicts)
:mod:`.repeats`     exact repeats remembered on two machines before a sync, made one memory
:mod:`.wire`        the remote's files byte for byte: records, chain, keyrings, ``FORMAT``
:mod:`.keys`        master key, epoch key and its ratchet, per-memory data keys
:mod:`.remote`      a folder, or a private git clone driven by ``git`` subprocesses
:mod:`.projects`    which scopes travel, and how a project is named between machines
:mod:`.state`       ``<data dir>/sync/``: config, keys, lock
:mod:`.commands`    the command-line declarations
==================  ===========================================================================
"""
