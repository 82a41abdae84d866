"""Whether another process holds a lock file: a look, never a wait.

korg-recall's long-lived processes (the background indexer, a sync, the resident engine) each hold
an ``flock`` on a file of their own for as long as they run; others ask whether one runs by trying
a shared lock without blocking. Written once here: the three copies differed in how they opened
the file, and one could block on a FIFO put in its place.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from korg_bridge._fs.safe_read import READ_FLAGS

__all__ = ["lock_held"]


def lock_held(path: Path) -> bool:
    """True while some process holds an ``flock`` on ``path`` (exclusive: a shared one is free).

    Nothing is created: a missing file (or one that cannot be opened) is a lock nobody holds. The
    file is opened non-blocking, so a FIFO at the path answers at once.
    """
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
