"""The one place a tool call meets its result.

Claude Code writes a ``tool_result`` on a later line than its ``tool_use``,
and Codex a ``function_call_output`` after its ``function_call``: the call
is an event, the result joins it by ``tool_use_id`` (Codex's ``call_id``).
"Later" can mean three places, handled here in that order:

1. **the same slice** — :class:`SlicePairing`, while the slice is parsed
   (in the indexing process or the parsing worker): the row is completed
   before it is ever written;
2. **an earlier slice or refresh** — :func:`settle`, when the slice is
   written: the stored call is updated, its full-text row too;
3. **not read yet** (a result before its call) — :func:`settle` keeps it in
   ``pending_patches``, and :func:`take_pending` hands it to the call when
   that is written.

A result joins the newest call with its id that has no result yet; the
call's texts get the result's (:func:`~korg_bridge.recall.text.with_result`)
and its ``extra`` the result's time. Nothing here parses JSON again: a
result travels as the strings it was converted to when its line was read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from korg_bridge.recall.fts import FTS_DELETE_ROW, FTS_INSERT_ROW
from korg_bridge.recall.rows import ResultRow, Row
from korg_bridge.recall.text import with_result

__all__ = ["SlicePairing", "attach", "settle", "take_pending"]

_PENDING = (
    "SELECT id, tool_use_id, result, success, timestamp, preview, full_text"
    " FROM pending_patches WHERE source_id = ? ORDER BY id"
)
_KEEP_PENDING = (
    "INSERT INTO pending_patches (source_id, tool_use_id, result, success, timestamp, preview, full_text)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_STORED_CALL = (
    "SELECT id, text, body, extra FROM events"
    " WHERE source_id = ? AND tool_use_id = ? AND result IS NULL ORDER BY id DESC LIMIT 1"
)
_COMPLETE_CALL = "UPDATE events SET result = ?, success = ?, extra = ?, text = ?, body = ? WHERE id = ?"


def _extra_with(extra: str | None, timestamp: str | None) -> str | None:
    if not timestamp:
        return extra
    # ``extra`` was dumped from a small dict of this program's own making: safe to load again.
    values: dict[str, Any] = json.loads(extra) if extra else {}
    values["result_timestamp"] = timestamp
    return json.dumps(values, ensure_ascii=False, separators=(",", ":"))


def attach(row: Row, result: ResultRow) -> None:
    """Complete the call ``row`` with ``result`` (in place)."""
    row.result = result.result
    row.success = result.success
    row.extra = _extra_with(row.extra, result.timestamp)
    text, body = with_result(row.text, row.body or "", result.preview, result.full)
    row.text, row.body = text, body or None


class SlicePairing:
    """Joins calls and results met while one slice is parsed; the rest is :attr:`leftover`."""

    def __init__(self) -> None:
        self._open: dict[str, Row] = {}
        self.leftover: list[ResultRow] = []
        """Results whose call is not in this slice (or came after them): the writer settles them."""

    def call(self, row: Row) -> None:
        """Note a call that may get its result later in the slice."""
        if row.tool_use_id is not None and row.result is None:
            self._open[row.tool_use_id] = row

    def result(self, result: ResultRow) -> None:
        """Join ``result`` to its call in this slice, or keep it for the writer."""
        row = self._open.pop(result.tool_use_id, None)
        if row is None:
            self.leftover.append(result)
        else:
            attach(row, result)


def take_pending(conn: sqlite3.Connection, source_id: int, rows: list[tuple[Any, ...]]) -> None:
    """Give results that waited in ``pending_patches`` to their calls among ``rows`` (about to be
    inserted; rewritten in place), before the rows are written."""
    pending = conn.execute(_PENDING, (source_id,)).fetchall()
    if not pending:
        return
    open_calls: dict[str, int] = {}
    for position, values in enumerate(rows):
        row = Row.from_values(values)
        if row.tool_use_id is not None and row.result is None:
            open_calls[row.tool_use_id] = position
    for pending_id, tool_use_id, result, success, timestamp, preview, full in pending:
        if tool_use_id not in open_calls:
            continue
        position = open_calls.pop(tool_use_id)
        row = Row.from_values(rows[position])
        attach(row, ResultRow(tool_use_id, result, success, timestamp, preview or "", full or ""))
        rows[position] = row.values()
        conn.execute("DELETE FROM pending_patches WHERE id = ?", (pending_id,))


def settle(conn: sqlite3.Connection, source_id: int, results: Sequence[ResultRow]) -> None:
    """Join each result to its stored call (after the slice's rows are written), or keep it pending."""
    for result in results:
        found = conn.execute(_STORED_CALL, (source_id, result.tool_use_id)).fetchone()
        if found is None:
            conn.execute(
                _KEEP_PENDING,
                (
                    source_id,
                    result.tool_use_id,
                    result.result,
                    result.success,
                    result.timestamp,
                    result.preview,
                    result.full,
                ),
            )
            continue
        event_id, old_text, old_body, extra = found
        text, body = with_result(old_text, old_body or "", result.preview, result.full)
        conn.execute(FTS_DELETE_ROW, (event_id, old_text, old_body))
        conn.execute(
            _COMPLETE_CALL,
            (
                result.result,
                result.success,
                _extra_with(extra, result.timestamp),
                text,
                body or None,
                event_id,
            ),
        )
        conn.execute(FTS_INSERT_ROW, (event_id, text, body or None))
