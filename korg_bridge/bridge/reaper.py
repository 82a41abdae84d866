"""Ending process groups, even after the bridge itself was killed.

Every child runs in its own session (see :mod:`korg_bridge.bridge.process`), so a
signal that ends the bridge never reaches it, and a bridge killed with
SIGKILL runs no cleanup at all: its running tools, and their grandchildren,
would live on. Linux's ``PR_SET_PDEATHSIG`` is no answer: it must be set in
the child between fork and exec (a ``preexec_fn``, which anyio's
``open_process`` does not take and which is unsafe in a threaded process),
it reaches only the direct child, and it fires when the *thread* that forked
the child exits, not the process.

So one small supervisor per bridge, the **reaper**, started with the first
child: a stdlib-only Python process in its own session, reading a pipe whose
write end only the bridge holds (close-on-exec, so no child inherits it).
The bridge writes ``+PGID`` when a child's group starts and ``-PGID`` when
its call is over. When the pipe reaches end-of-file — the bridge exited,
whichever way — the reaper sends SIGTERM to every group still listed,
SIGKILL after the grace period to whatever is left, and exits.

What still escapes: a process that leaves its group on purpose (``setsid``,
a daemon's double fork into a new session), and a child started in the
instant between its spawn and the ``+PGID`` line when the bridge dies right
then (the reaper is started before the spawn, so that instant is one write). Background processes a finished call left behind are not tracked
either: the call is over, they were meant to outlive it.

This file is also the reaper's program (``python -I -S reaper.py GRACE``),
so it imports nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import sys
import threading
import time

log = logging.getLogger(__name__)

POLL = 0.05
"""Seconds between checks whether a signalled group has ended."""

_LINE_CAP = 64
"""Longest line the reaper keeps (``+`` and a pid need a dozen bytes): a garbled
pipe cannot grow its memory."""


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group (``0`` only probes); ``False`` when nothing is left in it."""
    if pgid <= 1:  # 0 is our own group, 1 is init's: never ours to signal
        return False
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # pgid reused by someone else's process: never touch it
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies do not count).

    ``killpg(pgid, 0)`` succeeds while a killed orphan waits to be reaped,
    which under a slow init (a container's PID 1) would cost every timeout
    the full grace period; ``/proc`` tells a zombie apart.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return signal_group(pgid, 0)
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def end_groups(groups: set[int], grace: float) -> None:
    """SIGTERM every group, then SIGKILL what is still running after ``grace`` seconds."""
    alive = [pgid for pgid in groups if signal_group(pgid, signal.SIGTERM)]
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(POLL)
        alive = [pgid for pgid in alive if group_alive(pgid)]
    for pgid in alive:
        signal_group(pgid, signal.SIGKILL)


def serve(fd: int, grace: float) -> None:
    """The reaper's life: track ``+PGID``/``-PGID`` lines until EOF, then end what is listed."""
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        pending = pending[-_LINE_CAP:]
        for line in lines:
            sign, number = line[:1], line[1:].strip()
            if not number.isdigit():
                continue
            if sign == b"+":
                groups.add(int(number))
            elif sign == b"-":
                groups.discard(int(number))
    end_groups(groups, grace)


class Reaper:
    """The bridge's side: start the reaper once, and tell it about each group.

    Thread-safe, never raises: without a reaper the bridge still runs, only
    its children would outlive a killed bridge (a warning says so, once).
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid: int | None = None
        self._groups: set[int] = set()
        self._broken = False

    @property
    def pid(self) -> int | None:
        """The running reaper's pid, once one was started."""
        return self._pid

    def ready(self) -> None:
        """Start the reaper now, before a child is spawned, so that registering the child's group
        right after the spawn is one write: the window in which a bridge killed at that instant
        leaves the group untracked shrinks from a process start to a system call."""
        with self._lock:
            if self._fd is None:
                self._start()

    def watch(self, pgid: int) -> None:
        """``pgid`` now runs a call: end it if the bridge dies."""
        with self._lock:
            self._groups.add(pgid)
            self._send(f"+{pgid}\n")

    def release(self, pgid: int) -> None:
        """The call running in ``pgid`` is over (its leader was reaped)."""
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._send(f"-{pgid}\n")

    def close(self) -> int | None:
        """Close the pipe, as the bridge's exit would: the reaper ends every group
        still listed, then exits. Returns its pid (the caller may wait for it)."""
        with self._lock:
            pid = self._pid
            self._stop()
            self._groups.clear()
            return pid

    def _send(self, line: str) -> None:
        if self._fd is None and not self._start():
            return
        assert self._fd is not None
        try:
            os.write(self._fd, line.encode("ascii"))
        except BrokenPipeError:
            # The reaper died (someone killed it): a new one learns every group still running.
            log.warning("the process reaper (pid %s) is gone; starting another", self._pid)
            self._stop()
            if self._start():
                assert self._fd is not None
                with contextlib.suppress(OSError):
                    os.write(self._fd, "".join(f"+{g}\n" for g in sorted(self._groups)).encode("ascii"))
        except OSError as exc:  # a full pipe: the reaper is stuck, so this group goes untracked
            log.warning("could not tell the process reaper about a call: %s", exc)

    def _start(self) -> bool:
        if self._broken:
            return False
        script = os.path.abspath(__file__)
        read_end = write_end = -1
        try:
            if not (sys.executable and os.path.isfile(script)):
                raise OSError("no Python interpreter or reaper script on disk")
            read_end, write_end = (_above_std(fd) for fd in os.pipe())
            self._pid = _spawn([sys.executable, "-I", "-S", script, repr(self.grace)], read_end)
        except OSError as exc:
            self._broken = True
            if write_end >= 0:
                os.close(write_end)
            log.warning(
                "cannot start the process reaper (%s): tools still running when the bridge is killed "
                "will not be ended",
                exc,
            )
            return False
        finally:
            if read_end >= 0:
                os.close(read_end)
        os.set_blocking(write_end, False)  # never stall the event loop on a stuck reaper
        self._fd = write_end
        log.debug("process reaper started (pid %d)", self._pid)
        return True

    def _stop(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, os.WNOHANG)  # a reaper that died is a zombie until reaped
            self._pid = None


def _above_std(fd: int) -> int:
    """``fd``, moved above 0-2 if it landed there (a process started with its
    stdin closed): the reaper's stdin is set with dup2, which is a no-op, and
    keeps close-on-exec, when source and target are the same descriptor."""
    if fd > 2:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def _spawn(argv: list[str], stdin: int) -> int:
    """Start the reaper in its own session (terminal signals to the bridge's group
    must not reach it), with no stdout (in stdio mode ours is the protocol pipe),
    no stderr to hold the client's log pipe open, and an empty environment.

    Raises:
        OSError: the process could not be started.
    """
    actions = [
        (os.POSIX_SPAWN_DUP2, stdin, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    try:
        return os.posix_spawn(argv[0], argv, {}, file_actions=actions, setsid=True)
    except NotImplementedError:  # no POSIX_SPAWN_SETSID in this libc: a group of its own will do
        return os.posix_spawn(argv[0], argv, {}, file_actions=actions, setpgroup=0)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(0, float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
