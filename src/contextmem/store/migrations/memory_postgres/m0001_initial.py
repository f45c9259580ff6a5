"""Memory index on PostgreSQL: chunks with a pgvector embedding and a tsvector. Never edit; add m0002+.

The index is derived from the workspace's markdown files (the source of truth) and can be rebuilt at any
time. Every row carries its namespace and every query filters on it. ``embedding`` is ``vector(384)``
(multilingual-e5-small, the default embedder); an HNSW index (cosine) serves vector search, a GIN index
serves keyword search over ``keywords``, a ``tsvector`` built from the library's tokens (CJK text split
into bigrams before ``to_tsvector``, so Chinese words match). ``CREATE EXTENSION vector`` needs a role
allowed to create it (superuser, or the database owner on PostgreSQL 13+ for trusted extensions; pgvector
is not marked trusted): create it once as an administrator if the application role cannot.
"""

STATEMENTS = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    """
    CREATE TABLE cm_memory_namespaces (
        namespace   TEXT PRIMARY KEY,
        generation  BIGINT NOT NULL DEFAULT 0,
        embedder    TEXT,
        keywords    TEXT
    )
    """,
    """
    CREATE TABLE cm_memory_files (
        namespace   TEXT NOT NULL,
        path        TEXT NOT NULL,
        mtime_ns    BIGINT NOT NULL,
        size        BIGINT NOT NULL,
        hash        TEXT NOT NULL,
        PRIMARY KEY (namespace, path)
    )
    """,
    """
    CREATE TABLE cm_memory_chunks (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        namespace   TEXT NOT NULL,
        path        TEXT NOT NULL,
        start_line  INTEGER NOT NULL CHECK (start_line >= 1),
        end_line    INTEGER NOT NULL CHECK (end_line >= start_line),
        hash        TEXT NOT NULL,
        text        TEXT NOT NULL,
        day         DATE,
        model       TEXT NOT NULL,
        embedding   vector(384) NOT NULL,
        keywords    tsvector NOT NULL
    )
    """,
    "CREATE INDEX cm_memory_chunks_path ON cm_memory_chunks (namespace, path)",
    "CREATE INDEX cm_memory_chunks_hash ON cm_memory_chunks (namespace, model, hash)",
    "CREATE INDEX cm_memory_chunks_keywords ON cm_memory_chunks USING gin (keywords)",
    "CREATE INDEX cm_memory_chunks_embedding ON cm_memory_chunks USING hnsw (embedding vector_cosine_ops)",
)
