"""The bridge's audit log: one korg-ledger@v1 entry per tool call.

``--audit PATH`` (or ``KORG_BRIDGE_AUDIT``) makes the bridge append every
tool call it answers - run, failed, denied or invalid - to a hash-chained
journal that ``korg-recall verify`` checks and ``korg-recall search`` finds.
Hashing, locking and crash safety belong to :class:`~korg_bridge.ledger.LedgerWriter`;
this module only decides what an entry says, so the two cannot drift apart.

An entry is the flat journal shape of the conformance vectors::

    schema_version, seq_id,                  (the writer's)
    source_agent   "agent:korg-bridge@VERSION"
    tool_name      the callable's command_id (what recall filters on)
    args           the MCP arguments, secrets redacted
    result         {exit_code, output_bytes, output, output_truncated[, reason]}
    success, duration_ms,
    timestamp      ISO-8601 UTC with Z, millisecond precision, taken when the call is recorded
    binary         the bridged binary (extra field; omitted when unknown)
    mcp_tool       the MCP tool name the client called (extra field)
    prev_hash, entry_hash                    (the writer's)

``result.output`` is the first :data:`OUTPUT_PREVIEW_BYTES` of the text the
agent saw: enough to tell what happened, small enough that a chatty tool
cannot bloat the ledger. ``output_bytes`` is the size of the whole text.

Secrets never reach the file. Arguments, output, reason, even property
names go through :mod:`korg_bridge.redact`, the one redactor: the value of
any property whose name is secret-like (``api_key``, ``db_pass``) becomes
``[redacted]``, and credential formats in text (vendor keys, JWTs, private
keys, ``KEY=value`` lines, URL passwords, ``curl -u``) do too.

A failure to append is logged and swallowed: losing an audit line must
never fail the tool call it describes.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from korg_bridge._version import __version__
from korg_bridge.errors import ConfigError
from korg_bridge.ledger import LedgerWriter
from korg_bridge.redact import is_secret_name, redact, redact_arguments

__all__ = [
    "ENV_AUDIT",
    "ENV_LEDGER_KEY",
    "OUTPUT_PREVIEW_BYTES",
    "SOURCE_AGENT",
    "AuditLog",
    "is_secret_name",
    "redact_arguments",
]

logger = logging.getLogger(__name__)

ENV_AUDIT = "KORG_BRIDGE_AUDIT"
ENV_LEDGER_KEY = "KORG_LEDGER_KEY"
"""The HMAC key of keyed ledgers; the same variable ``korg-recall verify`` reads."""

SOURCE_AGENT = f"agent:korg-bridge@{__version__}"

OUTPUT_PREVIEW_BYTES = 2048
"""Output kept per entry (UTF-8 bytes): what happened, not the whole transcript."""
_REDACT_MARGIN_CHARS = 4096
"""Text redacted beyond the preview, so a secret that straddles the preview's end
is still seen whole (and matched) by the credential patterns."""
_HEAD_BYTES = 64 * 1024
"""Bytes read to check that an existing file is a ledger: covers any normal first line."""


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


def _is_chained_line(raw: bytes) -> bool:
    try:
        obj = json.loads(raw)
    except ValueError:
        return False
    seq = obj.get("seq_id") if isinstance(obj, dict) else None
    return isinstance(seq, int) and not isinstance(seq, bool) and isinstance(obj.get("entry_hash"), str)


def _not_a_ledger(path: Path) -> ConfigError:
    return ConfigError(
        f"audit log {path} is not a korg-ledger@v1 file; refusing to write to it. "
        "Pass a new file, or an existing korg-ledger@v1 ledger."
    )


def _check_head(path: Path) -> None:
    """Refuse an existing file that is not a ledger before the writer repairs (cuts) its tail.

    The writer cuts an unterminated last line as torn; on a file that is not a
    ledger at all (a config without a final newline) that would destroy data.

    Raises:
        ConfigError: the file is not a korg-ledger@v1 ledger, or cannot be read.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError as exc:
        raise ConfigError(
            f"cannot read audit log {path}: {exc.strerror or exc}. Check its permissions."
        ) from exc
    body = head.lstrip()
    if not body:
        return
    if not body.startswith(b"{"):
        raise _not_a_ledger(path)
    end = body.find(b"\n")
    if end >= 0:
        if not _is_chained_line(body[:end]):
            raise _not_a_ledger(path)
    elif len(head) < _HEAD_BYTES:
        # One unterminated line: a torn first entry (cut later) or a whole foreign JSON file.
        try:
            json.loads(body)
        except ValueError:
            return
        if not _is_chained_line(body):
            raise _not_a_ledger(path)


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
        chosen = path or env.get(ENV_AUDIT)
        if not chosen:
            return None
        key = env.get(ENV_LEDGER_KEY)
        return cls(Path(chosen).expanduser(), key=key.encode("utf-8") if key else None, binary=binary)

    async def record(
        self,
        *,
        command_id: str,
        tool_name: str,
        arguments: Mapping[str, Any] | None,
        success: bool,
        exit_code: int | None,
        output: str,
        duration_ms: int,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Append one tool call and return the entry as written ({} if it could not be).

        ``command_id`` becomes ``tool_name`` (the callable), ``tool_name`` the
        ``mcp_tool`` field (the name the client used). The append runs in a
        worker thread - it waits for the file lock and fsyncs - and is shielded
        from cancellation, so a call cancelled while being recorded is still
        recorded whole.
        """

        def write() -> dict[str, Any]:
            preview, truncated = output_preview(output)
            result: dict[str, Any] = {
                "exit_code": exit_code,
                "output_bytes": len(output.encode("utf-8", "surrogatepass")),
                "output": preview,
                "output_truncated": truncated,
            }
            if reason is not None:
                result["reason"] = redact(reason)[0]
            fields: dict[str, Any] = {
                "source_agent": SOURCE_AGENT,
                "tool_name": command_id,
                "args": redact_arguments(arguments),
                "result": result,
                "success": bool(success),
                "duration_ms": int(duration_ms),
                "timestamp": _utc_now(),
            }
            if self.binary is not None:
                fields["binary"] = self.binary
            fields["mcp_tool"] = tool_name
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


def _prepare(path: Path) -> None:
    """Check ``path`` can hold an audit ledger, creating it owner-only if it does not exist.

    Arguments and outputs can be sensitive even after redaction, hence 0600.

    Raises:
        ConfigError: see :class:`AuditLog`.
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
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigError(
            f"cannot open audit log {path} for writing: {exc.strerror or exc}. "
            "Check its permissions, or pass another audit path."
        ) from exc
    os.close(fd)
    _check_head(path)
