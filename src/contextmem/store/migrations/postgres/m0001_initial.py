"""Initial schema: sessions, messages (original + current form, live/archived). Never edit; add m0002+.

Messages are JSON *text*, not ``jsonb``: jsonb rejects ``\\u0000`` and reorders keys, and the stores keep
exactly what they were given. Vectors (pgvector) are not part of the session store; the memory index adds
its own migrations under its own component.
"""

STATEMENTS = (
    """
    CREATE TABLE cm_sessions (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        namespace   TEXT NOT NULL,
        session_id  TEXT NOT NULL,
        summary     TEXT,
        meta        TEXT,
        next_seq    BIGINT NOT NULL DEFAULT 1 CHECK (next_seq >= 1),
        created_at  DOUBLE PRECISION NOT NULL,
        updated_at  DOUBLE PRECISION NOT NULL,
        UNIQUE (namespace, session_id)
    )
    """,
    """
    CREATE TABLE cm_messages (
        session     BIGINT NOT NULL REFERENCES cm_sessions (id) ON DELETE CASCADE,
        seq         BIGINT NOT NULL CHECK (seq >= 1),
        original    TEXT NOT NULL,
        current     TEXT,
        state       TEXT NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'archived')),
        created_at  DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session, seq)
    )
    """,
    """
    CREATE FUNCTION cm_messages_original_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'contextmem: a stored message''s original form, seq and session never change';
    END
    $$
    """,
    """
    CREATE TRIGGER cm_messages_original_immutable
    BEFORE UPDATE OF original, seq, session ON cm_messages
    FOR EACH ROW EXECUTE FUNCTION cm_messages_original_immutable()
    """,
)
