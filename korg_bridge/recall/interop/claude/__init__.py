"""Claude Code's folders: its memory read into the store, and (opt-in) our memories written back.

Where its files are and which project each belongs to (``paths``, ``scan``), reading one safely
(``files``), the interop tables (``records``), taking them in before every read (``intake``) and
the opt-in write-back into its memory folder (``writeback``). Claude Code's files are read, never
owned: a file we did not write is never changed.
"""
