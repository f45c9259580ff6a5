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
from dataclasses import dataclass

from ...errors import StoreSchemaError

__all__ = ["Migration", "discover"]

# PostgreSQL keeps every component's migrations (sessions, memory) in one table; both runners use these.
PG_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS cm_schema_migrations (component TEXT NOT NULL, "
    "version INTEGER NOT NULL, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (component, version))"
)
PG_RECORD_MIGRATION = (
    "INSERT INTO cm_schema_migrations (component, version, name, applied_at) VALUES (%s, %s, %s, %s)"
)

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
