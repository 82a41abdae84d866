"""Where the machines meet: a plain folder, or any remote the ``git`` command reaches.

Both are read as a set of files (:meth:`Remote.pull`) and written one machine's files at a
time (:meth:`Remote.push`): each machine writes only its own ``machines/<id>.ops`` and
``keyring/<id>.keys``, so two machines never edit one file and git never has to merge.

**Folder** (Syncthing, Dropbox, a network share): files are read in place and written
atomically (temp file, fsync, rename). A folder that is not there is an offline remote.

**Git**: a private clone in ``<data dir>/sync/git``. Pull is ``fetch`` and a forced checkout of
the remote branch (the clone holds nothing of ours that is not also in the store); push
writes our files, commits and pushes; a push refused because another machine pushed first
is retried after a new fetch, at most :data:`PUSH_ATTEMPTS` times. ``git`` runs without a
shell, with an argv list, stdin from ``/dev/null``, no terminal prompt, no hooks, and a
timeout on every call.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from korg_bridge.config import git_ssh_command
from korg_bridge.errors import ConfigError, DependencyMissing, NetworkError
from korg_bridge.recall.sync.wire import ROOT

__all__ = ["BRANCH", "FolderRemote", "GitRemote", "Remote", "is_git_remote", "open_remote"]

BRANCH = "main"
GIT_TIMEOUT_S = 120.0
"""One git call (a fetch of a large history over a slow link); past it the remote counts as offline."""
PUSH_ATTEMPTS = 5
"""Pushes refused because another machine pushed in between, before giving up (each one fetches anew)."""
MAX_FILE_BYTES = 1 << 30
_SCP = re.compile(r"^[\w.-]+@[\w.-]+:")


def is_git_remote(remote: str) -> bool:
    """A URL, ``user@host:path``, or the path of a git repository (bare or not); else a folder."""
    if "://" in remote or _SCP.match(remote) or remote.endswith(".git"):
        return True
    path = Path(remote)
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


class Remote:
    """The files of a remote (see the module docstring)."""

    label: str

    def pull(self) -> dict[str, bytes]:
        """Every file under ``korg-sync/v1``, by path relative to the remote's root.

        Raises:
            NetworkError: the remote cannot be reached.
        """
        raise NotImplementedError

    def push(self, files: Mapping[str, bytes], message: str) -> None:
        """Write ``files`` (this machine's own) to the remote.

        Raises:
            NetworkError: the remote cannot be reached or refuses the write.
        """
        raise NotImplementedError


def _read_tree(root: Path) -> dict[str, bytes]:
    """Regular files under ``root/korg-sync/v1`` (links and special files are skipped, never opened)."""
    found: dict[str, bytes] = {}
    base = root / ROOT
    for sub in ("", "machines", "keyring"):
        folder = base / sub if sub else base
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise NetworkError(
                f"cannot read the sync remote folder {folder}: {exc.strerror or exc}."
            ) from exc
        for entry in entries:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES or entry.name.startswith("."):
                continue
            fd = os.open(
                entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
            )
            with os.fdopen(fd, "rb") as handle:
                rel = f"{ROOT}/{sub}/{entry.name}" if sub else f"{ROOT}/{entry.name}"
                found[rel] = handle.read(MAX_FILE_BYTES + 1)
    return found


def _write_files(root: Path, files: Mapping[str, bytes]) -> None:
    from korg_bridge._fs.durable import fsync_folder
    from korg_bridge.recall.memory.mirror.safe_io import write_atomic

    for rel, data in files.items():
        write_atomic(root, rel, data.decode("ascii"))
        fsync_folder(root / Path(rel).parent)


class FolderRemote(Remote):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.label = str(root)

    def _reachable(self) -> None:
        if not self.root.is_dir():
            raise NetworkError(
                f"the sync folder {self.root} is not reachable (not mounted, or removed). Mount it, or point sync "
                "at another with `korg-recall sync init --remote FOLDER`."
            )

    def pull(self) -> dict[str, bytes]:
        self._reachable()
        return _read_tree(self.root)

    def push(self, files: Mapping[str, bytes], message: str) -> None:
        self._reachable()
        try:
            _write_files(self.root, files)
        except (OSError, UnicodeDecodeError) as exc:
            raise NetworkError(f"cannot write to the sync folder {self.root}: {exc}.") from exc


class GitRemote(Remote):
    def __init__(self, url: str, clone: Path, machine: str) -> None:
        self.url = url
        self.clone = clone
        self.machine = machine
        self.label = url

    def _git(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GIT_SSH_COMMAND": git_ssh_command(os.environ),
        }
        command: Sequence[str] = [
            "git",
            "-c", "core.hooksPath=/dev/null",
            "-c", "commit.gpgsign=false",
            "-c", f"user.name=korg-sync {self.machine}",
            "-c", f"user.email=korg-sync-{self.machine}@localhost",
            "-C", str(self.clone),
            *argv,
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=GIT_TIMEOUT_S,
                env=env,
                check=False,
            )
        except FileNotFoundError as exc:
            raise DependencyMissing(
                "a git remote needs the git command, and it is not on PATH. Install git, or sync through a folder."
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise NetworkError(
                f"git {argv[0]} on the sync remote {self.url} took longer than {GIT_TIMEOUT_S:g} s; nothing "
                "changed here. Check the connection and sync again."
            ) from exc
        if check and done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise NetworkError(
                f"cannot reach the sync remote {self.url} (git {argv[0]}: {last}); nothing changed here. Check "
                "the URL and the connection, then sync again."
            )
        return done

    def _ensure_clone(self) -> None:
        if (self.clone / ".git").is_dir():
            # The clone is this machine's alone and its sync lock is held: a lock file in it was left
            # by a git that died with a killed sync, and would stop every git call after it.
            for stale in (".git/index.lock", ".git/HEAD.lock", ".git/shallow.lock", ".git/config.lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.clone / stale)
            for stale_ref in (self.clone / ".git" / "refs").rglob("*.lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(stale_ref)
            return
        try:
            self.clone.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise ConfigError(f"cannot create the sync clone {self.clone}: {exc.strerror or exc}.") from exc
        self._git("init", "-q")
        self._git("remote", "add", "origin", self.url)

    def _fetch(self) -> bool:
        """Fetch, and check out the remote branch (False: the remote has none yet)."""
        self._git("fetch", "-q", "--prune", "origin")
        has = self._git("rev-parse", "--verify", "-q", f"refs/remotes/origin/{BRANCH}", check=False)
        if has.returncode != 0:
            return False
        self._git("checkout", "-q", "-f", "-B", BRANCH, f"origin/{BRANCH}")
        return True

    def pull(self) -> dict[str, bytes]:
        self._ensure_clone()
        self._fetch()
        return _read_tree(self.clone)

    def push(self, files: Mapping[str, bytes], message: str) -> None:
        self._ensure_clone()
        for attempt in range(PUSH_ATTEMPTS):
            if attempt:
                self._fetch()
            try:
                _write_files(self.clone, files)
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot write the sync clone {self.clone}: {exc}.") from exc
            self._git("add", "--", *files)
            staged = self._git("diff", "--cached", "--quiet", check=False)
            if staged.returncode != 0:
                self._git("commit", "-q", "-m", message)
            head = self._git("rev-parse", "--verify", "-q", "HEAD", check=False)
            if head.returncode != 0:
                return  # nothing was ever written: nothing to push
            remote = self._git("rev-parse", "--verify", "-q", f"refs/remotes/origin/{BRANCH}", check=False)
            if remote.returncode == 0 and remote.stdout.strip() == head.stdout.strip():
                return
            done = self._git("push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}", check=False)
            if done.returncode == 0:
                self._git("fetch", "-q", "origin", check=False)
                return
            if (
                "rejected" not in done.stderr
                and "fetch first" not in done.stderr
                and "non-fast-forward" not in done.stderr
            ):
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise NetworkError(
                    f"cannot push to the sync remote {self.url} ({last}); what was pulled is applied, this machine's "
                    "changes go out with the next sync."
                )
        raise NetworkError(
            f"the sync remote {self.url} kept moving ({PUSH_ATTEMPTS} pushes refused because other machines pushed "
            "first); this machine's changes go out with the next sync."
        )


def open_remote(remote: str, clone: Path, machine: str) -> Remote:
    return GitRemote(remote, clone, machine) if is_git_remote(remote) else FolderRemote(Path(remote))
