"""Sparse terms of chunk texts (an embedder's sparse head, :mod:`contextmem.memory.sparse`). Never edit;
add m0004+.

Kept like ``embeddings``: by ``(sparse head name, chunk hash)``, shared across namespaces, deleted when no
chunk uses the text any more. An existing namespace records another encoder set on its next sync (the
embedder name plus the head's), so it is rebuilt then: its vectors are reused, only the terms are encoded.
"""

STATEMENTS = (
    """
    CREATE TABLE sparse_terms(
        id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash TEXT NOT NULL, terms BLOB NOT NULL)
    """,
    # (hash, model): serves the lookups by (head, hash) and the clean-up of a dropped text by hash alone.
    "CREATE UNIQUE INDEX sparse_terms_key ON sparse_terms(hash, model)",
)
