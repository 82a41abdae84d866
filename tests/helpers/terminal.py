"""Run a real command on a real terminal: a pseudo-terminal that is the child's controlling tty.

What a person sees differs from what a pipe gets (tables instead of JSON, a prompt instead of an
error, Ctrl-C), and only a terminal shows it: ``isatty`` is true on the pty's slave side. The
child becomes a session leader whose controlling terminal is the pty (``TIOCSCTTY`` in a tiny
exec wrapper), so writing ``\\x03`` to the master is a real Ctrl-C: the line discipline sends
SIGINT to the foreground process group, the child and whatever it started.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CTRL_C = b"\x03"
_WRAPPER = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execvp(sys.argv[1], sys.argv[1:])"


@dataclass(slots=True)
class Session:
    """What one run showed: the terminal's text (``\\r\\n`` as ``\\n``), stderr when piped apart, the exit code."""

    code: int
    screen: str
    stderr: str


def run_on_terminal(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    steps: Sequence[tuple[str, bytes]] = (),
    stderr_apart: bool = False,
    columns: int = 100,
    timeout: float = 60.0,
) -> Session:
    """Run ``argv`` with stdin, stdout (and stderr, unless ``stderr_apart``) on a fresh terminal.

    ``steps`` are (text to wait for, bytes to type): once the screen shows the text (after the
    previous step's), the bytes are written to the terminal, as a person would type them.

    Raises:
        TimeoutError: the child outlived ``timeout`` (it is killed, with its process group), or a
            step's text never appeared before the child ended.
    """
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, *argv],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE if stderr_apart else slave,
        env={**env, "COLUMNS": str(columns), "TERM": "xterm"},
        cwd=cwd,
        start_new_session=True,
    )
    os.close(slave)
    screen = bytearray()
    err = bytearray()
    pending = list(steps)
    seen = 0
    deadline = time.monotonic() + timeout
    streams = [master] + ([proc.stderr.fileno()] if proc.stderr is not None else [])
    try:
        while streams:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"{argv!r} did not finish within {timeout:g} s; it showed {bytes(screen)!r}"
                )
            ready, _, _ = select.select(streams, [], [], min(left, 0.5))
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: every slave descriptor is closed, the child is gone
                    chunk = b""
                if not chunk:
                    streams.remove(fd)
                    continue
                (screen if fd == master else err).extend(chunk)
            while pending:
                text, typed = pending[0]
                found = screen.find(text.encode("utf-8"), seen)
                if found < 0:
                    break
                seen = found + len(text)
                os.write(master, typed)
                pending.pop(0)
        code = proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
        raise
    finally:
        os.close(master)
        if proc.stderr is not None:
            proc.stderr.close()
    if pending:
        raise TimeoutError(f"{argv!r} ended before showing {pending[0][0]!r}; it showed {bytes(screen)!r}")
    decoded = bytes(screen).decode("utf-8", "replace").replace("\r\n", "\n")
    return Session(code, decoded, bytes(err).decode("utf-8", "replace"))
