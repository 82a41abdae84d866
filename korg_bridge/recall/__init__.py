"""korg-recall: cross-session memory over agent ledgers, as an introspect-aware binary.

``history/`` reads korg ledgers, Claude Code transcripts and Codex sessions into a persistent index
and searches it; ``semantic/`` adds embeddings (semantic and hybrid ranking); ``memory/`` is the
versioned store agents write to; ``interop/`` meets agents where they keep things (the session
brief, hooks, Claude Code's memory folders); ``cli/`` declares the binary through the toolkit.
``paths``, ``project`` and ``tenancy`` resolve where things are and who is calling, for all of them.
Nothing here imports ``bridge/`` or ``serving/``: the bridge serves korg-recall like any binary.
"""
