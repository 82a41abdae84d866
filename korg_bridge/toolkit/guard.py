"""The one top-level handler of every korg command (``korg-bridge``, ``korg-recall``, any toolkit binary).

Why one: a user must never see a traceback for a domain error, and every command must end the
same way on Ctrl-C and a closed pipe; written once, no entry point can drift.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from korg_bridge.errors import KorgError
from korg_bridge.toolkit.declaration import USER_INTERRUPT

__all__ = ["run_guarded", "silence_stdout", "unwrap"]


def run_guarded(prog: str, work: Callable[[], int], *, debug: bool = False) -> int:
    """The one top-level handler of every korg command: domain errors become
    ``PROG: error: …`` and their exit code, Ctrl-C and a closed pipe end
    quietly, and nothing else reaches the user as a traceback unless ``debug``."""
    try:
        return work()
    except BaseExceptionGroup as group:
        inner = unwrap(group)
        if inner is group:
            return _internal(prog, group, debug)
        return run_guarded(prog, _reraise(inner), debug=debug)
    except KorgError as exc:
        if debug:
            logging.getLogger(prog).exception("failed")
        sys.stderr.write(f"{prog}: error: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return USER_INTERRUPT
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): nothing left to say to anyone.
        silence_stdout()
        return 0
    except Exception as exc:  # the last line of defence
        return _internal(prog, exc, debug)


def _reraise(exc: BaseException) -> Callable[[], int]:
    def again() -> int:
        raise exc

    return again


def _internal(prog: str, exc: BaseException, debug: bool) -> int:
    if debug:
        raise exc
    sys.stderr.write(
        f"{prog}: error: internal error: {type(exc).__name__}: {exc}. Rerun with --debug for details.\n"
    )
    return 1


def unwrap(exc: BaseException) -> BaseException:
    """Task groups wrap errors in exception groups; the user needs the one inside."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's own
    final flush cannot raise again and print a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
