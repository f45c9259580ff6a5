"""Chunks by their place in a file: a search reads each candidate with its neighbours (the chunks just
before and after it, :mod:`contextmem.memory.ranking`). Never edit; add m0005+.

Replaces ``chunks_by_path``: ``(namespace, path, start_line)`` serves every lookup by ``(namespace,
path)`` too, and finds a chunk's neighbour in a file of thousands of chunks by one index step.
"""

STATEMENTS = (
    "CREATE INDEX chunks_by_line ON chunks(namespace, path, start_line)",
    "DROP INDEX chunks_by_path",
)
