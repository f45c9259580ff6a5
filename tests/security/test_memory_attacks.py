"""Issue 31, second round, attacks 2, 3 and 5 on the memory index, each on SQLite and on a real PostgreSQL.

* 2: one NUL in a memory file (through ``memory_write`` or typed by hand) must not break search: what is
  indexed (chunks, snippets) never carries a character PostgreSQL text refuses.
* 3: the PostgreSQL index rides out a database restart: during the outage ``memory_search`` answers a typed
  one-line error with a Fix, and afterwards it works again (no dead connection kept forever).
* 5: a file in ``memory/`` whose name is not valid UTF-8 is skipped (and said so, by a safe name), never an
  ``internal error (UnicodeEncodeError)`` on every search.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from contextmem.errors import StoreUnavailableError
from contextmem.memory import HashEmbedder, MemoryTools, SqliteMemoryIndex
from contextmem.workspace import Workspace
from tests import pg
from tests.pg import pg_dsn  # noqa: F401  (fixture)

private_pg = pg.private_pg  # fixture

DIM = 384  # the PostgreSQL index stores vector(384)
DAY = datetime(2026, 3, 8, 14, 30)

Tools = Callable[[], MemoryTools]


@pytest.fixture(params=["sqlite", "postgres"])
def tools(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tools]:
    """``tools()``: MemoryTools over the backend under test, on the workspace ``tmp_path / "ws"``."""
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    opened: list[Any] = []

    def factory() -> MemoryTools:
        ws = Workspace(tmp_path / "ws")
        ws.ensure()
        if dsn is None:
            index: Any = SqliteMemoryIndex(ws, HashEmbedder(DIM), db_path=tmp_path / "index.sqlite")
        else:
            from contextmem.memory.pg_index import PgMemoryIndex

            index = PgMemoryIndex(ws, HashEmbedder(DIM), dsn)
        opened.append(index)
        return MemoryTools(index, clock=lambda: DAY)

    yield factory
    for index in opened:
        index.close()


def _hits(tools: MemoryTools, query: str) -> list[dict[str, Any]]:
    import json

    answer = tools.call("memory_search", {"query": query})
    assert not answer.startswith("error"), answer
    found: list[dict[str, Any]] = json.loads(answer)
    return found


# --- attack 2: one NUL -----------------------------------------------------------------------------


def test_a_nul_written_or_typed_into_memory_never_breaks_search(tools: Tools) -> None:
    t = tools()
    saved = t.call("memory_write", {"text": "deploy note\x00 the canary runs on host kestrel-7"})
    assert saved.startswith("saved to"), saved
    (t.workspace.daily_dir / "2026-03-07.md").write_bytes(b"# notes\n\nhand typed \x00 pelican rota\n")
    t.workspace.core_file.write_bytes(b"# core\n\nthe \x00\x00 vault code word is ibis\n")

    for query, path in (
        ("canary kestrel", "memory/2026-03-08.md"),
        ("pelican rota", "memory/2026-03-07.md"),
        ("vault ibis", "MEMORY.md"),
        ("pelican\x00 rota", "memory/2026-03-07.md"),  # a NUL in the query too
    ):
        hits = _hits(t, query)
        assert hits and hits[0]["path"] == path, (query, hits)
        assert all("\x00" not in h["snippet"] for h in hits), hits
    # What the index stores is the file's text with each NUL as U+FFFD, and check() agrees with it.
    assert "hand typed \ufffd pelican rota" in _hits(t, "pelican rota")[0]["snippet"]
    assert t.index.check().ok, t.index.check().problems


# --- attack 5: a file name that is not UTF-8 --------------------------------------------------------


def test_a_memory_file_named_in_latin_1_is_skipped_and_search_works(
    tools: Tools, caplog: pytest.LogCaptureFixture
) -> None:
    t = tools()
    daily = os.fsencode(t.workspace.daily_dir)
    with open(os.path.join(daily, b"caf\xe9.md"), "wb") as bad:
        bad.write(b"# menu\n\nthe heron special is on today\n")
    os.makedirs(os.path.join(daily, b"r\xe9sum\xe9"))
    with open(os.path.join(daily, b"r\xe9sum\xe9", b"cv.md"), "wb") as nested:
        nested.write(b"# cv\n\nheron keeper since 2019\n")
    (t.workspace.daily_dir / "2026-03-07.md").write_text("# notes\n\nthe heron left at dawn\n")

    with caplog.at_level(logging.WARNING, logger="contextmem.memory"):
        hits = _hits(t, "heron")
        _hits(t, "heron")  # a second search warns no more
    assert [h["path"] for h in hits] == ["memory/2026-03-07.md"]
    report = t.index.sync()
    assert report.skipped == ["memory/caf\\xe9.md", "memory/r\\xe9sum\\xe9/cv.md"]
    warned = [r.getMessage() for r in caplog.records if "not valid UTF-8" in r.getMessage()]
    assert len(warned) == 2 and "caf\\\\xe9.md" in warned[0], warned  # the repr of the safe name
    assert t.index.check().ok, t.index.check().problems


# --- attack 3: the database restarts ----------------------------------------------------------------


def test_the_postgres_index_raises_typed_errors_in_an_outage_and_recovers(
    private_pg: pg.LocalPostgres, tmp_path: Path
) -> None:
    from contextmem.memory.pg_index import PgMemoryIndex

    ws = Workspace(tmp_path / "ws")
    ws.ensure()
    ws.core_file.write_text("# core\n\nthe osprey nests by the lighthouse\n")
    patience = {"connect_timeout": 1.0, "statement_timeout": 2.0, "lock_timeout": 1.0, "retry_seconds": 1.5}
    index = PgMemoryIndex(ws, HashEmbedder(DIM), private_pg.dsn, **patience)
    try:
        t = MemoryTools(index, clock=lambda: DAY)
        assert _hits(t, "osprey")[0]["path"] == "MEMORY.md"

        private_pg.restart()  # the pooled connection is now dead: the next search reconnects
        assert _hits(t, "osprey")[0]["path"] == "MEMORY.md"

        private_pg.stop_server()
        with pytest.raises(StoreUnavailableError) as raised:
            index.search("osprey")
        message = str(raised.value)
        assert "\n" not in message and "Fix:" in message, message
        answer = t.call("memory_search", {"query": "osprey"})
        assert answer.startswith("error:") and "internal error" not in answer and "Fix:" in answer, answer

        private_pg.start_server()
        ws.core_file.write_text("# core\n\nthe osprey nests by the lighthouse\n\nthe tern came back\n")
        assert [h["path"] for h in _hits(t, "tern")] == ["MEMORY.md"]  # a sync and a search again
        assert index.check().ok
    finally:
        index.close()
