"""A version per session that every write changes: what a reader's cache of a loaded session is checked by.

``version`` is drawn from one counter, the single row of ``cm_session_versions``: triggers give a new
session row, and every update of a row's data, the next value. Every store write (append, replace,
archive, set_meta, record_offload) updates its session's row in its own transaction, so two reads that
find the same version found the same session: the same live rows, current forms, summary and meta. Values
are never reused, also across a session deleted and created again under the same id (SQLite may reuse
its ``id``). Existing sessions start at their ``id``. The update trigger fires on the columns writes set,
not on ``version``, so its own update does not fire it again. Never edit; add m0006+.
"""

_NEXT = """
    UPDATE cm_session_versions SET last = last + 1 WHERE id = 1;
    UPDATE cm_sessions SET version = (SELECT last FROM cm_session_versions WHERE id = 1) WHERE id = NEW.id;
"""

STATEMENTS = (
    "CREATE TABLE cm_session_versions (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL)",
    "ALTER TABLE cm_sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
    "UPDATE cm_sessions SET version = id",
    "INSERT INTO cm_session_versions (id, last) SELECT 1, COALESCE(MAX(id), 0) FROM cm_sessions",
    f"CREATE TRIGGER cm_sessions_version_new AFTER INSERT ON cm_sessions BEGIN {_NEXT} END",
    "CREATE TRIGGER cm_sessions_version_next "
    f"AFTER UPDATE OF next_seq, summary, meta, updated_at ON cm_sessions BEGIN {_NEXT} END",
)
