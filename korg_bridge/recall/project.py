"""Which project a directory belongs to: the canonical root of its git repository.

Memories in the ``project`` scope must follow the repository, not the
directory an agent happened to start in: ``src/`` and the repository's top
are one project, and so are a repository's worktrees (``git worktree add``),
which otherwise look like unrelated folders. :func:`project_root` answers
from the file system alone (no ``git`` subprocess: a fresh korg-recall per
tool call cannot pay ~5 ms for it, and git may not be installed).

* A ``.git`` **folder** marks an ordinary repository: its parent is the root.
* A ``.git`` **file** (``gitdir: <path>``) marks a worktree or a submodule.
  A worktree's git dir holds a ``commondir`` file naming the main
  repository's git dir; the root is that git dir's parent (or the git dir
  itself for a bare repository). A submodule has no ``commondir``: it is a
  project of its own, rooted where its ``.git`` file is.
* No ``.git`` anywhere above: the directory itself.

Symlinks are resolved first, so two spellings of one folder are one project.
When the path does not exist on this machine (a transcript copied from
elsewhere), it is its own project, as written. Lookups touch the disk, so the
indexer keeps a :class:`ProjectCache` for the length of one refresh: a
transcript names the same ``cwd`` on every line.
"""

from __future__ import annotations

import os

from korg_bridge._fs.safe_read import read_regular

__all__ = ["ProjectCache", "find_git_root", "project_root"]

_GITDIR_PREFIX = "gitdir:"
_MAX_POINTER_BYTES = 4096
"""A ``.git`` file or ``commondir`` is one short line; anything longer is not one."""


def _read_pointer(path: str) -> str | None:
    """The first line of a small pointer file, stripped; ``None`` if unreadable or not one."""
    try:
        got = read_regular(path, _MAX_POINTER_BYTES)
    except OSError:  # gone, unreadable, or not a regular file (a FIFO named .git must not hang)
        return None
    if got.over:
        return None
    raw = got.data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = text.splitlines()
    return lines[0].strip() if lines else None


def _root_of_git_file(directory: str, dot_git: str) -> str:
    """The project root for a ``.git`` file in ``directory`` (a worktree or a submodule)."""
    line = _read_pointer(dot_git)
    if line is None or not line.startswith(_GITDIR_PREFIX):
        return directory
    gitdir = line[len(_GITDIR_PREFIX) :].strip()
    if not gitdir:
        return directory
    gitdir = os.path.realpath(os.path.join(directory, gitdir))
    common = _read_pointer(os.path.join(gitdir, "commondir"))
    if not common:
        return directory  # a submodule, or a worktree whose git dir is gone: its own project
    common_dir = os.path.realpath(os.path.join(gitdir, common))
    if os.path.basename(common_dir) == ".git":
        return os.path.dirname(common_dir)
    return common_dir  # a bare repository's worktree: the bare repository names the project


def find_git_root(path: str) -> str | None:
    """The canonical git root of ``path`` (see the module docstring), or ``None`` outside git."""
    current = os.path.realpath(path)
    if not os.path.isdir(current):
        current = os.path.dirname(current)
    while True:
        dot_git = os.path.join(current, ".git")
        if os.path.isdir(dot_git):
            return current
        if os.path.isfile(dot_git):
            return _root_of_git_file(current, dot_git)
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def project_root(path: str) -> str:
    """The canonical git root of the directory ``path``, else the directory itself (symlinks
    resolved); a path that does not exist here is returned as written (normalised). Never raises.

    Worktrees of one repository share their main repository's root.
    """
    if not path:
        return path
    if not os.path.isdir(path):
        return os.path.normpath(path)
    found = find_git_root(path)
    return found if found is not None else os.path.realpath(path)


class ProjectCache:
    """:func:`project_root` remembered per path, for one refresh (projects can move between refreshes)."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def __call__(self, path: str | None) -> str | None:
        if not path:
            return None
        found = self._known.get(path)
        if found is None:
            found = self._known[path] = project_root(path)
        return found
