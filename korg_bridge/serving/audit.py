"""The bridge's audit log: one korg-ledger@v1 entry per tool call.

``--audit PATH`` (or ``KORG_BRIDGE_AUDIT``) makes the bridge append every
tool call it answers - run, failed, denied or invalid - to a hash-chained
journal that ``korg-recall verify`` checks and ``korg-recall search`` finds.
Hashing, locking and crash safety belong to :class:`~korg_bridge.ledger.chain.LedgerWriter`;
this module only decides what an entry says, so the two cannot drift apart.

An entry is the flat journal shape of the conformance vectors::

    schema_version, seq_id,                  (the writer's)
    source_agent   "agent:korg-bridge@VERSION"
    tool_name      the callable's command_id (what recall filters on)
    args           the MCP arguments, bounded (see bound_arguments), secrets redacted
    result         {exit_code, output_bytes, output, output_truncated[, reason]}
    success, duration_ms,
    timestamp      ISO-8601 UTC with Z, millisecond precision, taken when the call is recorded
    binary         the bridged binary (extra field; omitted when unknown)
    mcp_tool       the MCP tool name the client called (extra field)
    tenant, actor  whom the caller's bearer token stands for (extra fields; present
                   only for HTTP calls whose token names them: see korg_bridge.auth.identity)
    prev_hash, entry_hash                    (the writer's)

``result.output`` is the first :data:`OUTPUT_PREVIEW_BYTES` of the text the
agent saw: enough to tell what happened, small enough that a chatty tool
cannot bloat the ledger. ``output_bytes`` is the size of the whole text.
Arguments are bounded the same way: a value over :data:`ARGUMENT_MAX_BYTES`
or nested deeper than :data:`ARGUMENT_MAX_DEPTH` is replaced by a marker, so
every entry stays small whatever a client sends.

The path itself is checked before anything is written (:func:`check_audit_path`):
a file that is not empty and not a korg-ledger@v1 chain is refused, never
repaired, because repairing means cutting its last line.

Secrets never reach the file. Arguments, output, reason, even property
names go through :mod:`korg_bridge.redact`, the one redactor: the value of
any property whose name is secret-like (``api_key``, ``db_pass``) becomes
``[redacted]``, and credential formats in text (vendor keys, JWTs, private
keys, ``KEY=value`` lines, URL passwords, ``curl -u``) do too.

A failure to append is logged and swallowed: losing an audit line must
never fail the tool call it describes.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict, Unpack

import anyio
import anyio.to_thread

from korg_bridge._version import __version__
from korg_bridge.config import audit_setting, ledger_key
from korg_bridge.errors import ConfigError
from korg_bridge.ledger.chain import LedgerWriter
from korg_bridge.ledger.file import check_ledger_file
from korg_bridge.redact import is_secret_name, redact, redact_arguments

__all__ = [
    "ARGUMENTS_MAX_BYTES",
    "ARGUMENT_MAX_BYTES",
    "ARGUMENT_MAX_DEPTH",
    "OUTPUT_PREVIEW_BYTES",
    "SOURCE_AGENT",
    "AuditLog",
    "AuditedCall",
    "audit_path",
    "bound_arguments",
    "check_audit_path",
    "is_secret_name",
    "redact_arguments",
]

logger = logging.getLogger(__name__)


SOURCE_AGENT = f"agent:korg-bridge@{__version__}"

OUTPUT_PREVIEW_BYTES = 2048
"""Output kept per entry (UTF-8 bytes): what happened, not the whole transcript."""
_REDACT_MARGIN_CHARS = 4096
"""Text redacted beyond the preview, so a secret that straddles the preview's end
is still seen whole (and matched) by the credential patterns."""
ARGUMENT_MAX_BYTES = 16 * 1024
"""Largest argument value written whole (its compact JSON form, UTF-8); a bigger one becomes a marker."""
ARGUMENTS_MAX_BYTES = 64 * 1024
"""Largest ``args`` object written whole, after each value was bounded; beyond it ``args`` is a marker."""
ARGUMENT_MAX_DEPTH = 32
"""Nesting kept per argument value; deeper containers become a marker, so neither redaction nor
hashing can reach the interpreter's recursion limit."""
MARKER_PREVIEW_BYTES = 1024
"""Text a marker keeps of what it replaced."""


def _cut_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that is at most ``limit`` bytes of UTF-8."""
    if len(text) * 4 <= limit:  # cheap exit: no character is more than 4 bytes
        return text
    return text.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")


def output_preview(output: str) -> tuple[str, bool]:
    """Return the redacted first :data:`OUTPUT_PREVIEW_BYTES` of ``output`` and whether it was cut.

    Redacting 8 MiB of output costs seconds, so only a window past the preview
    is redacted; the window grows whenever redaction shrank it so much that
    an unmatched tail could reach into the preview.
    """
    window = OUTPUT_PREVIEW_BYTES + _REDACT_MARGIN_CHARS
    while True:
        head = output[:window]
        clean = redact(head)[0]
        if len(head) == len(output) or len(clean) >= OUTPUT_PREVIEW_BYTES + _REDACT_MARGIN_CHARS:
            break
        window *= 2
    preview = _cut_utf8(clean, OUTPUT_PREVIEW_BYTES)
    return preview, len(preview) < len(clean) or len(head) < len(output)


def _utc_now() -> str:
    moment = datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _depth_marker() -> dict[str, Any]:
    return {"truncated": True, "reason": f"nested deeper than {ARGUMENT_MAX_DEPTH} levels"}


def _cap_depth(value: Any, room: int) -> Any:
    """Plain copy of ``value`` with every container deeper than ``room`` levels replaced by a marker.

    Recursion is bounded by ``room`` itself. Keys become strings, as JSON has them.
    """
    if isinstance(value, Mapping):
        if room <= 0:
            return _depth_marker()
        return {k if isinstance(k, str) else str(k): _cap_depth(v, room - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if room <= 0:
            return _depth_marker()
        return [_cap_depth(v, room - 1) for v in value]
    return value


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _head(value: Any, budget: int) -> Any:
    """A small copy of ``value`` whose JSON form begins like the whole value's, for at least ``budget`` bytes.

    The marker's preview is redacted from this copy, not from the whole value:
    redacting megabytes costs seconds, while redacting the head still replaces
    a secret-named property in it by name and a credential by its format.
    """
    if isinstance(value, str):
        return value[: budget + _REDACT_MARGIN_CHARS]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        used = 0
        for key, item in value.items():
            if used >= budget:
                break
            out[key] = _head(item, budget - used)
            used += len(_json_text({key: out[key]}))
        return out
    if isinstance(value, list):
        items: list[Any] = []
        used = 0
        for item in value:
            if used >= budget:
                break
            items.append(_head(item, budget - used))
            used += len(_json_text(items[-1])) + 1
        return items
    return value


def _size_marker(name: str, value: Any, text: str, size: int) -> dict[str, Any]:
    """What an argument over :data:`ARGUMENT_MAX_BYTES` is recorded as.

    ``sha256`` is of the value's whole compact JSON form, so a copy of the
    value can be matched against the ledger; ``preview`` is redacted.
    """
    (head,) = redact_arguments({name: _head(value, MARKER_PREVIEW_BYTES)}).values()
    return {
        "truncated": True,
        "reason": f"over {ARGUMENT_MAX_BYTES} bytes",
        "bytes": size,
        "sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "preview": _cut_utf8(_json_text(head), MARKER_PREVIEW_BYTES),
    }


def bound_arguments(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return MCP ``arguments`` as they are written to a ledger: bounded, plain JSON, secrets redacted.

    Every value is cut at :data:`ARGUMENT_MAX_DEPTH` levels of nesting, then
    redacted; a value whose JSON form is over :data:`ARGUMENT_MAX_BYTES`
    becomes ``{"truncated": true, "reason", "bytes", "sha256", "preview"}``
    (the first :data:`MARKER_PREVIEW_BYTES` of its redacted JSON); and when
    the whole is still over :data:`ARGUMENTS_MAX_BYTES`, ``args`` itself is
    such a marker with the number of ``arguments``. So one call can never
    write an unbounded line, and a hostile argument cannot make redaction or
    hashing fail.
    """
    if not arguments:
        return {}
    capped: dict[str, Any] = _cap_depth(dict(arguments), ARGUMENT_MAX_DEPTH + 1)
    big: dict[str, Any] = {}
    for name, value in capped.items():
        text = _json_text(value)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > ARGUMENT_MAX_BYTES:
            big[name] = _size_marker(name, value, text, size)
    recorded = redact_arguments({name: big.get(name, value) for name, value in capped.items()})
    text = _json_text(recorded)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= ARGUMENTS_MAX_BYTES:
        return recorded
    return {
        "truncated": True,
        "reason": f"arguments over {ARGUMENTS_MAX_BYTES} bytes together",
        "arguments": len(recorded),
        "bytes": size,
        "preview": _cut_utf8(text, MARKER_PREVIEW_BYTES),
    }


class AuditedCall(TypedDict):
    """One tool call as :meth:`AuditLog.record` writes it."""

    command_id: str
    """The callable (written as ``tool_name``)."""
    tool_name: str
    """The name the client used (written as ``mcp_tool``)."""
    arguments: Mapping[str, Any] | None
    success: bool
    exit_code: int | None
    output: str
    duration_ms: int
    reason: NotRequired[str | None]
    """Why the call was refused or failed, when it was."""
    tenant: NotRequired[str | None]
    actor: NotRequired[str | None]


class AuditLog:
    """An open audit ledger; :meth:`record` appends one tool call to it.

    Opening checks the file once (a torn last line left by a crash is cut
    and logged); each record then re-reads the tip under the file lock, so
    several bridges may share one ledger.
    """

    def __init__(self, path: str | Path, *, key: bytes | None = None, binary: str | None = None) -> None:
        """Open (or create, owner-only) the audit ledger at ``path``.

        Raises:
            ConfigError: ``path`` is a folder or not a regular file, its folder
                is missing, it cannot be opened for writing, or it is not a
                korg-ledger@v1 file.
        """
        self.path = Path(path)
        self.binary = binary
        self.keyed = key is not None
        _prepare(self.path)
        self._writer = LedgerWriter(self.path, key=key)
        seq, _tip = self._writer.tip()
        logger.debug("audit log %s opened at seq %d", self.path, seq)

    @classmethod
    def from_env(
        cls, path: str | None, env: Mapping[str, str], *, binary: str | None = None
    ) -> AuditLog | None:
        """The audit log asked for by ``--audit`` (``path``), else ``KORG_BRIDGE_AUDIT``; None if neither.

        The key comes from ``KORG_LEDGER_KEY`` (UTF-8); unset or empty means an unkeyed SHA-256 chain.

        Raises:
            ConfigError: as for the constructor.
        """
        chosen = audit_path(path, env)
        if chosen is None:
            return None
        return cls(chosen, key=ledger_key(env), binary=binary)

    async def record(self, **call: Unpack[AuditedCall]) -> dict[str, Any]:
        """Append one tool call and return the entry as written ({} if it could not be).

        ``command_id`` becomes ``tool_name`` (the callable), ``tool_name`` the
        ``mcp_tool`` field (the name the client used); ``tenant`` and ``actor``
        are written when given (names the token file validated: no secret,
        nothing to redact). The append runs in a
        worker thread - it waits for the file lock and fsyncs - and is shielded
        from cancellation, so a call cancelled while being recorded is still
        recorded whole.
        """
        command_id, output = call["command_id"], call["output"]
        reason, tenant, actor = call.get("reason"), call.get("tenant"), call.get("actor")

        def write() -> dict[str, Any]:
            preview, truncated = output_preview(output)
            result: dict[str, Any] = {
                "exit_code": call["exit_code"],
                "output_bytes": len(output.encode("utf-8", "surrogatepass")),
                "output": preview,
                "output_truncated": truncated,
            }
            if reason is not None:
                result["reason"] = output_preview(reason)[0]
            fields: dict[str, Any] = {
                "source_agent": SOURCE_AGENT,
                "tool_name": command_id,
                "args": bound_arguments(call["arguments"]),
                "result": result,
                "success": bool(call["success"]),
                "duration_ms": int(call["duration_ms"]),
                "timestamp": _utc_now(),
            }
            if self.binary is not None:
                fields["binary"] = self.binary
            fields["mcp_tool"] = call["tool_name"]
            if tenant is not None:
                fields["tenant"] = tenant
            if actor is not None:
                fields["actor"] = actor
            return self._append(fields)

        try:
            with anyio.CancelScope(shield=True):
                event = await anyio.to_thread.run_sync(write)
        except Exception as exc:  # the audit must never break the call it describes
            logger.error(
                "audit log %s: could not record the call of %s: %s: %s",
                self.path,
                command_id,
                type(exc).__name__,
                exc,
            )
            return {}
        return event

    def _append(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The one write path: ``fields`` chained and appended by :class:`LedgerWriter`.

        Raises:
            ConfigError: the ledger cannot be written.
            ValueError: ``fields`` cannot be serialized.
        """
        return self._writer.append(fields)


def audit_path(flag: str | None, env: Mapping[str, str]) -> Path | None:
    """The audit ledger asked for by ``--audit`` (``flag``), else ``KORG_BRIDGE_AUDIT``; None if neither."""
    chosen = flag or audit_setting(env)
    return Path(chosen).expanduser() if chosen else None


def check_audit_path(path: Path) -> None:
    """Everything :class:`AuditLog` would refuse about ``path``, checked without changing anything.

    The folder must exist; ``path`` must be absent or a regular file we may
    write, and an existing file must be empty or a korg-ledger@v1 chain (see
    :func:`korg_bridge.ledger.file.check_ledger_file`). Nothing is created,
    opened for writing or repaired, so ``--list-tools`` runs exactly the
    checks a server would and fails the same way.

    Raises:
        ConfigError: ``path`` is a folder or not a regular file, its folder is
            missing, it is not writable, or it is not a korg-ledger@v1 file.
    """
    if path.is_dir():
        raise ConfigError(
            f"audit log {path} is a folder. Pass a file path, e.g. {path / 'korg-bridge-audit.jsonl'}."
        )
    if not path.parent.is_dir():
        raise ConfigError(
            f"audit log folder {path.parent} does not exist. Create it, or pass another audit path."
        )
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ConfigError(
            f"cannot use audit log {path}: {exc.strerror or exc}. Check its permissions."
        ) from exc
    if mode is not None and not stat.S_ISREG(mode):
        raise ConfigError(f"audit log {path} is not a regular file. Pass the path of a .jsonl file.")
    writable = os.access(path, os.W_OK) if mode is not None else os.access(path.parent, os.W_OK | os.X_OK)
    if not writable:
        raise _unwritable(path, os.strerror(errno.EACCES))
    if mode is not None:
        check_ledger_file(path, what="audit log")


def _unwritable(path: Path, reason: str) -> ConfigError:
    return ConfigError(
        f"cannot open audit log {path} for writing: {reason}. Check its permissions, or pass another audit path."
    )


def _prepare(path: Path) -> None:
    """Check ``path`` can hold an audit ledger, creating it owner-only if it does not exist.

    Arguments and outputs can be sensitive even after redaction, hence 0600.
    An existing file is never truncated: ``O_APPEND`` without ``O_TRUNC``.

    Raises:
        ConfigError: see :class:`AuditLog`.
    """
    check_audit_path(path)
    try:
        # O_NONBLOCK: a FIFO swapped in since the check is refused (ENXIO), never waited on.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        raise _unwritable(path, exc.strerror or str(exc)) from exc
    os.close(fd)
