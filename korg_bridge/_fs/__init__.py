"""Files written and read safely, for every package above: the one place for it.

Atomic writes that never replace a file we did not mean to (``durable``), JSONL lines read from a
byte offset with bounded memory and without blocking on a FIFO (``lines``), and files only the
operator should control, refused when others can write them (``operator_file``). Written once here
so that no writer hand-rolls temp file + fsync + rename, and no reader forgets the regular-file
check. Imports nothing of the package but ``errors`` and ``config``.
"""
