"""Mark the error results that closed another writer's tool call when its lease ran out.

Until now such a closure was recognised by its text, so a genuine tool result that began with the same
words was taken for one. From here on the writer marks it: ``lease_closure`` is 1 on the rows it appends
to close calls, 0 on every other row.

Closures stored before this migration carry no mark; they are recognised here, once, by their exact text:
a tool message whose whole content is the closure text the old code wrote, with a number of seconds in
it (``error: no result. The writer ... lease of 0.5 s ran out.``). A result that only *begins* with that
text is not marked. A genuine result equal to it to the last character cannot be told apart from a
closure in old data and is marked: it answered its call either way. Never edit; add m0005+.
"""

_PREFIX = (
    "error: no result. The writer that made this call stopped before returning it, and the call was "
    "closed after its lease of "
)
_SUFFIX = " s ran out."
_CONTENT = "json_extract(original, '$.content')"
_SECONDS = f"substr({_CONTENT}, {len(_PREFIX) + 1}, length({_CONTENT}) - {len(_PREFIX) + len(_SUFFIX)})"

STATEMENTS = (
    "ALTER TABLE cm_messages ADD COLUMN lease_closure INTEGER NOT NULL DEFAULT 0 "
    "CHECK (lease_closure IN (0, 1))",
    f"""
    UPDATE cm_messages SET lease_closure = 1
     WHERE CASE WHEN instr(original, '{_PREFIX}') > 0 AND json_valid(original)
                THEN json_extract(original, '$.role') = 'tool'
                     AND json_type(original, '$.content') = 'text'
                     AND substr({_CONTENT}, 1, {len(_PREFIX)}) = '{_PREFIX}'
                     AND substr({_CONTENT}, -{len(_SUFFIX)}) = '{_SUFFIX}'
                     AND length({_SECONDS}) BETWEEN 1 AND 24
                     AND trim({_SECONDS}, '0123456789.e+-') = ''
                ELSE 0 END
    """,
)
