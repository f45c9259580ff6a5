"""Fixtures of the security suites: every store-backed suite runs on SQLite and on real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pg import pg_dsn  # noqa: F401  (a fixture, used through store_url)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL: a SQLite file, or a fresh schema of the test PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.sqlite'}"
    dsn: str = request.getfixturevalue("pg_dsn")
    return dsn
