"""Helpers of the Claude Code interop tests: a Claude config folder built file by file (running
korg-recall is :mod:`tests.helpers.cli`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.memory import git_repo, rows, store_file, tree_bytes

__all__ = [
    "ClaudeHome",
    "git_repo",
    "line_with",
    "rows",
    "store_file",
    "topic",
    "tree_bytes",
    "worktree",
]


def slug(path: Path | str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def topic(name: str, description: str, kind: str, body: str) -> str:
    """A topic file as Claude Code writes them: name, description, type, then the memory."""
    return f"---\nname: {name}\ndescription: {description}\ntype: {kind}\n---\n{body}\n"


def worktree(repo: Path, where: Path) -> Path:
    subprocess.run(
        ["git", "worktree", "add", "-q", str(where)], cwd=repo, check=True, timeout=30, capture_output=True
    )
    return where


def line_with(lines: list[str], text: str) -> str:
    found = [line for line in lines if text in line]
    assert len(found) == 1, (text, lines)
    return found[0]


@dataclass
class ClaudeHome:
    """A ``CLAUDE_CONFIG_DIR``: project folders with memory folders and transcripts."""

    root: Path

    def project(self, directory: Path | str) -> Path:
        folder = self.root / "projects" / slug(directory)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def memory(self, directory: Path | str) -> Path:
        folder = self.project(directory) / "memory"
        folder.mkdir(exist_ok=True)
        return folder

    def transcript(
        self, directory: Path | str, session: str, cwd: Path | str, *turns: tuple[str, str]
    ) -> Path:
        """A session file whose lines record ``cwd``, with (prompt, reply) turns."""
        path = self.project(directory) / f"{session}.jsonl"
        lines = []
        for number, (prompt, reply) in enumerate(turns or [("hello", "hi")]):
            stamp = f"2026-05-01T10:{number:02d}:00.000Z"
            lines.append(
                {
                    "type": "user", "sessionId": session, "cwd": str(cwd), "uuid": f"u{number}", "timestamp": stamp,
                    "message": {"role": "user", "content": prompt},
                }
            )  # fmt: skip
            lines.append(
                {
                    "type": "assistant", "sessionId": session, "cwd": str(cwd), "uuid": f"a{number}",
                    "timestamp": stamp.replace(":00.000Z", ":30.000Z"),
                    "message": {"role": "assistant", "content": [{"type": "text", "text": reply}]},
                }
            )  # fmt: skip
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path


def touch_later(path: Path) -> None:
    """Move a file's mtime forward (an edit within the clock's granularity would look unchanged)."""
    info = os.stat(path)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 2_000_000_000))
