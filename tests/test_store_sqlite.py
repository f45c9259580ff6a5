"""SQLite store specifics: WAL and durability, busy handling, upgrades, many processes, SIGKILL.

The load sizes are kept small for CI; the issue's full acceptance run is, by hand::

    CONTEXTMEM_STORE_LOAD=8,50,100 .venv/bin/python -m pytest tests/test_store_sqlite.py -k many_processes -s
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings

from contextmem.errors import StoreLockedError, StoreSchemaError
from contextmem.messages import Message, assistant, user
from contextmem.store.codec import decode_message, encode_message
from contextmem.store.sqlite import MIGRATIONS, SqliteSessionStore
from tests.fixtures.make_v1_sqlite import DATA
from tests.fixtures.make_v1_sqlite import PATH as V1_FIXTURE
from tests.store_workload import run_crashes, run_turns
from tests.strategies import histories


def pragma(path: Path, name: str) -> object:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


@given(histories())
# Pinned at 40 in every profile: each example encodes and decodes a whole history (~0.2 s).
@hsettings(max_examples=40)
def test_codec_round_trips_every_history(history: list[Message]) -> None:
    assert [decode_message(encode_message(m)) for m in history] == history


async def test_wal_and_synchronous_full_by_default(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    for mode, level in (("FULL", 2), ("NORMAL", 1)):
        store = SqliteSessionStore(path, synchronous=mode)  # type: ignore[arg-type]
        await store.append("ns", "s", [user("x")])
        assert await store._call(
            lambda s=store: s._connection().execute("PRAGMA synchronous").fetchone()[0]
        ) == (level)
        await store.close()
    assert pragma(path, "journal_mode") == "wal"


async def test_a_busy_database_is_waited_for_not_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path)
    await store.append("ns", "s", [user("first")])
    held = threading.Event()

    def hog() -> None:  # another process's long write transaction, holding the write lock for 1.5 s
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(1.5)
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=hog)
    thread.start()
    held.wait()
    started = time.monotonic()
    assert await store.append("ns", "s", [user("second")]) == [2]
    assert time.monotonic() - started > 1.0
    thread.join()
    await store.close()


async def test_a_database_locked_for_too_long_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path, timeout=0.3)
    await store.open_session("ns", "s")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreLockedError, match=r"append on .* stayed locked by other writers") as info:
            await store.append("ns", "s", [user("x")])
        assert "database is locked" not in str(info.value)
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    assert await store.append("ns", "s", [user("x")]) == [1]  # and it works once the lock is gone
    await store.close()


async def test_processes_opening_a_new_database_together_migrate_it_once(tmp_path: Path) -> None:
    stores = [SqliteSessionStore(tmp_path / "s.db") for _ in range(4)]
    assert await asyncio.gather(*(s.schema_version() for s in stores)) == [len(MIGRATIONS)] * 4
    for s in stores:
        await s.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute("SELECT version FROM cm_schema_migrations ORDER BY version").fetchall() == [
        (m.version,) for m in MIGRATIONS
    ]
    conn.close()


async def test_a_v1_database_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(V1_FIXTURE, path)
    assert pragma(path, "journal_mode") == "delete"
    store = SqliteSessionStore(path)
    assert await store.schema_version() == len(MIGRATIONS)
    assert await store.integrity_check() == []
    for ns, sid, summary, meta, updated, rows in DATA:
        state = await store.open_session(ns, sid)
        assert (state.summary, state.meta, state.updated_at, state.next_seq) == (
            summary,
            meta,
            updated,
            len(rows) + 1,
        )
        assert [(m.seq, m.message) for m in state.live] == [
            (seq, current or original) for seq, original, current, st in rows if st == "live"
        ]
        stored = await store.messages(ns, sid)
        assert [(m.seq, m.message, m.state, m.created_at) for m in stored] == [
            (seq, original, st, 1_700_000_000.0 + seq) for seq, original, _, st in rows
        ]
    # migration 2 backfilled archived_at and added its indexes; the old data keeps working
    await store.archive("default", "chat-1", [3], summary="new summary")
    await store.append("tenant-b", "chat-1", [assistant("reply")])
    assert await store.integrity_check() == []
    await store.close()
    conn = sqlite3.connect(path)
    archived_at = conn.execute(
        "SELECT seq, archived_at FROM cm_messages WHERE state = 'archived' ORDER BY seq"
    )
    rows = archived_at.fetchall()
    assert rows[:2] == [(1, 1_700_000_600.0), (2, 1_700_000_600.0)] and rows[2][0] == 3 and rows[2][1] > 1.7e9
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"cm_messages_live", "cm_sessions_idle"} <= indexes
    conn.close()
    assert pragma(path, "journal_mode") == "wal"


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteSessionStore(path)
    await store.open_session("ns", "s")
    await store.close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO cm_schema_migrations VALUES ('sessions', 99, 'future', 0)")
    conn.close()
    store = SqliteSessionStore(path)
    with pytest.raises(StoreSchemaError, match=r"version 99.*upgrade contextmem"):
        await store.open_session("ns", "s")
    await store.close()


async def test_lock_files_go_with_their_sessions(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.db")
    async with store.lock("ns", "a"), store.lock("ns", "b"):
        pass
    locks = tmp_path / "s.db.locks"
    assert len(list(locks.iterdir())) == 2
    await store.delete_session("ns", "a")
    assert len(list(locks.iterdir())) == 1
    async with store.lock("ns", "b"):  # a held lock file stays
        await store.delete_session("ns", "b")
        assert len(list(locks.iterdir())) == 1
    await store.close()


def load_size() -> tuple[int, int, int]:
    workers, sessions, turns = (int(x) for x in os.environ.get("CONTEXTMEM_STORE_LOAD", "8,10,40").split(","))
    return workers, sessions, turns


async def test_many_processes_lose_nothing_and_never_compact_together(tmp_path: Path) -> None:
    workers, sessions, turns = load_size()
    path = tmp_path / "load.db"
    stats = await run_turns(
        f"sqlite:{path}", tmp_path, workers=workers, sessions=sessions, n_turns=turns, compact_every=5
    )
    print(f"\nsqlite {workers} processes x {sessions} sessions x {turns} turns: {stats}")
    assert stats["compactions"] > 0


async def test_sigkill_during_writes_loses_nothing_acknowledged(tmp_path: Path) -> None:
    stats = await run_crashes(f"sqlite:{tmp_path / 'crash.db'}", lanes=5, lives=10)
    print(f"\nsqlite crashes: {stats}")
    assert stats["kills"] >= 50
