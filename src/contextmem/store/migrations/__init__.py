"""Numbered schema migrations, one package per backend (STYLE rule 7: stores migrate themselves).

Each migration is a module ``mNNNN_<name>.py`` in :mod:`.sqlite` or :mod:`.postgres` whose ``STATEMENTS``
tuple is run in order, inside the same transaction that records the migration as applied. Migrations are
**never edited** once released: a schema change is a new module with the next number. Numbers start at 1
and have no gaps; :func:`discover` checks that, so a misnamed file fails loudly instead of being skipped.

Applied migrations are recorded per *component* in ``cm_schema_migrations`` (``component``, ``version``),
so later parts that share the database (the memory index) can ship their own numbered migrations and
reuse the same runner without colliding with the session store's numbers.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...errors import StoreSchemaError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "Migration",
    "discover",
    "migrate_postgres",
    "migrate_sqlite",
    "pg_schema_version",
    "sqlite_schema_version",
]

# PostgreSQL keeps every component's migrations (sessions, memory) in one table; both runners use these.
PG_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS cm_schema_migrations (component TEXT NOT NULL, "
    "version INTEGER NOT NULL, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (component, version))"
)
PG_RECORD_MIGRATION = (
    "INSERT INTO cm_schema_migrations (component, version, name, applied_at) VALUES (%s, %s, %s, %s)"
)
PG_MIGRATION_LOCK_KEY = 0x636D_6D69_6772_6174  # "cmmigrat": every component's migrations serialise on it

_NAME = re.compile(r"^m(\d{4})_([a-z0-9_]+)$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def discover(package: str) -> tuple[Migration, ...]:
    """The migrations of ``package`` (e.g. ``contextmem.store.migrations.sqlite``), by ascending version."""
    pkg = importlib.import_module(package)
    found: list[Migration] = []
    for info in pkgutil.iter_modules(pkg.__path__):
        match = _NAME.match(info.name)
        if match is None:
            raise StoreSchemaError(
                f"{package}.{info.name} is not a migration name. Fix: name migrations mNNNN_<snake_name>."
            )
        module = importlib.import_module(f"{package}.{info.name}")
        statements = getattr(module, "STATEMENTS", None)
        if not isinstance(statements, tuple) or not all(isinstance(s, str) for s in statements):
            raise StoreSchemaError(f"{module.__name__}.STATEMENTS must be a tuple of SQL strings.")
        found.append(Migration(int(match.group(1)), match.group(2), statements))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise StoreSchemaError(
            f"{package} has migrations {versions!r}; they must be numbered 1, 2, 3, ... without gaps."
        )
    return tuple(found)


SQLITE_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS cm_schema_migrations (component TEXT NOT NULL, "
    "version INTEGER NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL, "
    "PRIMARY KEY (component, version))"
)


def sqlite_schema_version(conn: sqlite3.Connection, component: str) -> int:
    """The highest migration of ``component`` recorded in ``conn``'s ``cm_schema_migrations`` (0: none)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cm_schema_migrations'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute(
        "SELECT COALESCE(MAX(version), 0) FROM cm_schema_migrations WHERE component = ?", (component,)
    ).fetchone()
    return int(row[0])


def migrate_sqlite(
    conn: sqlite3.Connection,
    component: str,
    migrations: tuple[Migration, ...],
    *,
    adopt: Callable[[sqlite3.Connection], int] | None = None,
    now: float | None = None,
) -> int:
    """Apply ``component``'s pending ``migrations`` in one ``BEGIN IMMEDIATE`` transaction; return the
    version.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Processes opening a database together
    serialise on the transaction and the second finds nothing left to do. ``adopt``, for a component that
    numbered its schema some other way before: called inside the transaction when nothing is recorded for
    ``component``, it returns the version the schema is already at, and migrations up to it are recorded
    as applied without running them.
    """
    if sqlite_schema_version(conn, component) == len(migrations):
        return len(migrations)
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(SQLITE_MIGRATIONS_TABLE)
        current = sqlite_schema_version(conn, component)
        pending = migrations[current:]
        if current == 0 and adopt is not None:
            adopted = adopt(conn)
            if adopted > len(migrations):
                current = adopted
            else:
                pending = migrations[adopted:]
                _record(conn, component, migrations[:adopted], now, adopted=True)
        if current > len(migrations):
            raise StoreSchemaError(
                f"the database has {component} schema version {current}, but this contextmem only knows "
                f"versions up to {len(migrations)}. Fix: upgrade contextmem to open this database."
            )
        for m in pending:
            for statement in m.statements:
                conn.execute(statement)
        _record(conn, component, pending, now)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return len(migrations)


def _record(
    conn: sqlite3.Connection,
    component: str,
    applied: tuple[Migration, ...],
    now: float | None,
    *,
    adopted: bool = False,
) -> None:
    conn.executemany(
        "INSERT INTO cm_schema_migrations (component, version, name, applied_at) VALUES (?, ?, ?, ?)",
        [
            (
                component,
                m.version,
                f"{m.name} (adopted)" if adopted else m.name,
                time.time() if now is None else now,
            )
            for m in applied
        ],
    )


async def pg_schema_version(conn: AsyncConnection[Any], component: str) -> int:
    """The highest migration of ``component`` recorded in ``cm_schema_migrations`` (0: none)."""
    cur = await conn.execute("SELECT to_regclass('cm_schema_migrations') IS NOT NULL")
    row = await cur.fetchone()
    if row is None or not row[0]:
        return 0
    cur = await conn.execute(
        "SELECT COALESCE(MAX(version), 0) FROM cm_schema_migrations WHERE component = %s", (component,)
    )
    row = await cur.fetchone()
    return 0 if row is None else int(row[0])


async def migrate_postgres(
    conn: AsyncConnection[Any],
    component: str,
    migrations: tuple[Migration, ...],
    *,
    upto: int | None = None,
) -> int:
    """Apply ``component``'s pending ``migrations`` (up to ``upto``, default all) in one transaction;
    return the version.

    ``conn`` must be in autocommit mode. A transaction-level advisory lock (one key for every component)
    serialises processes that migrate at the same time; the second one finds nothing left to do.
    """
    target = len(migrations) if upto is None else upto
    if await pg_schema_version(conn, component) == target:
        return target
    async with conn.transaction():
        await conn.execute("SET LOCAL statement_timeout = 0")  # a backfill may take long on a big database
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (PG_MIGRATION_LOCK_KEY,))
        await conn.execute(PG_MIGRATIONS_TABLE)
        current = await pg_schema_version(conn, component)
        if current > len(migrations):
            raise StoreSchemaError(
                f"the database has {component} schema version {current}, but this contextmem only knows "
                f"versions up to {len(migrations)}. Fix: upgrade contextmem to open this database."
            )
        for m in migrations[current:target]:
            for statement in m.statements:
                await conn.execute(statement)
            await conn.execute(PG_RECORD_MIGRATION, (component, m.version, m.name, time.time()))
    return max(current, target)
