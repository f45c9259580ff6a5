"""One FTS5 table per namespace (``user_version`` 2 of the old scheme). Never edit; add m0003+.

A query no longer reads a namespace-token posting list as long as the namespace; vectors move to a rowid
table (1.5 KB rows are slow in a WITHOUT ROWID b-tree); chunk ids are never reused (AUTOINCREMENT), so the
vector cache refreshes by id; the keyword scheme is recorded. The per-namespace FTS5 tables
(``fts_n<hash of the namespace>``) are created by the index on first write. Chunks are re-derived from the
files on the next sync (``files`` is emptied); vectors are kept, so nothing is re-embedded.
"""

STATEMENTS = (
    "DROP TABLE chunks_fts",
    "DROP TABLE chunks",
    """
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, path TEXT NOT NULL,
        start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL,
        day TEXT)
    """,
    "CREATE INDEX chunks_by_path ON chunks(namespace, path)",
    "CREATE INDEX chunks_by_hash ON chunks(hash)",
    """
    CREATE TABLE embeddings(
        id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL)
    """,
    "INSERT INTO embeddings(model, hash, vector) SELECT model, hash, vector FROM vectors",
    "CREATE UNIQUE INDEX embeddings_key ON embeddings(model, hash)",
    "DROP TABLE vectors",
    "DELETE FROM files",
    "ALTER TABLE namespaces ADD COLUMN keywords TEXT",
    "UPDATE namespaces SET embedder=NULL, generation=generation+1",
)
