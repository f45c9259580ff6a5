"""Offloaded tool results reachable from every host: which message's original a workspace path holds.

A record belongs to one message of one session and goes with it (``ON DELETE CASCADE``); paths are
looked up per namespace, hence the index on ``path``. Never edit; add m0004+.
"""

STATEMENTS = (
    """
    CREATE TABLE cm_offloads (
        session     BIGINT NOT NULL REFERENCES cm_sessions (id) ON DELETE CASCADE,
        path        TEXT NOT NULL,
        seq         BIGINT NOT NULL,
        recorded_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session, path),
        FOREIGN KEY (session, seq) REFERENCES cm_messages (session, seq) ON DELETE CASCADE
    )
    """,
    "CREATE INDEX cm_offloads_path ON cm_offloads (path)",
)
