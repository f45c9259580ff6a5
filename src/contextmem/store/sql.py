"""What the two SQL stores (SQLite, PostgreSQL) share: their statements, integrity checks and lock key.

Kept apart from the stores so that neither imports the other: both run the same integrity queries on the
same tables (``cm_sessions``, ``cm_messages``, ``cm_offloads``), with the driver's placeholder filled in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from .codec import decode_message

__all__ = [
    "COMPONENT",
    "MESSAGES_SQL",
    "OFFLOADED_SQL",
    "OFFLOAD_SQL",
    "SESSION_SEQS_SQL",
    "MessageProblems",
    "idle_sessions_where",
    "session_lock_key",
    "session_problems",
]

COMPONENT = "sessions"
"""The component name both stores record their migrations under."""


def session_lock_key(namespace: str, session_id: str) -> int:
    """A signed 64-bit key naming one session's compaction lock (unambiguous for any two strings)."""
    raw = f"{len(namespace)}:{namespace}/{session_id}".encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def idle_sessions_where(
    cutoff: float, namespace: str | None, param: str
) -> tuple[str, tuple[float | str, ...]]:
    """The ``WHERE`` condition on ``cm_sessions`` (and its arguments, ``param`` the driver's placeholder) of
    the sessions updated before ``cutoff``: of ``namespace``, or of every namespace when it is ``None``."""
    if namespace is None:
        return f"updated_at < {param}", (cutoff,)
    return f"updated_at < {param} AND namespace = {param}", (cutoff, namespace)


# Integrity checks shared by both stores (PostgreSQL runs the same two queries).
SESSION_SEQS_SQL = (
    "SELECT s.namespace, s.session_id, s.next_seq, COUNT(m.seq), MIN(m.seq), MAX(m.seq), "
    "SUM(CASE WHEN m.seq IS NULL OR m.state IN ('live', 'archived') THEN 0 ELSE 1 END) "
    "FROM cm_sessions AS s LEFT JOIN cm_messages AS m ON m.session = s.id "
    "GROUP BY s.id, s.namespace, s.session_id, s.next_seq ORDER BY s.namespace, s.session_id"
)
MESSAGES_SQL = (
    "SELECT s.namespace, s.session_id, m.seq, m.original, m.current FROM cm_messages AS m "
    "JOIN cm_sessions AS s ON s.id = m.session ORDER BY s.id, m.seq"
)


OFFLOADED_SQL = (
    "SELECT m.original FROM cm_offloads AS o JOIN cm_sessions AS s ON s.id = o.session "
    "JOIN cm_messages AS m ON m.session = o.session AND m.seq = o.seq "
    "WHERE s.namespace = {p} AND o.path = {p} ORDER BY o.recorded_at DESC, o.session DESC LIMIT 1"
)
"""The original a path was last recorded for in a namespace (``{p}``: the driver's placeholder)."""
OFFLOAD_SQL = (
    # one record per path in the namespace: recording it in one session drops it from the others
    "DELETE FROM cm_offloads WHERE path = {p} AND session <> {p} "
    "AND session IN (SELECT id FROM cm_sessions WHERE namespace = {p})",
    "INSERT INTO cm_offloads (session, path, seq, recorded_at) VALUES ({p}, {p}, {p}, {p}) "
    "ON CONFLICT (session, path) DO UPDATE SET seq = excluded.seq, recorded_at = excluded.recorded_at",
)
"""Record a path for a message: run with ``(path, session, namespace)``, then ``(session, path, seq, at)``."""


def session_problems(row: Sequence[Any]) -> list[str]:
    """Problems of one row of :data:`SESSION_SEQS_SQL`: seqs must be exactly 1..next_seq-1, states valid."""
    ns, sid, next_seq, count, low, high, bad_states = row
    where = f"session ({ns!r}, {sid!r})"
    problems = []
    if count != next_seq - 1 or (count and (low != 1 or high != next_seq - 1)):
        problems.append(
            f"{where}: seqs are not contiguous: {count} messages with seqs {low}..{high}, "
            f"expected 1..{next_seq - 1}"
        )
    if bad_states:
        problems.append(f"{where}: {bad_states} messages are neither live nor archived")
    return problems


class MessageProblems:
    """Collects messages (rows of :data:`MESSAGES_SQL`) whose stored JSON does not decode."""

    def __init__(self, limit: int = 50) -> None:
        self.limit = limit
        self.bad = 0
        self._found: list[str] = []

    def check(self, row: Sequence[Any]) -> None:
        ns, sid, seq, original, current = row
        for column, text in (("original", original), ("current", current)):
            if text is None and column == "current":
                continue
            try:
                decode_message(text)
            except (ValueError, TypeError, KeyError) as exc:  # MessageFormatError is a ValueError
                self.bad += 1
                if self.bad <= self.limit:
                    self._found.append(
                        f"session ({ns!r}, {sid!r}) seq {seq}: {column} does not decode: {exc}"
                    )

    @property
    def problems(self) -> list[str]:
        more = self.bad - self.limit
        return self._found + ([f"... and {more} more messages that do not decode"] if more > 0 else [])
