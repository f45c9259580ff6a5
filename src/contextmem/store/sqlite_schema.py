"""The SQLite store's schema: its migrations, applied on open, and the integrity check (S2).

Migrations (:mod:`contextmem.store.migrations.sqlite`) are numbered and never edited; ``migrate`` applies
the pending ones in one ``BEGIN IMMEDIATE`` transaction, so processes opening a database together migrate
it once. ``integrity_problems`` adds the store's own invariants to SQLite's checks.
"""

from __future__ import annotations

import sqlite3

from .migrations import Migration, discover, migrate_sqlite, sqlite_schema_version
from .sql import COMPONENT, MESSAGES_SQL, SESSION_SEQS_SQL, MessageProblems, session_problems

__all__ = ["MIGRATIONS", "integrity_problems", "migrate", "schema_version"]

MIGRATIONS: tuple[Migration, ...] = discover("contextmem.store.migrations.sqlite")


def schema_version(conn: sqlite3.Connection) -> int:
    """The session schema version recorded in ``conn`` (0: none)."""
    return sqlite_schema_version(conn, COMPONENT)


def migrate(conn: sqlite3.Connection, upto: int | None = None, *, now: float | None = None) -> int:
    """Apply pending migrations (up to version ``upto``, default all) in one transaction; return the version.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Several processes may call this at
    once: ``BEGIN IMMEDIATE`` serialises them and the second finds nothing left to do (the shared
    :func:`~contextmem.store.migrations.migrate_sqlite` runner).
    """
    target = len(MIGRATIONS) if upto is None else upto
    current = schema_version(conn)
    if target < current <= len(MIGRATIONS):  # already past ``upto``: nothing to apply
        return current
    return migrate_sqlite(conn, COMPONENT, MIGRATIONS[:target], now=now)


def integrity_problems(conn: sqlite3.Connection) -> list[str]:
    problems = [f"sqlite integrity_check: {r[0]}" for r in conn.execute("PRAGMA integrity_check")]
    if problems == ["sqlite integrity_check: ok"]:
        problems = []
    problems += [
        f"foreign key: row {rowid} of {table} points to a missing {parent} row"
        for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
    ]
    version = schema_version(conn)
    if version != len(MIGRATIONS):
        problems.append(f"schema version is {version}, expected {len(MIGRATIONS)}")
    for row in conn.execute(SESSION_SEQS_SQL):
        problems += session_problems(row)
    bad = MessageProblems()
    for row in conn.execute(MESSAGES_SQL):
        bad.check(row)
    return problems + bad.problems
