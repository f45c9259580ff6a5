"""Shared memory documents: with a PostgreSQL store, ``MEMORY.md`` and the daily files are rows, and each
host's files are a working copy of them (:mod:`contextmem.memory_docs`). Never edit; add m0007+.

One row per namespace and document name; ``version`` grows by one at every write (an append, an edit, a
delete); a deleted document keeps its row (``deleted``, empty content) so versions never go back.
``content`` is bytes: a document reads back exactly as written, NUL included. ``mtime_ns`` is when its
content was written: a pulled file gets it, so every host's copy has the same size and mtime and the
index re-reads none of them. ``writer`` is the token of the write that made the row's version: a write
retried after its commit was lost in transit finds its own token and is not applied twice.
"""

STATEMENTS = (
    """
    CREATE TABLE cm_memory_docs (
        namespace   TEXT NOT NULL,
        path        TEXT NOT NULL,
        version     BIGINT NOT NULL CHECK (version >= 0),
        content     BYTEA NOT NULL,
        hash        TEXT NOT NULL,
        mtime_ns    BIGINT NOT NULL,
        deleted     BOOLEAN NOT NULL,
        updated_at  DOUBLE PRECISION NOT NULL,
        writer      TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (namespace, path)
    )
    """,
)
