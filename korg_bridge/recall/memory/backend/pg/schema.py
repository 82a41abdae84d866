"""The team store's schema, as named migrations applied in order (by ``korg-recall store migrate``).

The same discipline as the SQLite store (:mod:`..schema`): each step is a name that
is never reused or renamed and its statements, applied in its own transaction and
recorded in ``korg_recall._migrations``; a database recording a step this version
does not know was written by a newer korg-recall, and is refused, never touched.

Everything lives in schema ``korg_recall``. The tables mirror the SQLite store's
(the same columns, so the shared SQL runs on both) with these differences:

* every tenant table has ``tenant_id`` (defaulting to the transaction's
  ``korg.tenant`` setting, never empty), is ``ENABLE`` + ``FORCE ROW LEVEL
  SECURITY``, and has one policy: rows whose ``tenant_id`` is the setting's.
  Without the setting no row is visible, and none can be written;
* text columns are ``COLLATE "C"``: timestamps, ids and scopes compare and sort
  byte by byte, as in SQLite, whatever the database's locale;
* keyword search is a generated ``tsvector`` (:data:`TEXT_CONFIG`, stemming
  without stop words, like FTS5's porter tokenizer; separators as unicode61
  treats them): a purge's UPDATE recomputes it, so no token of purged text stays
  in the column. It has no GIN index, which row-level security would keep the
  application role from using (see :mod:`.fulltext`);
* vectors are pgvector ``halfvec`` (half the bytes of float32; cosine ranks alike)
  with an HNSW index per model dimension (:data:`HNSW_M`, :data:`HNSW_EF_CONSTRUCTION`);
* the operation log is table ``memory_ops``, hash-chained per tenant, and ``memory_ops_head``
  keeps each tenant's last entry (:mod:`.oplog`);
  there is no mirror (a team store is not one person's folder of files).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "APP_TABLES",
    "HNSW_DIMS",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "MIGRATIONS",
    "SCHEMA",
    "SEPARATORS",
    "TENANT_TABLES",
    "TEXT_CONFIG",
    "grant_statements",
]

SCHEMA = "korg_recall"
TEXT_CONFIG = f"{SCHEMA}.english"
"""English stemming (snowball, as FTS5's porter) and no stop words (FTS5 keeps them too)."""
SEPARATORS = "_./:@-+#"
"""Characters read as spaces before tokenizing, as unicode61 does: ``math_utils.py``, ``3.10`` and
``billing-api`` are words (``math utils py``, ``3 10``, ``billing api``), not one host-name token."""
HNSW_M = 16
"""Links per node of the HNSW graph (pgvector's default): recall@10 above 0.95 at 384 dimensions."""
HNSW_EF_CONSTRUCTION = 64
"""Candidates kept while building (pgvector's default): build time against graph quality."""
HNSW_DIMS = (384,)
"""Dimensions with an HNSW index: 384 is the default embedding models' (bge-small, MiniLM). Vectors
of other dimensions are stored and compared too, by an exact scan of the tenant's rows."""

TENANT_TABLES = (
    "memory",
    "memory_links",
    "memory_vectors",
    "memory_ops",
    "memory_ops_head",
    "import_identities",
)
_M001_TABLES = TENANT_TABLES[:4]
"""The tenant tables the first migration made (a migration never changes once released)."""
APP_TABLES: dict[str, str] = {
    "memory": "SELECT, INSERT, UPDATE, DELETE",
    "memory_links": "SELECT, INSERT, UPDATE, DELETE",
    "memory_vectors": "SELECT, INSERT, UPDATE, DELETE",
    "memory_ops": "SELECT, INSERT",
    "memory_ops_head": "SELECT, INSERT, UPDATE",
    "import_identities": "SELECT, INSERT, UPDATE, DELETE",
    "meta": "SELECT",
    "_migrations": "SELECT",
}
"""What the application role may do: no UPDATE or DELETE on the log (append only), no DDL."""
MAINTAINED = ("memory", "memory_links", "memory_vectors")
"""Tables the application role may VACUUM after a purge (PostgreSQL 17's MAINTAIN privilege)."""

_TENANT = (
    "tenant_id text COLLATE \"C\" NOT NULL DEFAULT current_setting('korg.tenant', true) "
    "CHECK (tenant_id <> '')"
)
_TEXT = 'text COLLATE "C"'
_TSV = (
    f"to_tsvector('{TEXT_CONFIG}'::regconfig, translate(title || ' ' || body || ' ' || tags, "
    f"'{SEPARATORS}', '{' ' * len(SEPARATORS)}'))"
)


def _isolated(table: str) -> list[str]:
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant_isolation ON {table} "
        "USING (tenant_id = current_setting('korg.tenant', true)) "
        "WITH CHECK (tenant_id = current_setting('korg.tenant', true))",
    ]


def _hnsw(dim: int) -> str:
    return (
        f"CREATE INDEX memory_vectors_hnsw_{dim} ON memory_vectors USING hnsw "
        f"((vector::halfvec({dim})) halfvec_cosine_ops) WITH (m = {HNSW_M}, "
        f"ef_construction = {HNSW_EF_CONSTRUCTION}) WHERE dim = {dim}"
    )


def _forget_secret(conn: Any) -> None:
    # The root of forget's confirmation-token keys; each tenant's key is an HMAC of it (store.py),
    # so a first forget -- which must change nothing -- never has to write one.
    conn.execute("INSERT INTO meta (key, value) VALUES ('forget_secret', %s)", (secrets.token_hex(32),))


def _ops_head(conn: Any) -> None:
    # The last entry appended to each tenant's log, updated with it: rows deleted at the log's end
    # are then missing, not a shorter chain that verifies (see oplog.py). The roles that may append
    # to the log may keep its head too, so an upgrade needs no new grant.
    conn.execute(
        f"""
        CREATE TABLE memory_ops_head (
            {_TENANT} PRIMARY KEY,
            seq_id bigint NOT NULL CHECK (seq_id > 0),
            entry_hash {_TEXT} NOT NULL
        )
        """
    )
    for statement in _isolated("memory_ops_head"):
        conn.execute(statement)
    _grant_like(conn, "memory_ops_head", "memory_ops")


def _import_identities(conn: Any) -> None:
    # What each foreign identity an import wrote became, by the identity's SHA-256 (see the SQLite
    # store's m006_import_identities): outlives a purge, holds nothing readable. The roles that may
    # write memories may keep these too, so an upgrade needs no new grant.
    conn.execute(
        f"""
        CREATE TABLE import_identities (
            {_TENANT},
            digest {_TEXT} NOT NULL,
            id {_TEXT} NOT NULL,
            PRIMARY KEY (tenant_id, digest)
        )
        """
    )
    for statement in _isolated("import_identities"):
        conn.execute(statement)
    _grant_like(conn, "import_identities", "memory")


def _grant_like(conn: Any, table: str, like: str) -> None:
    """Grant ``table``'s application privileges to every role that may insert into ``like``: a table
    a later migration adds reaches the roles ``store migrate --grant`` already named."""
    grantees = conn.execute(
        "SELECT DISTINCT grantee FROM information_schema.role_table_grants WHERE table_schema = %s "
        "AND table_name = %s AND privilege_type = 'INSERT' AND grantee <> current_user",
        (SCHEMA, like),
    ).fetchall()
    for (grantee,) in grantees:
        role = '"' + str(grantee).replace('"', '""') + '"'
        conn.execute(f"GRANT {APP_TABLES[table]} ON {SCHEMA}.{table} TO {role}")


Step = Sequence[str] | Callable[[Any], None]

MIGRATIONS: list[tuple[str, Step]] = [
    (
        "m001_memory",
        (
            f"CREATE TEXT SEARCH DICTIONARY {SCHEMA}.english_stem (TEMPLATE = snowball, Language = english)",
            f"CREATE TEXT SEARCH CONFIGURATION {TEXT_CONFIG} (COPY = pg_catalog.english)",
            f"ALTER TEXT SEARCH CONFIGURATION {TEXT_CONFIG} ALTER MAPPING FOR asciiword, asciihword, "
            f"hword_asciipart, word, hword, hword_part WITH {SCHEMA}.english_stem",
            f"""
            CREATE TABLE memory (
                rowid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                {_TENANT},
                id {_TEXT} NOT NULL,
                version integer NOT NULL,
                scope {_TEXT} NOT NULL,
                type {_TEXT} NOT NULL,
                title {_TEXT} NOT NULL DEFAULT '',
                body {_TEXT} NOT NULL DEFAULT '',
                key {_TEXT},
                content_hash {_TEXT} NOT NULL,
                tags {_TEXT} NOT NULL DEFAULT '[]',
                pinned integer NOT NULL DEFAULT 0,
                state {_TEXT} NOT NULL,
                trust {_TEXT} NOT NULL DEFAULT 'trusted',
                actor {_TEXT} NOT NULL,
                valid_from {_TEXT},
                valid_to {_TEXT},
                recorded_at {_TEXT} NOT NULL,
                retired_at {_TEXT},
                superseded_by integer,
                superseded_at {_TEXT},
                expires_at {_TEXT},
                use_count integer NOT NULL DEFAULT 0,
                last_used_at {_TEXT},
                source {_TEXT},
                provenance {_TEXT} NOT NULL DEFAULT '[]',
                reason {_TEXT},
                conflict integer NOT NULL DEFAULT 0,
                tsv tsvector GENERATED ALWAYS AS ({_TSV}) STORED,
                UNIQUE (tenant_id, id, version),
                UNIQUE (tenant_id, rowid)
            )
            """,
            "CREATE INDEX memory_current ON memory (tenant_id, scope, state) WHERE superseded_by IS NULL",
            "CREATE INDEX memory_hash ON memory (tenant_id, scope, content_hash) WHERE superseded_by IS NULL",
            "CREATE INDEX memory_key ON memory (tenant_id, scope, key) "
            "WHERE key IS NOT NULL AND superseded_by IS NULL",
            f"""
            CREATE TABLE memory_links (
                rowid bigint GENERATED ALWAYS AS IDENTITY,
                {_TENANT},
                src {_TEXT} NOT NULL,
                dst {_TEXT} NOT NULL,
                kind {_TEXT} NOT NULL,
                created_at {_TEXT} NOT NULL,
                PRIMARY KEY (tenant_id, src, dst, kind)
            )
            """,
            "CREATE INDEX memory_links_dst ON memory_links (tenant_id, dst)",
            f"""
            CREATE TABLE memory_vectors (
                {_TENANT},
                row bigint NOT NULL,
                model_id {_TEXT} NOT NULL,
                dim integer NOT NULL,
                vector halfvec NOT NULL,
                PRIMARY KEY (tenant_id, row),
                FOREIGN KEY (tenant_id, row) REFERENCES memory (tenant_id, rowid) ON DELETE CASCADE,
                CHECK (vector_dims(vector) = dim)
            )
            """,
            *(_hnsw(dim) for dim in HNSW_DIMS),
            f"""
            CREATE TABLE memory_ops (
                {_TENANT},
                seq_id bigint NOT NULL CHECK (seq_id > 0),
                entry text NOT NULL,
                entry_hash {_TEXT} NOT NULL,
                PRIMARY KEY (tenant_id, seq_id)
            )
            """,
            "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
            *(statement for table in _M001_TABLES for statement in _isolated(table)),
        ),
    ),
    ("m002_forget_secret", _forget_secret),
    ("m003_memory_ops_head", _ops_head),
    ("m004_import_identities", _import_identities),
]


def grant_statements(role: str, *, maintain: bool) -> list[str]:
    """What ``store migrate --grant ROLE`` runs: usage of the schema, the table privileges of
    :data:`APP_TABLES`, and MAINTAIN (VACUUM after a purge) where the server has it (17+).
    ``role`` is quoted by the caller (``psycopg.sql.Identifier``) and passed in as text."""
    out = [f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}"]
    out += [f"GRANT {privileges} ON {SCHEMA}.{table} TO {role}" for table, privileges in APP_TABLES.items()]
    if maintain:
        out += [f"GRANT MAINTAIN ON {SCHEMA}.{table} TO {role}" for table in MAINTAINED]
    return out
