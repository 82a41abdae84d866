"""Meeting agents where they already keep things, without owning what they keep.

The session-start brief (``brief``, ``threads``), the hook that runs it in Claude Code's or Codex's
settings (``hooks``, with ``json_splice`` editing a settings file as text and ``guarded_write``
replacing it only if unchanged), and Claude Code's own memory folders (``claude/``).
"""
