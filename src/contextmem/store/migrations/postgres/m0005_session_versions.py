"""A version per session that every write changes: what a reader's cache of a loaded session is checked by.

``version`` is drawn from one sequence, ``cm_session_versions``: a new session row takes the next value, and
a trigger gives every update of the row the next one. Every store write (append, replace, archive, set_meta,
record_offload) updates its session's row in its own transaction, so two reads that find the same version
found the same session: the same live rows, current forms, summary and meta. Values are never reused, also
across a session deleted and created again under the same id. The trigger, not the store's code, draws
them, so a writer that does not know the column (a host still running the code before this migration on
a connection it opened before) bumps it too. Never edit; add m0006+.
"""

STATEMENTS = (
    "CREATE SEQUENCE cm_session_versions",
    "ALTER TABLE cm_sessions ADD COLUMN version BIGINT NOT NULL DEFAULT nextval('cm_session_versions')",
    """
    CREATE FUNCTION cm_sessions_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.version := nextval('cm_session_versions');
        RETURN NEW;
    END
    $$
    """,
    """
    CREATE TRIGGER cm_sessions_next_version
    BEFORE UPDATE ON cm_sessions
    FOR EACH ROW EXECUTE FUNCTION cm_sessions_next_version()
    """,
)
