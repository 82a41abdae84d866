"""Which project a working directory belongs to: the canonical root of its git repository.

A hit is judged by where it happened, and "where" must be the same for every
session of one repository: the session's ``cwd`` may be a subfolder, a
symlinked path, or a ``git worktree`` of it. So a project is the
repository's main working tree, found by walking up from the ``cwd`` to a
``.git``:

* a ``.git`` folder: its parent is the project;
* a ``.git`` file (a worktree or a submodule) says ``gitdir: <path>``; a
  worktree's git dir holds a ``commondir`` file pointing at the main
  repository's git dir, whose parent is the project (so all worktrees of one
  repository share it); a submodule's has none, and is its own project.

When nothing is found, or the path does not exist on this machine (a
transcript copied from elsewhere), the ``cwd`` itself is the project.

Lookups touch the disk, so callers keep a :class:`ProjectCache` for the
length of one refresh: a transcript names the same ``cwd`` on every line.
"""

from __future__ import annotations

import os

__all__ = ["ProjectCache", "project_root"]

MAX_GIT_FILE_BYTES = 4096
"""A ``.git`` or ``commondir`` file is one short line; anything longer is not one."""


def _read_small(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_GIT_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_GIT_FILE_BYTES:
        return None
    return data.decode("utf-8", errors="replace").strip()


def _main_tree(folder: str, git_file: str) -> str:
    """The project of a folder whose ``.git`` is a file (a worktree or a submodule)."""
    text = _read_small(git_file)
    if not text or not text.startswith("gitdir:"):
        return folder
    gitdir = text[len("gitdir:") :].strip()
    gitdir = os.path.realpath(os.path.join(folder, gitdir))
    common = _read_small(os.path.join(gitdir, "commondir"))
    if not common:
        return folder  # a submodule, or a worktree whose repository is gone: its own project
    common_dir = os.path.realpath(os.path.join(gitdir, common))
    if os.path.basename(common_dir) == ".git":
        return os.path.dirname(common_dir)
    return common_dir  # a bare repository: its git dir is all there is to name it


def project_root(path: str) -> str:
    """The canonical project of ``path`` (see the module docstring); never raises.

    An absolute path is expected; a relative one is taken as given.
    """
    if not path:
        return path
    if not os.path.isdir(path):
        return os.path.normpath(path)
    folder = os.path.realpath(path)
    current = folder
    while True:
        git = os.path.join(current, ".git")
        if os.path.isdir(git):
            return current
        if os.path.isfile(git):
            return _main_tree(current, git)
        parent = os.path.dirname(current)
        if parent == current:
            return folder
        current = parent


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
