"""The default memory store: one SQLite file under the user's data folder.

Where it lives and opening it safely (``store``), its named migrations (``schema``), keyword search
(``fulltext``), memory vectors compared in numpy (``vectors``) and the operation log file appended
after each commit (``oplogfile``). User data, not a cache: an unusable file is an error naming it,
never moved aside.
"""
