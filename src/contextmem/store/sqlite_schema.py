"""The SQLite store's schema: its migrations, applied on open, and the integrity check (SPEC S2).

Migrations (:mod:`contextmem.store.migrations.sqlite`) are numbered and never edited; ``migrate`` applies
the pending ones in one ``BEGIN IMMEDIATE`` transaction, so processes opening a database together migrate
it once. ``integrity_problems`` adds the store's own invariants to SQLite's checks.
"""

from __future__ import annotations

import sqlite3
import time

from ..errors import StoreSchemaError
from .common import COMPONENT, MESSAGES_SQL, SESSION_SEQS_SQL, MessageProblems, session_problems
from .migrations import Migration, discover

__all__ = ["MIGRATIONS", "integrity_problems", "migrate", "schema_version"]

MIGRATIONS: tuple[Migration, ...] = discover("contextmem.store.migrations.sqlite")


def schema_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cm_schema_migrations'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute(
        "SELECT COALESCE(MAX(version), 0) FROM cm_schema_migrations WHERE component = ?", (COMPONENT,)
    ).fetchone()
    return int(row[0])


def migrate(conn: sqlite3.Connection, upto: int | None = None, *, now: float | None = None) -> int:
    """Apply pending migrations (up to version ``upto``, default all) in one transaction; return the version.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Several processes may call this at
    once: ``BEGIN IMMEDIATE`` serialises them and the second finds nothing left to do.
    """
    target = len(MIGRATIONS) if upto is None else upto
    if schema_version(conn) == target:
        return target
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS cm_schema_migrations (component TEXT NOT NULL, "
            "version INTEGER NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL, "
            "PRIMARY KEY (component, version))"
        )
        current = schema_version(conn)
        if current > len(MIGRATIONS):
            raise StoreSchemaError(
                f"the database has session schema version {current}, but this contextmem only knows "
                f"versions up to {len(MIGRATIONS)}. Fix: upgrade contextmem to open this database."
            )
        for m in MIGRATIONS[current:target]:
            for statement in m.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO cm_schema_migrations (component, version, name, applied_at) VALUES (?, ?, ?, ?)",
                (COMPONENT, m.version, m.name, time.time() if now is None else now),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return max(current, target)


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
