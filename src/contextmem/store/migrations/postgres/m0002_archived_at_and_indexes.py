"""Record when a message was archived; index live messages (restore) and idle sessions (cleanup).

``archived_at`` of messages archived before this migration is unknown; it is backfilled with the session's
``updated_at``, the latest time the archive can have happened. Never edit; add m0003+.
"""

STATEMENTS = (
    "ALTER TABLE cm_messages ADD COLUMN archived_at DOUBLE PRECISION",
    """
    UPDATE cm_messages AS m
       SET archived_at = s.updated_at
      FROM cm_sessions AS s
     WHERE s.id = m.session AND m.state = 'archived'
    """,
    "CREATE INDEX cm_messages_live ON cm_messages (session, seq) WHERE state = 'live'",
    "CREATE INDEX cm_sessions_idle ON cm_sessions (updated_at)",
)
