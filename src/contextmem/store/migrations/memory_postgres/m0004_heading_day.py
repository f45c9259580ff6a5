"""The day a chunk's headings write (:func:`contextmem.memory.text.heading_days`): a query that names a
day ranks the chunks under a heading of that day first, as it does that day's daily file. Never edit; add
m0005+.

The column starts empty; the keyword scheme moved with it (6), so every namespace re-derives its chunks on
its next sync and fills it (vectors are kept by text hash: nothing is embedded again).
"""

STATEMENTS = (
    "ALTER TABLE cm_memory_chunks ADD COLUMN heading_day DATE",
    "CREATE INDEX cm_memory_chunks_heading_day ON cm_memory_chunks (namespace, heading_day)"
    " WHERE heading_day IS NOT NULL",
)
