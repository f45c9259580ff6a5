"""Initial schema: sessions, messages (original + current form, live/archived). Never edit; add m0002+."""

STATEMENTS = (
    """
    CREATE TABLE cm_sessions (
        id          INTEGER PRIMARY KEY,
        namespace   TEXT NOT NULL,
        session_id  TEXT NOT NULL,
        summary     TEXT,
        meta        TEXT,
        next_seq    INTEGER NOT NULL DEFAULT 1 CHECK (next_seq >= 1),
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL,
        UNIQUE (namespace, session_id)
    )
    """,
    """
    CREATE TABLE cm_messages (
        session     INTEGER NOT NULL REFERENCES cm_sessions (id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL CHECK (seq >= 1),
        original    TEXT NOT NULL,
        current     TEXT,
        state       TEXT NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'archived')),
        created_at  REAL NOT NULL,
        PRIMARY KEY (session, seq)
    ) WITHOUT ROWID
    """,
    """
    CREATE TRIGGER cm_messages_original_immutable
    BEFORE UPDATE OF original, seq, session ON cm_messages
    BEGIN
        SELECT RAISE(ABORT, 'contextmem: a stored message''s original form, seq and session never change');
    END
    """,
)
