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
call's texts get the result's (:func:`~korg_bridge.recall.history.ingest.text.with_result`)
and its ``extra`` the result's time. Nothing here parses JSON again: a
result travels as the strings it was converted to when its line was read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from korg_bridge.recall.history.ingest.rows import (
    BODY,
    EXTRA,
    RESULT,
    SUCCESS,
    TEXT,
    TOOL_USE_ID,
    ResultRow,
    Row,
    extra_with,
)
from korg_bridge.recall.history.ingest.text import with_result
from korg_bridge.recall.history.query.fts import FTS_DELETE_ROW, FTS_INSERT_ROW

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


def attach(row: Row, result: ResultRow) -> Row:
    """The call ``row`` completed with ``result``."""
    text, body = with_result(row[TEXT], row[BODY] or "", result.preview, result.full)
    extra = extra_with(row[EXTRA], "result_timestamp", result.timestamp) if result.timestamp else row[EXTRA]
    return (
        *row[:RESULT],
        result.result,
        result.success,
        *row[SUCCESS + 1 : EXTRA],
        extra,
        row[TOOL_USE_ID],
        text,
        body or None,
        *row[BODY + 1 :],
    )


class SlicePairing:
    """Joins calls and results met while one slice is parsed (the rows of the slice are
    completed in place); the rest is :attr:`leftover`."""

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows
        self._open: dict[str, int] = {}
        self.leftover: list[ResultRow] = []
        """Results whose call is not in this slice (or came after them): the writer settles them."""

    def call(self, position: int) -> None:
        """Note the call at ``position`` of the rows, which may get its result later in the slice."""
        row = self._rows[position]
        if row[TOOL_USE_ID] is not None and row[RESULT] is None:
            self._open[row[TOOL_USE_ID]] = position

    def result(self, result: ResultRow) -> None:
        """Join ``result`` to its call in this slice, or keep it for the writer."""
        position = self._open.pop(result.tool_use_id, None)
        if position is None:
            self.leftover.append(result)
        else:
            self._rows[position] = attach(self._rows[position], result)


def take_pending(conn: sqlite3.Connection, source_id: int, rows: list[tuple[Any, ...]]) -> None:
    """Give results that waited in ``pending_patches`` to their calls among ``rows`` (about to be
    inserted; rewritten in place), before the rows are written."""
    pending = conn.execute(_PENDING, (source_id,)).fetchall()
    if not pending:
        return
    open_calls = {row[TOOL_USE_ID]: position for position, row in enumerate(rows) if row[RESULT] is None}
    for pending_id, tool_use_id, result, success, timestamp, preview, full in pending:
        position = open_calls.pop(tool_use_id, -1)
        if position < 0:
            continue
        rows[position] = attach(
            rows[position], ResultRow(tool_use_id, result, success, timestamp, preview, full)
        )
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
        if result.timestamp:
            extra = extra_with(extra, "result_timestamp", result.timestamp)
        conn.execute(FTS_DELETE_ROW, (event_id, old_text, old_body))
        conn.execute(_COMPLETE_CALL, (result.result, result.success, extra, text, body or None, event_id))
        conn.execute(FTS_INSERT_ROW, (event_id, text, body or None))
