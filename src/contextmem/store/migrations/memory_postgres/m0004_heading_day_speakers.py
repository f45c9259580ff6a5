"""What a chunk's text says about itself, derived once when it is indexed rather than on every search:
the day its headings write (:func:`contextmem.memory.text.heading_days`; a query that names a day ranks the
chunks under a heading of that day first, as it does that day's daily file) and who speaks in it
(:func:`contextmem.memory.speakers.speakers`, one name a line). Never edit; add m0005+.

The columns start empty; the keyword scheme moved with them (6), so every namespace re-derives its chunks
on its next sync and fills them (vectors are kept by text hash: nothing is embedded again).
"""

STATEMENTS = (
    "ALTER TABLE cm_memory_chunks ADD COLUMN heading_day DATE",
    "ALTER TABLE cm_memory_chunks ADD COLUMN speakers TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX cm_memory_chunks_heading_day ON cm_memory_chunks (namespace, heading_day)"
    " WHERE heading_day IS NOT NULL",
)
