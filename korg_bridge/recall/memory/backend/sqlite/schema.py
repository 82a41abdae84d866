"""The memory store's schema, as named migrations applied in order.

The same mechanism as the recall index (:func:`korg_bridge.recall.history.migrations.migrate`:
each step in its own ``BEGIN IMMEDIATE`` transaction, recorded in ``_migrations``),
with the store's own list. Unlike the index, a store recording a migration this
version does not know is never rebuilt: it is someone's data, so opening it is
an error instead (see :mod:`.store`). Append steps; never edit or rename one.
"""

from __future__ import annotations

import secrets
import sqlite3

from korg_bridge.recall.history.migrations import TOKENIZER, Migration

__all__ = ["BRIEF_INDEX", "HEADS_INDEX", "MIGRATIONS", "SCOPE_INDEX", "TABLES", "VECTOR_INDEX"]

VECTOR_INDEX = "memory_vectors_stamp"
"""The index of ``memory_vectors`` on (model id, dimension, row, stamp): which rows have a vector of
a model, and its stamp, without reading a BLOB. Queries name it (``INDEXED BY``): SQLite would look
rows up by their primary key, reading the pages the vectors fill. Every store this version opens
has it (migrations run on open); a later migration may not drop it."""
HEADS_INDEX = "memory_heads"
"""The index of the heads (``superseded_by IS NULL``) on (scope, state, id). Named by the queries
over a scope's heads: left to itself SQLite took the index of every version and read each row to
see whether it was a head (2.7 ms instead of 0.9 at 10k memories). The same promise as above."""
BRIEF_INDEX = "memory_brief"
"""The index of the heads holding every column a brief's listing reads
(:func:`korg_bridge.recall.interop.brief.candidates_sql`), the source's ``kind`` included as the
store's own expression for it (:meth:`~.store.SqliteTx.source_field`): the listing is read from
the index alone. Reading each head's row instead -- its body, its JSON -- was 12 of 13 ms of the
listing at 4k heads, most of a ``context`` call."""
SCOPE_INDEX = "memory_scope_heads"
"""The index of every version on (scope, state, superseded_by): the rows a search ranks, and which
of them are heads, from the index alone -- a recall by meaning lists them once for its coverage
and its ranking (:mod:`.vectors`). Named by that listing; the same promise as above."""


def _create_fts(conn: sqlite3.Connection) -> None:
    # External content: the text lives once, in ``memory``; purging a body and rebuilding this
    # table leaves no copy of it behind.
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5("
        f"title, body, tags, content='memory', content_rowid='rowid', tokenize='{TOKENIZER}')"
    )


def _create_secret(conn: sqlite3.Connection) -> None:
    # The key of forget's confirmation tokens, made with the store so that a first forget
    # (which must change nothing) never has to write it.
    conn.execute("INSERT INTO meta (key, value) VALUES ('forget_secret', ?)", (secrets.token_hex(32),))


MIGRATIONS: list[Migration] = [
    (
        "m001_memory",
        (
            # One row per version; (id, version) names it. The head of a lineage is the row with
            # superseded_by NULL and a state other than pending (a pending row is a proposal that
            # supersedes nothing until approved). JSON columns: tags, source, provenance.
            """
            CREATE TABLE memory (
                rowid INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL,
                version INTEGER NOT NULL,
                scope TEXT NOT NULL,
                type TEXT NOT NULL,
                title TEXT NOT NULL DEFAULT '',
                body TEXT NOT NULL DEFAULT '',
                key TEXT,
                content_hash TEXT NOT NULL,
                tags TEXT NOT NULL DEFAULT '[]',
                pinned INTEGER NOT NULL DEFAULT 0,
                state TEXT NOT NULL,
                trust TEXT NOT NULL DEFAULT 'trusted',
                actor TEXT NOT NULL,
                valid_from TEXT,
                valid_to TEXT,
                recorded_at TEXT NOT NULL,
                retired_at TEXT,
                superseded_by INTEGER,
                superseded_at TEXT,
                expires_at TEXT,
                use_count INTEGER NOT NULL DEFAULT 0,
                last_used_at TEXT,
                source TEXT,
                provenance TEXT NOT NULL DEFAULT '[]',
                reason TEXT,
                conflict INTEGER NOT NULL DEFAULT 0,
                UNIQUE (id, version)
            )
            """,
            "CREATE INDEX memory_current ON memory(scope, state) WHERE superseded_by IS NULL",
            "CREATE INDEX memory_hash ON memory(scope, content_hash) WHERE superseded_by IS NULL",
            "CREATE INDEX memory_key ON memory(scope, key) WHERE key IS NOT NULL AND superseded_by IS NULL",
            # ``similar`` links written by the write policy: src was stored although dst is alike.
            """
            CREATE TABLE memory_links (
                src TEXT NOT NULL,
                dst TEXT NOT NULL,
                kind TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (src, dst, kind)
            )
            """,
            "CREATE INDEX memory_links_dst ON memory_links(dst)",
            # One embedding per version row, beside its model: vectors of two models never mix.
            """
            CREATE TABLE memory_vectors (
                row INTEGER PRIMARY KEY,
                model_id TEXT NOT NULL,
                dim INTEGER NOT NULL,
                vector BLOB NOT NULL
            )
            """,
            # Mirror files, by path relative to the mirror folder. origin: 'ours' (written by
            # korg-recall: may be rewritten or removed), 'user' (made by hand: never touched),
            # 'unparseable' (made by hand, not understood: reported, left alone).
            """
            CREATE TABLE mirror_files (
                path TEXT PRIMARY KEY,
                scope TEXT NOT NULL,
                id TEXT,
                version INTEGER,
                origin TEXT NOT NULL,
                size INTEGER NOT NULL,
                mtime_ns INTEGER NOT NULL,
                sha256 TEXT NOT NULL
            )
            """,
            "CREATE INDEX mirror_files_id ON mirror_files(id)",
            # Operation-log entries committed with their operation, appended to the log after.
            """
            CREATE TABLE oplog_pending (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                op_id TEXT NOT NULL UNIQUE,
                entry TEXT NOT NULL
            )
            """,
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
        ),
    ),
    ("m002_memory_fts", _create_fts),
    ("m003_forget_secret", _create_secret),
    (
        "m004_mirror_dirty",
        (
            # Memories whose mirror file may be out of date, queued by the transaction that changed
            # them and cleared once the file is written or removed (see mirror.reconcile).
            "CREATE TABLE mirror_dirty (id TEXT PRIMARY KEY)",
        ),
    ),
    (
        "m005_claude_interop",
        (
            # Files of Claude Code's (its memory folders, CLAUDE.md/AGENTS.md) that korg-recall read,
            # and the topic files it wrote there when write-back is on (see claude_records.py).
            # kind: claude-auto-memory | instructions | writeback. ids: the lineages a file became
            # (one per part of a long file), JSON. links: the [[wiki-links]] it names, JSON.
            # status: taken | skipped | gone (read ones), ours | archived (written ones).
            """
            CREATE TABLE claude_files (
                path TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                scope TEXT NOT NULL,
                folder TEXT NOT NULL,
                ids TEXT NOT NULL DEFAULT '[]',
                links TEXT NOT NULL DEFAULT '[]',
                size INTEGER NOT NULL DEFAULT 0,
                mtime_ns INTEGER NOT NULL DEFAULT 0,
                sha256 TEXT NOT NULL DEFAULT '',
                status TEXT NOT NULL,
                reason TEXT
            )
            """,
            "CREATE INDEX claude_files_folder ON claude_files(folder)",
            # Project folders under <config>/projects and the project root each belongs to (NULL:
            # not known; tried again when the folder changes). how: transcript | file system | writeback.
            """
            CREATE TABLE claude_folders (
                path TEXT PRIMARY KEY,
                root TEXT,
                how TEXT NOT NULL,
                mtime_ns INTEGER NOT NULL DEFAULT 0
            )
            """,
            # The korg-recall block of a MEMORY.md as korg-recall last wrote it: a block that differs
            # was edited by hand, and is left alone.
            # created: korg-recall made the MEMORY.md itself (it goes when its block is all it holds).
            "CREATE TABLE claude_blocks (path TEXT PRIMARY KEY, scope TEXT NOT NULL, sha256 TEXT NOT NULL, "
            "created INTEGER NOT NULL DEFAULT 0)",
        ),
    ),
    (
        "m006_import_identities",
        (
            # The memory each foreign identity an import wrote (mem0:<id>, mcp-memory:<name>, a Claude
            # Code file) became, by the identity's SHA-256: kept when the memory is purged (which
            # erases its source), so a later import of a changed text under that identity is known
            # as the forgotten memory's and skipped, while nothing readable of it stays.
            "CREATE TABLE import_identities (digest TEXT PRIMARY KEY, id TEXT NOT NULL)",
        ),
    ),
    (
        "m007_sync",
        (
            # Sync between machines (korg_bridge/recall/sync/). One row per version row that sync
            # knows: its operation id across machines (uid), what its lineage-level columns were when
            # last sent or applied (digest: a change is an operation to send), the order of the
            # operation that made it and of the last one that changed it (lamport:machine:seq).
            """
            CREATE TABLE sync_versions (
                rowid INTEGER PRIMARY KEY,
                uid TEXT NOT NULL UNIQUE,
                id TEXT NOT NULL,
                digest TEXT NOT NULL,
                made TEXT NOT NULL,
                changed TEXT NOT NULL
            )
            """,
            "CREATE INDEX sync_versions_id ON sync_versions(id)",
            # This machine's records, as they go into machines/<id>.ops (ciphertext and clear headers).
            "CREATE TABLE sync_out (seq INTEGER PRIMARY KEY, hash TEXT NOT NULL, line BLOB NOT NULL)",
            # How far each other machine's file was applied (its last record: seq, hash, byte span).
            """
            CREATE TABLE sync_peers (
                machine TEXT PRIMARY KEY,
                seq INTEGER NOT NULL,
                hash TEXT NOT NULL,
                start INTEGER NOT NULL,
                stop INTEGER NOT NULL
            )
            """,
            # Memories whose purge went through sync: their data keys are destroyed; the count is the epoch.
            "CREATE TABLE sync_purged (id TEXT PRIMARY KEY)",
            # Version rows written or changed since the last sync, kept by triggers that `sync init`
            # creates (a store that never syncs has none): a sync looks at these rows only.
            "CREATE TABLE sync_dirty (rowid INTEGER PRIMARY KEY)",
        ),
    ),
    (
        "m008_vector_lookups",
        (
            # Which rows have a vector of a model, without reading the vectors (a resident engine
            # keeps them: korg_bridge/recall/memory/backend/sqlite/resident.py), and a scope's rows
            # of every version, which a search ranks (the partial indexes above hold heads only).
            "CREATE INDEX memory_vectors_model ON memory_vectors(model_id, dim, row)",
            "CREATE INDEX memory_scope ON memory(scope, state)",
        ),
    ),
    (
        "m009_vector_stamps",
        (
            # Each vector row's stamp: a random number given by the store itself whenever the row is
            # written (these triggers, whatever writes it -- any version of korg-recall, sync, a
            # person with sqlite3), so a resident engine's kept copy of a vector is used only while
            # the row holds the very write it copied (resident.py); a restored or replaced file
            # cannot repeat a stamp. Read from the index, never from the rows with their BLOBs.
            "ALTER TABLE memory_vectors ADD COLUMN stamp INTEGER",
            "UPDATE memory_vectors SET stamp = random()",
            "CREATE TRIGGER memory_vectors_stamp_new AFTER INSERT ON memory_vectors "
            "BEGIN UPDATE memory_vectors SET stamp = random() WHERE row = new.row; END",
            "CREATE TRIGGER memory_vectors_stamp_changed AFTER UPDATE OF row, model_id, dim, vector "
            "ON memory_vectors BEGIN UPDATE memory_vectors SET stamp = random() WHERE row = new.row; END",
            # Replaces m008's (model_id, dim, row): the same lookups, and the stamp without the row.
            f"CREATE INDEX {VECTOR_INDEX} ON memory_vectors(model_id, dim, row, stamp)",
            "DROP INDEX memory_vectors_model",
        ),
    ),
    (
        "m010_head_ids",
        (
            # Replaces m001's memory_current (scope, state): the heads of a scope with their ids, so
            # a write's duplicate check lists every head of its scope from the index alone.
            f"CREATE INDEX {HEADS_INDEX} ON memory(scope, state, id) WHERE superseded_by IS NULL",
            "DROP INDEX memory_current",
        ),
    ),
    (
        "m011_brief_listing",
        (
            # What a brief lists of a head, in the index (BRIEF_INDEX above). superseded_by is a
            # column although always NULL here: SQLite counts an index as covering a query only when
            # it holds every column the query names, its partial condition's included. The last
            # expression is the store's source_field("kind"), word for word: SQLite uses an index on
            # an expression only for the very same expression.
            f"CREATE INDEX {BRIEF_INDEX} ON memory(scope, state, trust, pinned, recorded_at, id, type, expires_at, "
            "superseded_by, CASE WHEN json_valid(source) THEN json_extract(source, '$.kind') END) "
            "WHERE superseded_by IS NULL",
        ),
    ),
    (
        "m012_scope_heads",
        (
            # Replaces m008's memory_scope (scope, state): the same lookups, and whether a row is a
            # head without reading it (SCOPE_INDEX above).
            f"CREATE INDEX {SCOPE_INDEX} ON memory(scope, state, superseded_by)",
            "DROP INDEX memory_scope",
        ),
    ),
]

TABLES = frozenset(
    {
        "_migrations",
        "memory",
        "memory_fts",
        "memory_links",
        "memory_vectors",
        "mirror_files",
        "oplog_pending",
        "meta",
        "mirror_dirty",
        "claude_files",
        "claude_folders",
        "claude_blocks",
        "import_identities",
        "sync_versions",
        "sync_out",
        "sync_peers",
        "sync_purged",
        "sync_dirty",
    }
)
"""Tables a store opened by this version must have."""
