"""Every error korg-bridge raises, in one hierarchy.

Each class a user can see carries the exit code from the ``korg:introspect@v1``
exit-code table, so the one top-level handler in :mod:`korg_bridge.cli` can print
the message and return the code without knowing where the error came from::

    KorgError                      exit 1  error.generic
    ├── UsageError                 exit 2  error.usage     (bad flags, bad values)
    ├── ConfigError                exit 3  error.config    (environment, options)
    ├── DiscoveryError             exit 4  error.io        (binary timed out / crashed)
    │   ├── BinaryNotFound         exit 7  error.dependency_missing
    │   └── DocumentError          exit 3  error.config    (the document is broken)
    ├── NetworkError               exit 5  error.network   (a server cannot be reached)
    │   └── ConnectionDropped              (a team store's connection dropped: a read runs again)
    ├── DependencyMissing          exit 7  error.dependency_missing (model, extra)
    ├── Changed                    exit 1  (a file changed between reading and replacing it)
    ├── RemoteRefused              exit 4  error.io (a sync remote's file failed its checks)
    └── ToolCallError              exit 1  (a call the model can fix: becomes isError)
        ├── ArgumentError                  (arguments fail the schema / cannot be argv)
        └── PolicyDenied                   (side effect not allowed, session refused)

Messages are one line, name the thing that is wrong and say what to do.

Internal signals, never shown to a user as such: each is caught by the module that
raises it (or the one above it) and becomes a skipped line, a rebuild, a fallback
or a :class:`KorgError` with a message for people. They live here so that every
exception class is found in one place, not because anyone outside may catch them::

    InternalSignal
    ├── LineError                  a ledger line that cannot become rows (its message is the reason
    │                              ``stats`` shows for the skip)
    ├── SchemaMismatch             a database records migrations this version does not know
    ├── IndexBroken                the recall index must be rebuilt (the message says why)
    ├── WorkerFailed               the parsing worker stopped short: the rest is read in-process
    ├── ListChanged                a memory of a confirmed ``forget`` list changed between the steps
    ├── OutOfTime                  a schema pattern search passed its deadline
    ├── FrontMatterError           a mirror file's front matter cannot be read (also a ValueError)
    ├── AmbiguousJson              JSON that parsers read differently (also a ValueError)
    ├── BodyTooLarge               a console request's body passed its limit while being read (→ 413)
    └── NotRegular                 a path that is not a regular file (also an OSError: "cannot read")
"""

from __future__ import annotations

import errno
import os

EXIT_CODES: dict[int, str] = {
    0: "success",
    1: "error.generic",
    2: "error.usage",
    3: "error.config",
    4: "error.io",
    5: "error.network",
    6: "error.user_interrupt",
    7: "error.dependency_missing",
}
"""The ecosystem's exit-code table; a document may extend it with its own."""


class KorgError(Exception):
    """Base of every error korg-bridge raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        # One line, always: a multi-line message would break the CLI contract.
        super().__init__(" ".join(message.split()) if "\n" in message else message)

    @property
    def message(self) -> str:
        return str(self.args[0])


class UsageError(KorgError):
    """The command line or an option value is wrong."""

    exit_code = 2


class ConfigError(KorgError):
    """Configuration (environment, document contents) is wrong."""

    exit_code = 3


class DiscoveryError(KorgError):
    """Running ``<binary> --introspect`` failed (timeout, crash, unreadable output)."""

    exit_code = 4


class BinaryNotFound(DiscoveryError):
    """The binary does not exist or cannot be executed."""

    exit_code = 7


class DocumentError(DiscoveryError):
    """The ``--introspect`` document is not a valid ``korg:introspect@v1`` document."""

    exit_code = 3


class ToolCallError(KorgError):
    """A tool call the model can correct; the server reports it as an ``isError`` result."""


class ArgumentError(ToolCallError):
    """Arguments that fail the input schema or cannot be passed as argv."""

    exit_code = 2


class PolicyDenied(ToolCallError):
    """The callable's side effects are not allowed by the active policy."""

    exit_code = 3


class NetworkError(KorgError):
    """A server the command needs cannot be reached (refused, unresolvable, dropped)."""

    exit_code = 5


class DependencyMissing(KorgError):
    """Something the command needs is not installed (a model, an optional extra)."""

    exit_code = 7


class ConnectionDropped(NetworkError):
    """The connection to a team store dropped during a call: a read is run again once."""


class Changed(KorgError):
    """The file changed between reading it and replacing it: nothing was written."""


class RemoteRefused(KorgError):
    """A sync remote's file failed its checks (altered, truncated, replayed): nothing of the sync
    was applied (exit 4, error.io)."""

    exit_code = 4


# --- internal signals: caught inside korg-bridge, never shown to a user as such ---------------


class InternalSignal(Exception):
    """Base of the exceptions korg-bridge raises to itself and catches before a user sees them."""


class LineError(InternalSignal):
    """A line that cannot become rows; the message is the reason ``stats`` shows for it."""


class SchemaMismatch(InternalSignal):
    """The database records migrations this version does not know (newer version, or not ours)."""


class IndexBroken(InternalSignal):
    """The index file cannot be used as it is and must be rebuilt; the message says why."""


class WorkerFailed(InternalSignal):
    """The parsing worker stopped short; the message says how."""


class ListChanged(InternalSignal):
    """A memory of a confirmed list changed between the two steps of ``forget(query)``."""


class OutOfTime(InternalSignal):
    """Raised inside a pattern-search worker thread once the deadline has passed."""


class FrontMatterError(InternalSignal, ValueError):
    """A mirror file whose front matter cannot be read; it is reported, never touched."""


class AmbiguousJson(InternalSignal, ValueError):
    """JSON that parsers read differently: korg-recall's edit could not mean one thing."""


class BodyTooLarge(InternalSignal):
    """A console request's body passed its limit while it was read; answered 413, never shown."""


class NotRegular(InternalSignal, OSError):
    """What is at the path is not a regular file; ``kind`` says what (``a FIFO (named pipe)``).

    An ``OSError`` so that a caller treating any failure to read as "cannot read" refuses it too.
    """

    def __init__(self, path: str, kind: str, info: os.stat_result) -> None:
        super().__init__(errno.EINVAL, f"it is {kind}, not a regular file", path)
        self.kind = kind
        self.info = info
