"""Whether a chunk says when (:func:`contextmem.lang.calendar.says_when`: a date, a month or weekday name,
a year, "yesterday"), derived once when it is indexed: a question that asks when lifts those chunks, and
reading ~100 candidates' texts on every such search cost milliseconds. Never edit; add m0006+.

The column starts false; the keyword scheme moved with it (7), so every namespace re-derives its chunks on
its next sync and fills it (vectors are kept by text hash: nothing is embedded again).
"""

STATEMENTS = ("ALTER TABLE cm_memory_chunks ADD COLUMN says_when BOOLEAN NOT NULL DEFAULT false",)
