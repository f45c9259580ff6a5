"""Chunks by their place in a file: a search reads each candidate with its neighbours (the chunks just
before and after it, :mod:`contextmem.memory.ranking`). Never edit; add m0004+.

Replaces ``cm_memory_chunks_path``: ``(namespace, path, start_line)`` serves every lookup by
``(namespace, path)`` too, and finds a chunk's neighbour in a file of thousands of chunks by one index step.
"""

STATEMENTS = (
    "CREATE INDEX cm_memory_chunks_line ON cm_memory_chunks (namespace, path, start_line)",
    "DROP INDEX cm_memory_chunks_path",
)
