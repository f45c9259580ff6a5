"""The PostgreSQL store when the database restarts, stays down or goes dark (issue 30), on a real server.

Each test that harms its server gets one of its own (``private_pg``); a cut link is a :class:`Proxy`
in front of it. The claims: no driver exception ever escapes; outages shorter than ``retry_seconds`` are
ridden out; longer ones, and dark links, end in a typed error within the configured timeouts (the bounds
below are generous, they catch hangs, not slowness); an append cut off while committing is never stored
twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from contextmem.errors import SessionConflictError, StoreError, StoreLockedError, StoreUnavailableError
from contextmem.messages import Message, assistant, user
from contextmem.store.postgres import PostgresSessionStore
from tests import pg
from tests.netproxy import Proxy

pg_dsn = pg.pg_dsn  # fixtures
private_pg = pg.private_pg

FAST = {"connect_timeout": 1.0, "statement_timeout": 1.0, "lock_timeout": 1.0, "retry_seconds": 1.5}
HANG = 60.0  # far beyond every bound below: reaching it means the call hung


def turn(n: int) -> list[Message]:
    return [user(f"question {n}"), assistant(f"answer {n}")]


@pytest.fixture
async def stores() -> AsyncIterator[list[PostgresSessionStore]]:
    """Stores a test opens, closed afterwards."""
    opened: list[PostgresSessionStore] = []
    yield opened
    for store in opened:
        await store.close()


def open_store(opened: list[PostgresSessionStore], dsn: str, **patience: float) -> PostgresSessionStore:
    store = PostgresSessionStore(dsn, **patience)
    opened.append(store)
    return store


@pytest.fixture
def proxy(private_pg: pg.LocalPostgres) -> Iterator[Proxy]:
    with Proxy(private_pg.socket) as link:
        yield link


def via(link: Proxy) -> str:
    return f"postgresql://postgres@127.0.0.1:{link.port}/postgres"


async def timed(coro: Any) -> tuple[Any, float]:
    """``(result or exception, seconds)`` of ``coro``; a call that hangs fails the test instead."""
    started = time.monotonic()
    async with asyncio.timeout(HANG):
        try:
            result = await coro
        except StoreError as exc:
            result = exc
    return result, time.monotonic() - started


# --- the proxy, an oracle the tests below rely on ---------------------------------------------------


@pytest.fixture
def echo(tmp_path: Path) -> Iterator[Path]:
    """A unix-socket echo server."""
    path = tmp_path / "echo.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield path
    server.close()


def test_the_proxy_forwards_and_a_cut_swallows_without_closing(echo: Path) -> None:
    with Proxy(echo) as link:
        client = socket.create_connection(("127.0.0.1", link.port), timeout=5)
        client.sendall(b"ping")
        assert client.recv(100) == b"ping"

        link.cut()
        client.sendall(b"lost")
        client.settimeout(0.5)
        with pytest.raises(TimeoutError):  # nothing comes back, and the connection is not reset either
            client.recv(100)
        late = socket.create_connection(("127.0.0.1", link.port), timeout=5)  # new links: accepted, dark
        late.sendall(b"late")
        late.settimeout(0.5)
        with pytest.raises(TimeoutError):
            late.recv(100)

        link.restore()
        client.settimeout(5)
        client.sendall(b"again")
        assert client.recv(100) == b"again"  # "lost" is gone for good

        link.cut_after(b"COMMIT")
        client.sendall(b"COMMIT;")  # reaches the server, but its answer does not come back
        client.settimeout(0.5)
        with pytest.raises(TimeoutError):
            client.recv(100)
        assert link.is_cut and link.was_cut.is_set()
        link.restore()
        client.settimeout(5)
        client.sendall(b"x")
        assert client.recv(100) == b"x"
        client.close()
        late.close()


def test_the_proxy_forwards_to_tcp_targets_too(echo: Path) -> None:
    with Proxy(echo) as inner, Proxy(f"127.0.0.1:{inner.port}") as outer:
        client = socket.create_connection(("127.0.0.1", outer.port), timeout=5)
        client.sendall(b"twice forwarded")
        assert client.recv(100) == b"twice forwarded"
        inner.cut()  # a cut anywhere on the way is a cut
        client.sendall(b"lost")
        client.settimeout(0.5)
        with pytest.raises(TimeoutError):
            client.recv(100)
        client.close()


def test_the_proxy_closing_ends_its_connections(echo: Path) -> None:
    link = Proxy(echo)
    client = socket.create_connection(("127.0.0.1", link.port), timeout=5)
    client.sendall(b"ping")
    assert client.recv(100) == b"ping"
    link.close()
    with contextlib.suppress(ConnectionResetError):  # either way: closed, not left hanging
        assert client.recv(100) == b""
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", link.port), timeout=2)
    client.close()


# --- restarts ---------------------------------------------------------------------------------------


async def test_a_restart_between_operations_is_ridden_out(
    private_pg: pg.LocalPostgres, stores: list[PostgresSessionStore]
) -> None:
    store = open_store(stores, private_pg.dsn, retry_seconds=30)
    other = open_store(stores, private_pg.dsn, retry_seconds=30)
    assert await store.append("ns", "s", turn(1)) == [1, 2]
    assert await other.append("ns", "s", turn(2), expected_next_seq=3) == [3, 4]
    await asyncio.to_thread(private_pg.restart)  # every pooled connection is now dead
    assert await store.append("ns", "s", turn(3)) == [5, 6]
    assert await other.append("ns", "s", turn(4), expected_next_seq=7) == [7, 8]
    await asyncio.to_thread(private_pg.restart)
    await store.archive("ns", "s", [1, 2], summary="sum", expected_next_seq=9)
    await asyncio.to_thread(private_pg.restart)
    state = await other.open_session("ns", "s")
    assert ([m.seq for m in state.live], state.summary) == ([3, 4, 5, 6, 7, 8], "sum")
    await asyncio.to_thread(private_pg.restart)
    async with asyncio.timeout(HANG), store.lock("ns", "s"):
        pass
    assert [m.message for m in await store.messages("ns", "s")] == turn(1) + turn(2) + turn(3) + turn(4)
    assert await store.integrity_check() == []


async def test_a_restart_during_appends_loses_and_duplicates_nothing(
    private_pg: pg.LocalPostgres, stores: list[PostgresSessionStore]
) -> None:
    writers = [open_store(stores, private_pg.dsn, retry_seconds=30) for _ in range(3)]
    acknowledged: dict[str, list[Message]] = {}
    when: list[float] = []  # when each append was acknowledged
    restarts_done = asyncio.Event()

    async def write(i: int, store: PostgresSessionStore) -> None:
        sid = f"s{i}"
        acknowledged[sid] = []
        next_seq = 1
        for n in range(10_000):
            last_one = restarts_done.is_set()  # this append starts after both restarts
            batch = [user(f"{sid} question {n}"), assistant(f"{sid} answer {n}")]
            seqs = await store.append("ns", sid, batch, expected_next_seq=next_seq)
            assert seqs == [next_seq, next_seq + 1]
            acknowledged[sid] += batch
            when.append(time.monotonic())
            next_seq += 2
            if last_one:
                return
            await asyncio.sleep(0.005)

    tasks = [asyncio.create_task(write(i, w)) for i, w in enumerate(writers)]
    async with asyncio.timeout(HANG):
        while len(when) < 6:  # every writer is connected and writing
            await asyncio.sleep(0.01)
    first = time.monotonic()
    await asyncio.to_thread(private_pg.restart)
    await asyncio.sleep(0.2)
    await asyncio.to_thread(private_pg.restart)
    last = time.monotonic()
    restarts_done.set()
    async with asyncio.timeout(HANG):
        await asyncio.gather(*tasks)  # a raw driver error, or a StoreError, fails the test here
    assert min(when) < first and max(when) > last  # the appends did span both restarts
    for sid, sent in acknowledged.items():
        assert [m.message for m in await writers[0].messages("ns", sid)] == sent
    assert await writers[0].integrity_check() == []


async def test_a_server_that_stays_down_is_a_typed_error_in_time(
    private_pg: pg.LocalPostgres, stores: list[PostgresSessionStore]
) -> None:
    store = open_store(stores, private_pg.dsn, **FAST)
    await store.append("ns", "s", turn(1))
    await asyncio.to_thread(private_pg.stop_server)
    fresh = open_store(stores, private_pg.dsn, **FAST)  # never connected: its first call fails the same way
    outcomes = await asyncio.gather(
        timed(store.append("ns", "s", turn(2))),
        timed(store.append("ns", "s", turn(2), expected_next_seq=3)),
        timed(store.archive("ns", "s", [1])),
        timed(_enter(store)),
        timed(fresh.list_sessions("ns")),
    )
    for error, seconds in outcomes:
        assert isinstance(error, StoreUnavailableError), error
        assert "Fix:" in str(error) and "\n" not in str(error) and not error.may_have_landed, error
        assert seconds < 20, (error, seconds)

    await asyncio.to_thread(private_pg.start_server)
    assert await store.append("ns", "s", turn(2), expected_next_seq=3) == [3, 4]  # the same store recovers
    assert [i.session_id for i in await fresh.list_sessions("ns")] == ["s"]


async def _enter(store: PostgresSessionStore) -> None:
    async with store.lock("ns", "s"):
        pass


async def test_the_compaction_lock_across_a_restart_raises_only_typed_errors(
    private_pg: pg.LocalPostgres, stores: list[PostgresSessionStore]
) -> None:
    holder = open_store(stores, private_pg.dsn, retry_seconds=30)
    waiter = open_store(stores, private_pg.dsn, retry_seconds=30)
    entered = asyncio.Event()

    async def wait_for_it() -> None:
        async with waiter.lock("ns", "s"):
            entered.set()

    async with asyncio.timeout(HANG):
        async with holder.lock("ns", "s"):
            waiting = asyncio.create_task(wait_for_it())
            await asyncio.sleep(0.3)
            assert not entered.is_set()
            # The restart ends both sessions: the held lock is gone, the waiter's wait fails and is retried.
            await asyncio.to_thread(private_pg.restart)
            await waiting
        # Leaving a lock whose connection died is quiet, and the lock is free again.
        async with holder.lock("ns", "s"):
            pass


async def test_a_lock_held_too_long_is_store_locked_error(
    pg_dsn: str, stores: list[PostgresSessionStore]
) -> None:
    holder = open_store(stores, pg_dsn)
    waiter = open_store(stores, pg_dsn, lock_timeout=1.0)
    async with holder.lock("ns", "s"):
        error, seconds = await timed(_enter(waiter))
    assert isinstance(error, StoreLockedError) and "Fix:" in str(error) and seconds < 20, error
    async with asyncio.timeout(HANG):
        await _enter(waiter)


# --- a link that goes dark ------------------------------------------------------------------------


async def test_a_cut_link_is_a_typed_error_within_the_timeouts(
    proxy: Proxy, stores: list[PostgresSessionStore]
) -> None:
    store = open_store(stores, via(proxy), **FAST)
    await store.append("ns", "s", turn(1))
    proxy.cut()
    # An attempt may take connect (1 s) or statement + grace (3.3 s), retried for 1.5 s: 8 s at most.
    outcomes = await asyncio.gather(
        timed(store.append("ns", "s", turn(2))),
        timed(store.messages("ns", "s")),
        timed(store.open_session("ns", "s")),
        timed(_enter(store)),
    )
    for error, seconds in outcomes:
        assert isinstance(error, StoreUnavailableError), error
        assert seconds < 30, (error, seconds)
    proxy.restore()
    assert await store.append("ns", "s", turn(2), expected_next_seq=3) == [3, 4]
    assert len(await store.messages("ns", "s")) == 4


async def test_a_conditional_append_cut_off_while_committing_is_stored_once(
    proxy: Proxy, stores: list[PostgresSessionStore]
) -> None:
    store = open_store(stores, via(proxy), **{**FAST, "retry_seconds": 20.0})
    await store.append("ns", "s", turn(1))
    proxy.cut_after(b"COMMIT")  # the server commits; the client never hears it did
    restore = asyncio.create_task(_restore_when_cut(proxy))
    seqs, _ = await timed(store.append("ns", "s", turn(2), expected_next_seq=3))
    await restore
    assert seqs == [3, 4], seqs  # settled: it landed, and is reported as landed
    assert [m.message for m in await store.messages("ns", "s")] == turn(1) + turn(2)
    assert (await store.open_session("ns", "s")).next_seq == 5

    # A conditional archive cut off the same way: it landed, so it is not reported as a conflict.
    proxy.cut_after(b"COMMIT")
    restore = asyncio.create_task(_restore_when_cut(proxy))
    done, _ = await timed(store.archive("ns", "s", [1, 2], summary="sum", expected_next_seq=5))
    await restore
    assert done is None, done
    state = await store.open_session("ns", "s")
    assert ([m.seq for m in state.live], state.summary) == ([3, 4], "sum")
    with pytest.raises(SessionConflictError):  # and a stale plan still conflicts
        await store.archive("ns", "s", [1, 2], summary="other", expected_next_seq=5)


async def test_an_append_cut_off_while_committing_that_cannot_settle_says_it_may_have_landed(
    proxy: Proxy, stores: list[PostgresSessionStore]
) -> None:
    store = open_store(stores, via(proxy), **FAST)
    await store.append("ns", "s", turn(1))
    proxy.cut_after(b"COMMIT")
    restore = asyncio.create_task(_restore_when_cut(proxy))
    error, _ = await timed(store.append("ns", "s", turn(2)))
    await restore
    assert isinstance(error, StoreUnavailableError) and error.may_have_landed, error
    assert "may have landed" in str(error) and "Fix: reload the session" in str(error)
    assert [m.message for m in await store.messages("ns", "s")] == turn(1) + turn(2)  # once, not retried

    # A conditional one settles it when it can reach the server again; when it cannot, it says so too.
    proxy.cut_after(b"COMMIT")
    error, seconds = await timed(store.append("ns", "s", turn(3), expected_next_seq=5))
    assert isinstance(error, StoreUnavailableError) and error.may_have_landed, error
    assert seconds < 40, seconds
    proxy.restore()
    assert [m.message for m in await store.messages("ns", "s")] == turn(1) + turn(2) + turn(3)


async def _restore_when_cut(link: Proxy) -> None:
    async with asyncio.timeout(HANG):
        while not link.was_cut.is_set():
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)
    link.restore()


async def test_a_row_lock_held_too_long_is_store_locked_error(
    pg_dsn: str, stores: list[PostgresSessionStore]
) -> None:
    import psycopg

    store = open_store(stores, pg_dsn, lock_timeout=1.0)
    await store.append("ns", "s", turn(1))
    async with await psycopg.AsyncConnection.connect(pg_dsn) as other:  # a transaction that stays open
        await other.execute("SELECT 1 FROM cm_sessions WHERE session_id = 's' FOR UPDATE")
        error, seconds = await timed(store.append("ns", "s", turn(2)))
        assert isinstance(error, StoreLockedError) and "store_lock_timeout" in str(error), error
        assert seconds < 20, seconds
    assert await store.append("ns", "s", turn(2)) == [3, 4]  # nothing of the refused one was written


def test_open_store_gives_the_settings_patience_to_the_store() -> None:
    from contextmem.settings import Settings
    from contextmem.store.open import open_store as open_url
    from contextmem.store.pg_connect import Patience

    settings = Settings(
        store_connect_timeout=3, store_statement_timeout=4, store_lock_timeout=5, store_retry_seconds=6
    )
    store = open_url("postgresql://nobody@127.0.0.1:1/none", settings)
    assert isinstance(store, PostgresSessionStore)
    assert store.patience == Patience(3, 4, 5, 6)
    assert open_url("postgresql://nobody@127.0.0.1:1/none").patience == Patience(10, 30, 30, 30)  # type: ignore[attr-defined]
