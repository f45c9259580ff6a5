"""The memory index's first schema (``user_version`` 1 of the old scheme). Never edit; add m0003+.

One shared FTS5 table for all namespaces and vectors in a WITHOUT ROWID table; m0002 replaces both.
"""

STATEMENTS = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """
    CREATE TABLE namespaces(
        namespace TEXT PRIMARY KEY, generation INTEGER NOT NULL DEFAULT 0, embedder TEXT)
    """,
    """
    CREATE TABLE files(
        namespace TEXT NOT NULL, path TEXT NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
        hash TEXT NOT NULL, PRIMARY KEY (namespace, path)) WITHOUT ROWID
    """,
    """
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, path TEXT NOT NULL,
        start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL,
        day TEXT)
    """,
    "CREATE INDEX chunks_by_path ON chunks(namespace, path)",
    "CREATE INDEX chunks_by_hash ON chunks(hash)",
    """
    CREATE TABLE vectors(
        model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,
        PRIMARY KEY (model, hash)) WITHOUT ROWID
    """,
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(ns, body, tokenize='porter unicode61 remove_diacritics 2')",
)
