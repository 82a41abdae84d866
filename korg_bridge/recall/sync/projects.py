"""Which scopes leave the machine, and how a project is named between machines.

``user`` and ``project:<root>`` memories sync; ``session:`` and ``agent:`` ones never leave the
machine. A project's root differs between machines (``/home/ann/src/app`` here,
``/Users/ann/app`` there), so a project scope travels as the **normalised URL of its git
remote** ``origin`` (``git@github.com:ann/app.git`` and ``https://github.com/ann/app`` are both
``github.com/ann/app``) together with the root it had where it was written. The receiver maps
it, in this order, through ``projects`` of its ``sync/config.json`` (URL -> local root), to a
project of its own store or its working directory with the same remote URL, else keeps the
origin's root (a project this machine has not seen; a mapping added later does not move it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from korg_bridge.recall.project import find_git_root

__all__ = ["ProjectMap", "normalise_url", "remote_url", "syncs"]

_SCP = re.compile(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?([^/:]+)(?::\d+)?/(.*)$", re.IGNORECASE)
_MAX_CONFIG_BYTES = 256 * 1024


def syncs(scope: str) -> bool:
    return scope == "user" or scope.startswith("project:")


def normalise_url(url: str) -> str:
    """``host/path`` of a git remote URL: no scheme, user, port, trailing ``.git`` or slash."""
    text = url.strip()
    match = _URL.match(text) or _SCP.match(text)
    if match:
        host, path = match.group(1).lower(), match.group(2)
    else:
        host, path = "", text
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{host}/{path}" if host else path


def remote_url(root: str) -> str | None:
    """The normalised URL of remote ``origin`` of the repository at ``root`` (None: none)."""
    if find_git_root(root) is None:
        return None
    git = os.path.join(root, ".git")
    if os.path.isfile(git):
        try:
            with open(git, encoding="utf-8", errors="replace") as handle:
                pointer = handle.read(4096).strip()
        except OSError:
            return None
        git = os.path.realpath(os.path.join(root, pointer.removeprefix("gitdir:").strip()))
        common = os.path.join(git, "commondir")
        if os.path.isfile(common):
            with open(common, encoding="utf-8", errors="replace") as handle:
                git = os.path.realpath(os.path.join(git, handle.read(4096).strip()))
    try:
        with open(os.path.join(git, "config"), encoding="utf-8", errors="replace") as handle:
            text = handle.read(_MAX_CONFIG_BYTES)
    except OSError:
        return None
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section.replace(" ", "") == '[remote"origin"]' and line.startswith("url") and "=" in line:
            return normalise_url(line.split("=", 1)[1])
    return None


class ProjectMap:
    """Scopes to and from their form between machines, for one sync."""

    def __init__(self, explicit: Mapping[str, str], local_scopes: Iterable[str]) -> None:
        self.explicit = dict(explicit)
        self._urls: dict[str, str | None] = {}
        self._by_url: dict[str, str] = {}
        for scope in local_scopes:
            if scope.startswith("project:"):
                url = self._url(scope[len("project:") :])
                if url is not None:
                    self._by_url.setdefault(url, scope)

    def _url(self, root: str) -> str | None:
        if root not in self._urls:
            self._urls[root] = remote_url(root)
        return self._urls[root]

    def to_wire(self, scope: str) -> dict[str, Any]:
        if scope == "user":
            return {"kind": "user"}
        root = scope[len("project:") :]
        return {"kind": "project", "url": self._url(root), "path": root}

    def from_wire(self, wire: Mapping[str, Any]) -> str:
        if wire.get("kind") == "user":
            return "user"
        url, path = wire.get("url"), str(wire.get("path") or "")
        if isinstance(url, str) and url:
            if url in self.explicit:
                return "project:" + os.path.normpath(self.explicit[url])
            if url in self._by_url:
                return self._by_url[url]
        if path in self.explicit:
            return "project:" + os.path.normpath(self.explicit[path])
        return "project:" + path
