"""PostgreSQL store specifics, on a real server: migrations, upgrades, two workers, SIGKILL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from contextmem.dsn import redact_store_url as redact
from contextmem.errors import MissingExtraError, StoreSchemaError
from contextmem.messages import assistant
from contextmem.store.codec import encode_message
from contextmem.store.postgres import MIGRATIONS, PostgresSessionStore, migrate
from tests import pg
from tests.fixtures.make_v1_sqlite import CREATED, DATA
from tests.store_workload import run_crashes, run_turns

pg_dsn = pg.pg_dsn  # the fixture


async def test_processes_starting_together_migrate_once(pg_dsn: str) -> None:
    import psycopg

    stores = [PostgresSessionStore(pg_dsn) for _ in range(4)]
    assert await asyncio.gather(*(s.schema_version() for s in stores)) == [len(MIGRATIONS)] * 4
    for s in stores:
        await s.close()
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT component, version FROM cm_schema_migrations ORDER BY version").fetchall()
    assert rows == [("sessions", m.version) for m in MIGRATIONS]


async def test_a_v1_database_is_migrated_and_keeps_its_data(pg_dsn: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        assert await migrate(conn, upto=1) == 1
        async with conn.transaction():
            for ns, sid, summary, meta, updated, rows in DATA:
                cur = await conn.execute(
                    "INSERT INTO cm_sessions (namespace, session_id, summary, meta, next_seq, created_at, "
                    "updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    (ns, sid, summary, meta, len(rows) + 1, CREATED, updated),
                )
                pk = (await cur.fetchone() or [0])[0]
                for seq, original, current, state in rows:
                    await conn.execute(
                        "INSERT INTO cm_messages (session, seq, original, current, state, created_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s)",
                        (
                            pk,
                            seq,
                            encode_message(original),
                            None if current is None else encode_message(current),
                            state,
                            CREATED + seq,
                        ),
                    )

    store = PostgresSessionStore(pg_dsn)
    assert await store.schema_version() == len(MIGRATIONS)
    assert await store.integrity_check() == []
    for ns, sid, summary, meta, updated, rows in DATA:
        state = await store.open_session(ns, sid)
        assert (state.summary, state.meta, state.updated_at) == (summary, meta, updated)
        assert [(m.seq, m.message) for m in state.live] == [
            (seq, current or original) for seq, original, current, st in rows if st == "live"
        ]
        assert [(m.seq, m.message, m.state) for m in await store.messages(ns, sid)] == [
            (seq, original, st) for seq, original, _, st in rows
        ]
    await store.append("tenant-b", "chat-1", [assistant("reply")])
    assert await store.integrity_check() == []
    await store.close()
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute(
            "SELECT seq, archived_at FROM cm_messages WHERE state = 'archived' ORDER BY seq"
        )
        assert await cur.fetchall() == [(1, CREATED + 600), (2, CREATED + 600)]


async def test_a_newer_schema_is_refused(pg_dsn: str) -> None:
    import psycopg

    store = PostgresSessionStore(pg_dsn)
    await store.open_session("ns", "s")
    await store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO cm_schema_migrations VALUES ('sessions', 99, 'future', 0)")
    store = PostgresSessionStore(pg_dsn)
    with pytest.raises(StoreSchemaError, match=r"version 99.*upgrade contextmem"):
        await store.open_session("ns", "s")
    await store.close()


def test_passwords_never_reach_error_messages() -> None:
    assert redact("postgresql://bob:s3cret@db:5432/x") == "postgresql://bob:***@db:5432/x"
    assert redact("host=db password=s3cret dbname=x") == "host=db password=*** dbname=x"


def test_missing_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r"contextmem\[postgres\]"):
        PostgresSessionStore("postgresql:///x")


async def test_two_workers_sharing_sessions_lose_nothing_and_never_compact_together(
    pg_dsn: str, tmp_path: Path
) -> None:
    stats = await run_turns(pg_dsn, tmp_path, workers=2, sessions=8, n_turns=40, compact_every=4)
    print(f"\npostgres 2 processes x 8 sessions x 40 turns: {stats}")
    assert stats["compactions"] > 0


async def test_sigkill_during_writes_loses_nothing_acknowledged(pg_dsn: str) -> None:
    stats = await run_crashes(pg_dsn, lanes=5, lives=10)
    print(f"\npostgres crashes: {stats}")
    assert stats["kills"] >= 50
