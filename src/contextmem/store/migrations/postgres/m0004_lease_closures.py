"""Mark the error results that closed another writer's tool call when its lease ran out.

Until now such a closure was recognised by its text, so a genuine tool result that began with the same
words was taken for one. From here on the writer marks it: ``lease_closure`` is true on the rows it
appends to close calls, false on every other row.

Closures stored before this migration carry no mark; they are recognised here, once, by their exact text:
a tool message whose whole content is the closure text the old code wrote, with a number of seconds in
it (``error: no result. The writer ... lease of 0.5 s ran out.``). A result that only *begins* with that
text is not marked. A genuine result equal to it to the last character cannot be told apart from a
closure in old data and is marked: it answered its call either way. Rows with a ``\\u`` escape are
skipped unread (``json`` cannot give back ``\\u0000`` or a lone surrogate as text; the closure the old
writer stored has none). Never edit; add m0005+.
"""

_PREFIX = (
    "error: no result. The writer that made this call stopped before returning it, and the call was "
    "closed after its lease of "
)
_PATTERN = "^" + _PREFIX.replace(".", r"\.") + r"[0-9.e+-]{1,24} s ran out\.$"

STATEMENTS = (
    "ALTER TABLE cm_messages ADD COLUMN lease_closure BOOLEAN NOT NULL DEFAULT false",
    f"""
    UPDATE cm_messages SET lease_closure = true
     WHERE strpos(original, '{_PREFIX}') > 0
       AND CASE WHEN strpos(original, '\\u') = 0
                THEN (original::json ->> 'role') = 'tool'
                     AND json_typeof(original::json -> 'content') = 'string'
                     AND (original::json ->> 'content') ~ '{_PATTERN}'
                ELSE false END
    """,
)
