"""The recall index schema, as named migrations applied in order.

The index is a cache that outlives the program version that wrote it, so its
schema is never created ad hoc: each change is a new named step appended to
:data:`MIGRATIONS`, and the ``_migrations`` table records which steps a
database has seen. Each step runs in its own ``BEGIN IMMEDIATE`` transaction,
so two processes opening a blank index at once cannot both apply it. A
database recording a step this version does not know was written by a newer
version (or by another program): :func:`migrate` refuses it with
:class:`SchemaMismatch`, and the index rebuilds rather than guess.
(Pattern: sqlite-utils / llm ``migrations.py``.)
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Sequence

from korg_bridge.errors import SchemaMismatch

__all__ = ["APPLICATION_ID", "MIGRATIONS", "Migration", "SchemaMismatch", "applied", "ensure_wal", "migrate"]

Step = Sequence[str] | Callable[[sqlite3.Connection], None]
Migration = tuple[str, Step]
"""A name (never reused, never renamed) and its SQL statements or a callable."""

TOKENIZER = "porter unicode61 remove_diacritics 2"
"""Stemming lets ``fixing`` find ``fixed``; unicode61 splits ``math_utils.py`` into words."""

APPLICATION_ID = 0x4B52434C
"""``PRAGMA application_id`` of every index (ASCII ``KRCL``): how korg-recall recognises its own
database before moving a broken one aside (see :mod:`korg_bridge.recall.history.ownership`)."""

FTS_HASH_BYTES = 16 * 1024 * 1024
"""Tokens FTS5 buffers in memory before writing a segment: fewer, larger segments on a cold build."""


def _create_fts(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE VIRTUAL TABLE events_fts USING fts5("
        f"text, content='events', content_rowid='id', tokenize='{TOKENIZER}')"
    )
    # 'hashsize' is recent (SQLite 3.4x); older builds keep their default.
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('hashsize', ?)", (FTS_HASH_BYTES,))


def _create_fts_with_body(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE VIRTUAL TABLE events_fts USING fts5("
        f"text, body, content='events', content_rowid='id', tokenize='{TOKENIZER}')"
    )
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('hashsize', ?)", (FTS_HASH_BYTES,))


def _full_text_kinds_projects(conn: sqlite3.Connection) -> None:
    """Full text, honest kinds, projects, fingerprints, gone files and skipped-line records.

    Every event indexed so far was read by rules this step replaces (machine-written text
    labelled ``user_prompt``, results cut to 300 characters, no project): the cached events
    are dropped and read again on the next refresh, under ids never used before.
    """
    for statement in (
        "DELETE FROM vector_chunks",  # first: the delete trigger then records nothing stale
        "DELETE FROM vector_stale",
        "DROP TABLE events_fts",
        "DELETE FROM pending_patches",
        "DELETE FROM events",
        "DELETE FROM sources",
        # The full text of an event whose head (``text``) had to leave something out.
        "ALTER TABLE events ADD COLUMN body TEXT",
        # The canonical root of the session's cwd (korg_bridge.recall.project): filtered on.
        "ALTER TABLE events ADD COLUMN project TEXT",
        # A fingerprint of the file's first head_len bytes: a rewrite in place is told from growth.
        "ALTER TABLE sources ADD COLUMN head_len INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sources ADD COLUMN head_sha TEXT",
        # What the shape parser remembers at "offset" (a Codex rollout's session and cwd).
        "ALTER TABLE sources ADD COLUMN parse_state TEXT",
        # When the file disappeared; its events stay searchable until `korg-recall prune --gone`.
        "ALTER TABLE sources ADD COLUMN gone_at REAL",
        # A waiting result's texts, computed when its line was read.
        "ALTER TABLE pending_patches ADD COLUMN preview TEXT",
        "ALTER TABLE pending_patches ADD COLUMN full_text TEXT",
        # The first lines of each file that could not be read, with why (all are counted in sources).
        """
        CREATE TABLE skipped_lines (
            source_id INTEGER NOT NULL REFERENCES sources(id),
            line_no INTEGER NOT NULL,
            reason TEXT NOT NULL
        )
        """,
        "CREATE INDEX skipped_lines_source ON skipped_lines(source_id, line_no)",
    ):
        conn.execute(statement)
    _create_fts_with_body(conn)


MIGRATIONS: list[Migration] = [
    (
        "m001_sources_and_events",
        (
            """
            CREATE TABLE sources (
                id INTEGER PRIMARY KEY,
                path TEXT NOT NULL UNIQUE,
                inode INTEGER,
                dev INTEGER,
                size INTEGER NOT NULL DEFAULT 0,
                mtime_ns INTEGER NOT NULL DEFAULT 0,
                "offset" INTEGER NOT NULL DEFAULT 0,
                line_no INTEGER NOT NULL DEFAULT 0,
                skipped INTEGER NOT NULL DEFAULT 0,
                ignored INTEGER NOT NULL DEFAULT 0,
                indexed_at REAL
            )
            """,
            # AUTOINCREMENT: an id (the ``e<id>`` ref) is never reused for another event. ``ts`` is
            # ``timestamp`` in epoch seconds, for since/until; ``text`` is what search ranks.
            """
            CREATE TABLE events (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                source_id INTEGER NOT NULL REFERENCES sources(id),
                "offset" INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                shape TEXT NOT NULL,
                session TEXT,
                agent TEXT,
                tool TEXT,
                args TEXT,
                result TEXT,
                success INTEGER,
                timestamp TEXT,
                ts REAL,
                triggered_by INTEGER,
                extra TEXT,
                tool_use_id TEXT,
                text TEXT NOT NULL
            )
            """,
            # One line can hold several events (Claude Code text + tool_use blocks): not unique.
            # No index on ts: time filters apply to FTS candidates or to a scan anyway.
            'CREATE INDEX events_source_offset ON events(source_id, "offset")',
            "CREATE INDEX events_tool ON events(tool)",
            "CREATE INDEX events_tool_use ON events(source_id, tool_use_id) WHERE tool_use_id IS NOT NULL",
        ),
    ),
    ("m002_events_fts", _create_fts),
    (
        "m003_pending_patches_and_meta",
        (
            # A tool_result whose tool_use is not indexed yet waits here for it.
            """
            CREATE TABLE pending_patches (
                id INTEGER PRIMARY KEY,
                source_id INTEGER NOT NULL REFERENCES sources(id),
                tool_use_id TEXT NOT NULL,
                result TEXT,
                success INTEGER,
                timestamp TEXT
            )
            """,
            "CREATE INDEX pending_patches_key ON pending_patches(source_id, tool_use_id)",
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
        ),
    ),
    (
        "m004_vectors",
        (
            # Embeddings in chunks of up to 256 events (see korg_bridge.recall.semantic.vectors): a query reads
            # a few hundred BLOBs, not one row per event. model_id and dim sit beside every chunk, so
            # vectors of two models are never compared. Small columns first: reading them never
            # touches the BLOBs' overflow pages.
            """
            CREATE TABLE vector_chunks (
                id INTEGER PRIMARY KEY,
                model_id TEXT NOT NULL,
                dim INTEGER NOT NULL,
                count INTEGER NOT NULL,
                ids BLOB NOT NULL,
                vectors BLOB NOT NULL
            )
            """,
            "CREATE INDEX vector_chunks_model ON vector_chunks(model_id, count)",
            # Events whose vectors no longer match them (text changed by a late tool result, or the
            # event was deleted): masked at query time, dropped and re-embedded by the next pass.
            # Recorded only once some vector exists, so an index without embeddings never grows it.
            "CREATE TABLE vector_stale (event_id INTEGER PRIMARY KEY)",
            """
            CREATE TRIGGER events_vector_text AFTER UPDATE OF text ON events
            WHEN old.text IS NOT new.text AND EXISTS (SELECT 1 FROM vector_chunks)
            BEGIN
                INSERT OR IGNORE INTO vector_stale (event_id) VALUES (old.id);
            END
            """,
            """
            CREATE TRIGGER events_vector_delete AFTER DELETE ON events
            WHEN EXISTS (SELECT 1 FROM vector_chunks)
            BEGIN
                INSERT OR IGNORE INTO vector_stale (event_id) VALUES (old.id);
            END
            """,
        ),
    ),
    (
        "m005_vectors_of_prose_text",
        (
            # Events are now embedded as prose (korg_bridge.recall.history.ingest.text.embed_text), not as the
            # key=value text BM25 searches: vectors of the old form would be compared with queries
            # as if they were of the new one. Dropped here, they are computed again lazily.
            "DELETE FROM vector_chunks",
            "DELETE FROM vector_stale",
        ),
    ),
    # Marks the file as korg-recall's, in its header: only a database carrying this id (or, for
    # indexes older than this step, our _migrations table) is ever moved aside and rebuilt.
    ("m006_application_id", (f"PRAGMA application_id = {APPLICATION_ID}",)),
    ("m007_full_text_kinds_projects", _full_text_kinds_projects),
    (
        "m008_vector_windows",
        (
            # An event may now have several vectors (windows of a long prompt or reply), read as a
            # tool call's gist rather than its whole output (korg_bridge.recall.semantic.embedtext): vectors of
            # the old form are dropped here and computed again by the background indexer.
            "DELETE FROM vector_chunks",
            "DELETE FROM vector_stale",
            # Distinct events in the chunk (count is its vectors): coverage is a sum, no BLOB read.
            "ALTER TABLE vector_chunks ADD COLUMN events INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    (
        "m009_newest_prompt_per_project",
        (
            # The session-start brief's first question (korg_bridge.recall.interop.threads): a project's
            # newest typed prompt, read from the end of this index instead of sorting every prompt.
            # Partial: prompts are a small part of the events, so indexing stays as fast.
            "CREATE INDEX events_project_prompts ON events(project, ts) WHERE tool = 'user_prompt'",
        ),
    ),
    (
        "m010_coverage_from_an_index",
        (
            # m008's ``events`` column was added after the BLOBs, so reading it walked each chunk's
            # overflow pages (every vector, 24 ms at 20k events): coverage now reads this index only.
            "CREATE INDEX vector_chunks_coverage ON vector_chunks(model_id, dim, events)",
        ),
    ),
    (
        "m011_chunk_stamps",
        (
            # A fresh random stamp on every chunk written (korg_bridge.recall.semantic.vectors): a
            # resident engine keeps chunks in memory and reuses one only while its stamp is the
            # same. An id is no identity: the open chunk is deleted and inserted again, and SQLite
            # hands the freed largest id out again. Listed from the index, never the rows.
            "ALTER TABLE vector_chunks ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0",
            "UPDATE vector_chunks SET stamp = random()",
            "CREATE INDEX vector_chunks_stamps ON vector_chunks(model_id, dim, stamp)",
        ),
    ),
]


def _ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")


def applied(conn: sqlite3.Connection) -> list[str]:
    """Return the names of the migrations recorded in ``conn``, oldest first ([] for a blank database)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'"
    ).fetchone()
    if exists is None:
        return []
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply the migrations ``conn`` has not seen, each in its own transaction; return their names.

    ``conn`` must be in autocommit mode (``isolation_level=None``) so the
    transactions here are the only ones. Costs one read when nothing is due,
    which is the case on every open but the first.

    Raises:
        SchemaMismatch: the database records a migration not in ``migrations``.
        sqlite3.Error: the database cannot be read or written.
    """
    known = [name for name, _ in migrations]
    seen = applied(conn)
    _check_known(seen, known)
    if len(seen) == len(known):
        return []
    done: list[str] = []
    for name, step in migrations:
        if name in seen:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            _ensure_table(conn)
            # Another process may have applied it while we waited for the write lock.
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                conn.execute("COMMIT")
                continue
            if callable(step):
                step(conn)
            else:
                for statement in step:
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%SZ'))",
                (name,),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        done.append(name)
    _check_known(applied(conn), known)
    return done


def _check_known(seen: Sequence[str], known: Sequence[str]) -> None:
    unknown = [name for name in seen if name not in known]
    if unknown:
        raise SchemaMismatch(f"unknown migrations {', '.join(unknown)}")


def ensure_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch a database of ours (the index, a memory store) to WAL once.

    While another process is creating the same file the switch fails at once with "locked"
    (SQLite does not busy-wait for it), so retry with a short back-off for up to ``timeout`` s.

    Raises:
        sqlite3.OperationalError: still locked after ``timeout``, or another failure.
    """
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
