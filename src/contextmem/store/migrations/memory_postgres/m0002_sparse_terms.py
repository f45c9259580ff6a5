"""Sparse terms of each chunk (an embedder's sparse head, :mod:`contextmem.memory.sparse`). Never edit;
add m0003+.

``sparse`` is the packed blob (uint16 ids, float16 weights), ``sparse_model`` the head that made it
(``NULL``: none). Stored per chunk like ``embedding``; a namespace synced before this migration records
another encoder set on its next sync and is rebuilt then (its vectors reused, only the terms encoded).
"""

STATEMENTS = (
    "ALTER TABLE cm_memory_chunks ADD COLUMN sparse_model TEXT, ADD COLUMN sparse BYTEA",
    """
    ALTER TABLE cm_memory_chunks ADD CONSTRAINT cm_memory_chunks_sparse_pair
        CHECK ((sparse IS NULL) = (sparse_model IS NULL))
    """,
)
