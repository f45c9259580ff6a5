"""Open a session store from a URL: ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``postgresql://…``.

Schemes are looked up in :data:`STORES`; third-party stores register under the ``contextmem.stores``
entry-point group (the entry point names the scheme and points at a callable taking the URL).

``settings`` carry the store's patience (``store_connect_timeout``, ``store_statement_timeout``,
``store_lock_timeout``, ``store_retry_seconds``) to the stores that have one: PostgreSQL's. Without them a
store keeps its own defaults, which are the settings' defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ..dsn import printable_store_url
from ..errors import StoreURLError, brief
from .base import SessionStore

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = ["STORES", "open_store", "patience", "sqlite_path"]


def sqlite_path(url: str) -> Path:
    """The file of a ``sqlite:///path`` URL (three slashes: relative; four: absolute), like SQLAlchemy."""
    rest = url.partition("://")[2]
    if not rest.startswith("/") or rest == "/":
        raise StoreURLError(
            f"{printable_store_url(url)} is not a SQLite URL with a path. "
            "Fix: write sqlite:///relative/path.db or sqlite:////absolute/path.db."
        )
    path = rest[1:].split("?", 1)[0]
    if path in (":memory:", ""):
        raise StoreURLError(
            f"{printable_store_url(url)}: in-memory SQLite is not supported (the store is shared between "
            "threads and processes). Fix: give a file path, e.g. a temporary directory."
        )
    return Path(path).expanduser()


def _sqlite(url: str, settings: Settings | None) -> SessionStore:
    from .sqlite import SqliteSessionStore

    return SqliteSessionStore(sqlite_path(url))


def _postgres(url: str, settings: Settings | None) -> SessionStore:
    from .postgres import PostgresSessionStore

    if settings is None:
        return PostgresSessionStore(url)
    return PostgresSessionStore(url, **patience(settings))


class StorePatience(TypedDict):
    connect_timeout: float
    statement_timeout: float
    lock_timeout: float
    retry_seconds: float


def patience(settings: Settings) -> StorePatience:
    """The ``store_*`` waits of ``settings`` as the keyword arguments of a PostgreSQL store or index."""
    return {
        "connect_timeout": settings.store_connect_timeout,
        "statement_timeout": settings.store_statement_timeout,
        "lock_timeout": settings.store_lock_timeout,
        "retry_seconds": settings.store_retry_seconds,
    }


STORES: dict[str, Callable[[str, Settings | None], SessionStore]] = {
    "sqlite": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
}
"""Store factories by URL scheme: ``factory(url, settings)``."""


def open_store(url: str, settings: Settings | None = None) -> SessionStore:
    """The session store a URL names, with the patience ``settings`` give it. Nothing is opened yet:
    stores connect and migrate on first use."""
    head = url.partition("://")[0].lower() if "://" in url else ""
    scheme = head if re.fullmatch(r"[a-z][a-z0-9+.-]*", head) else ""  # never a DSN's text (a password)
    factory = STORES.get(scheme)
    if factory is not None:
        return factory(url, settings)
    for ep in entry_points(group="contextmem.stores"):
        if ep.name == scheme:
            plugin: Callable[[str], SessionStore] = ep.load()
            return plugin(url)
    known = sorted(STORES) + sorted(ep.name for ep in entry_points(group="contextmem.stores"))
    raise StoreURLError(
        f"cannot open a store from {printable_store_url(url)}: unknown scheme {brief(scheme)}. "
        f"Fix: use one of {known!r}, e.g. sqlite:///sessions.db or postgresql://user@host/db."
    )
