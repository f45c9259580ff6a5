"""The one contract every session store keeps (SPEC S1, S2, C12).

It runs against SQLite, a real PostgreSQL and the in-memory store of contextmem.testing.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contextmem.errors import (
    ConfigError,
    MessageFormatError,
    MessageStateError,
    PathEscapeError,
    SessionConflictError,
    StoreError,
    StoreURLError,
)
from contextmem.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    assistant,
    tool_call,
    tool_result,
    user,
)
from contextmem.store.base import SessionStore
from contextmem.store.open import open_store
from contextmem.store.postgres import PostgresSessionStore
from contextmem.store.sqlite import SqliteSessionStore
from contextmem.testing import InMemoryDatabase, InMemorySessionStore
from tests.pg import pg_dsn  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Backend:
    """Opens stores on one database, and (SQL only) reaches behind their back to damage it."""

    name: str
    url: str
    factory: Callable[..., SessionStore]
    raw: Callable[[str], None] | None
    opened: list[SessionStore] = field(default_factory=list)

    def open(self, **kwargs: Any) -> SessionStore:
        store = self.factory(**kwargs)
        self.opened.append(store)
        return store

    def sql(self, statement: str) -> None:
        """Run ``statement`` on the database behind the stores (a SQL backend only)."""
        if self.raw is None:
            pytest.skip(f"the {self.name} store has no database to reach behind its back")
        self.raw(statement)


@pytest.fixture(params=["sqlite", "postgres", "memory"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "sqlite":
        path = tmp_path / "sessions.db"

        def raw_sqlite(sql: str) -> None:
            import sqlite3

            conn = sqlite3.connect(path)
            try:
                with conn:
                    conn.execute(sql)
            finally:
                conn.close()

        b = Backend("sqlite", f"sqlite:///{path}", lambda **kw: SqliteSessionStore(path, **kw), raw_sqlite)
    elif request.param == "postgres":
        dsn: str = request.getfixturevalue("pg_dsn")

        def raw_pg(sql: str) -> None:
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.encode())

        b = Backend("postgres", dsn, lambda **kw: PostgresSessionStore(dsn, **kw), raw_pg)
    else:
        database = InMemoryDatabase()  # every store the test opens is a connection to it
        b = Backend("memory", "", lambda **kw: InMemorySessionStore(database=database, **kw), None)
    yield b
    for store in b.opened:
        await store.close()


@pytest.fixture
def store(backend: Backend) -> SessionStore:
    return backend.open()


def turn(n: int) -> list[Message]:
    return [user(f"question {n}"), assistant(f"answer {n}")]


# A spread of shapes that must come back equal: parts, images, tool calls, reasoning, extra keys, keys only
# the Anthropic adapter keeps, Chinese, a NUL character and astral-plane text.
VARIED: list[Message] = [
    user("hello 你好"),
    UserMessage((TextPart("look"), ImagePart("data:image/png;base64,AAAA", "low")), name="ann"),
    AssistantMessage(
        "calling",
        reasoning="think",
        tool_calls=(ToolCall("c1", "read_file", '{"path": "a.txt"}'), ToolCall("c2", "search", "{}")),
        extra={"tool_call_extra": {"c1": {"extra_content": {"google": {"thought_signature": "x"}}}}},
    ),
    ToolMessage("c1", "file text\x00with nul", name="read_file", extra={"is_error": True}),
    tool_result("c2", "search result 𝄞 🎉 outside the BMP"),
    AssistantMessage(None, extra={"content": None, "refusal": None, "thinking_signature": "sig"}),
    assistant("done", tool_calls=[tool_call("c3", "x", {"k": [1, 2]})]),
]


async def test_is_a_session_store(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)


async def test_open_creates_an_empty_session(store: SessionStore) -> None:
    state = await store.open_session("ns", "s")
    assert (state.namespace, state.session_id, state.live, state.summary, state.meta, state.next_seq) == (
        "ns",
        "s",
        (),
        None,
        None,
        1,
    )
    assert [i.session_id for i in await store.list_sessions("ns")] == ["s"]


async def test_append_assigns_consecutive_seqs(store: SessionStore) -> None:
    assert await store.append("ns", "s", turn(1)) == [1, 2]
    assert await store.append("ns", "s", [user("three")]) == [3]
    assert await store.append("ns", "s", []) == []
    assert await store.append("ns", "other", turn(1)) == [1, 2]  # per session
    state = await store.open_session("ns", "s")
    assert [m.seq for m in state.live] == [1, 2, 3]
    assert state.next_seq == 4
    assert all(m.state == "live" and m.created_at > 0 for m in state.live)


async def test_messages_round_trip_exactly(store: SessionStore) -> None:
    await store.append("ns", "s", VARIED)
    assert [m.message for m in await store.messages("ns", "s")] == VARIED
    assert [m.message for m in (await store.open_session("ns", "s")).live] == VARIED


async def test_messages_that_could_not_be_read_back_are_refused(store: SessionStore) -> None:
    await store.append("ns", "s", turn(1))
    lone = tool_result("c2", "search result \ud800 lone surrogate")
    with pytest.raises(MessageFormatError, match="lone surrogate"):
        await store.append("ns", "s", [user("fine"), lone])
    with pytest.raises(MessageFormatError, match="lone surrogate"):
        await store.replace("ns", "s", 1, lone)
    assert [m.message for m in await store.messages("ns", "s")] == turn(1)  # nothing written
    assert [m.message for m in (await store.open_session("ns", "s")).live] == turn(1)  # still readable
    assert await store.integrity_check() == []


async def test_concurrent_appends_get_disjoint_seqs(backend: Backend) -> None:
    a, b = backend.open(), backend.open()
    results = await asyncio.gather(*(s.append("ns", "s", turn(i)) for i in range(10) for s in (a, b)))
    seqs = sorted(q for r in results for q in r)
    assert seqs == list(range(1, 41))
    assert all(r[1] == r[0] + 1 for r in results)


async def test_replace_changes_the_current_form_and_keeps_the_original(store: SessionStore) -> None:
    await store.append("ns", "s", [*turn(1), tool_result("c", "x" * 1000)])
    cut = tool_result("c", "xxx…(cut, full text in tool_results/c.txt)")
    await store.replace("ns", "s", 3, cut)
    assert (await store.open_session("ns", "s")).live[2].message == cut
    assert (await store.messages("ns", "s"))[2].message == tool_result("c", "x" * 1000)
    await store.replace("ns", "s", 3, tool_result("c", "again"))  # a second replace is fine too
    assert (await store.open_session("ns", "s")).live[2].message == tool_result("c", "again")


async def test_replace_refuses_archived_and_unknown_messages(store: SessionStore) -> None:
    await store.append("ns", "s", turn(1))
    await store.archive("ns", "s", [1])
    with pytest.raises(MessageStateError, match="archived"):
        await store.replace("ns", "s", 1, user("x"))
    with pytest.raises(MessageStateError, match="does not exist"):
        await store.replace("ns", "s", 9, user("x"))
    with pytest.raises(MessageStateError):
        await store.replace("ns", "nope", 1, user("x"))
    assert (await store.messages("ns", "s"))[0].message == user("question 1")
    assert [i.session_id for i in await store.list_sessions("ns")] == ["s"]  # "nope" was not created


async def test_archive_moves_messages_and_sets_the_summary_atomically(store: SessionStore) -> None:
    await store.append("ns", "s", turn(1) + turn(2) + turn(3))
    await store.archive("ns", "s", [1, 2, 3, 4], summary="sum 1", meta='{"calls": 1}')
    state = await store.open_session("ns", "s")
    assert [m.seq for m in state.live] == [5, 6]
    assert (state.summary, state.meta) == ("sum 1", '{"calls": 1}')
    archived = await store.messages("ns", "s", state="archived")
    assert [(m.seq, m.state) for m in archived] == [(q, "archived") for q in (1, 2, 3, 4)]
    assert archived[0].message == user("question 1")

    # one bad seq: nothing happens, not even the summary
    with pytest.raises(MessageStateError):
        await store.archive("ns", "s", [5, 99], summary="sum 2")
    state = await store.open_session("ns", "s")
    assert ([m.seq for m in state.live], state.summary) == ([5, 6], "sum 1")

    await store.archive("ns", "s", [1, 5])  # archiving again is harmless; summary None leaves it
    state = await store.open_session("ns", "s")
    assert ([m.seq for m in state.live], state.summary, state.meta) == ([6], "sum 1", '{"calls": 1}')


async def test_set_meta_sets_only_what_is_given(store: SessionStore) -> None:
    await store.set_meta("ns", "s", summary="S")
    await store.set_meta("ns", "s", meta="M")
    state = await store.open_session("ns", "s")
    assert (state.summary, state.meta) == ("S", "M")
    await store.set_meta("ns", "s", summary="S2")
    state = await store.open_session("ns", "s")
    assert (state.summary, state.meta) == ("S2", "M")


async def test_messages_filters_by_state(store: SessionStore) -> None:
    await store.append("ns", "s", turn(1) + turn(2))
    await store.archive("ns", "s", [1, 2])
    assert [m.seq for m in await store.messages("ns", "s")] == [1, 2, 3, 4]
    assert [m.seq for m in await store.messages("ns", "s", state="live")] == [3, 4]
    assert [m.seq for m in await store.messages("ns", "s", state="archived")] == [1, 2]
    assert await store.messages("ns", "missing") == []
    assert [i.session_id for i in await store.list_sessions("ns")] == ["s"]  # reading created nothing
    with pytest.raises(StoreError):
        await store.messages("ns", "s", state="gone")  # type: ignore[arg-type]


async def test_reopening_restores_everything(backend: Backend) -> None:
    first = backend.open()
    await first.append("ns", "s", VARIED)
    await first.replace("ns", "s", 5, tool_result("c2", "short"))
    await first.archive("ns", "s", [1, 2], summary="the summary", meta="{}")
    before = await first.open_session("ns", "s")
    all_before = await first.messages("ns", "s")
    await first.close()
    with pytest.raises(StoreError, match="closed"):
        await first.open_session("ns", "s")

    second = backend.open()
    assert await second.open_session("ns", "s") == before
    assert await second.messages("ns", "s") == all_before


async def test_list_sessions_counts(backend: Backend) -> None:
    clock = Clock()
    store = backend.open(clock=clock)
    await store.append("ns", "a", turn(1) + turn(2))
    await store.archive("ns", "a", [1])
    clock.now += 10
    await store.append("ns", "b", turn(1))
    infos = await store.list_sessions("ns")
    assert [(i.session_id, i.live_count, i.archived_count) for i in infos] == [("b", 2, 0), ("a", 3, 1)]
    assert infos[0].created_at == infos[0].updated_at == clock.now
    assert infos[1].updated_at == clock.now - 10
    assert await store.list_sessions("empty") == []


async def test_delete_session(store: SessionStore) -> None:
    await store.append("ns", "a", turn(1))
    await store.append("ns", "b", turn(1))
    await store.delete_session("ns", "a")
    await store.delete_session("ns", "never")  # nothing to do
    assert [i.session_id for i in await store.list_sessions("ns")] == ["b"]
    assert await store.messages("ns", "a") == []
    assert (await store.open_session("ns", "a")).next_seq == 1  # a new, empty session
    assert len(await store.messages("ns", "b")) == 2
    assert await store.integrity_check() == []


async def test_cleanup_idle_removes_only_idle_sessions(backend: Backend) -> None:
    day = 86_400.0
    clock = Clock(100 * day)
    store = backend.open(clock=clock)
    await store.append("ns", "old", turn(1))
    await store.append("other", "old", turn(1))
    await store.append("ns", "touched", turn(1))
    clock.now += 20 * day
    await store.set_meta("ns", "touched", meta="{}")  # activity keeps a session
    await store.append("ns", "new", turn(1))
    removed = await store.cleanup_idle(30 * day, namespace=None, now=100 * day + 31 * day)
    assert removed == [("ns", "old"), ("other", "old")]
    assert sorted(i.session_id for i in await store.list_sessions("ns")) == ["new", "touched"]
    assert await store.cleanup_idle(30 * day, namespace=None, now=100 * day + 31 * day) == []
    clock.now = 200 * day
    assert await store.cleanup_idle(30 * day, namespace="ns") == [
        ("ns", "new"),
        ("ns", "touched"),
    ]  # its clock


async def test_cleanup_idle_of_one_namespace_leaves_the_others(backend: Backend) -> None:
    day = 86_400.0
    clock = Clock(100 * day)
    store = backend.open(clock=clock)
    for ns in ("alice", "bob", "carol"):
        await store.append(ns, "s", turn(1))
        await store.append(ns, "t", turn(1))
    clock.now += 40 * day
    assert await store.cleanup_idle(30 * day, namespace="alice") == [("alice", "s"), ("alice", "t")]
    assert await store.list_sessions("alice") == []
    for ns in ("bob", "carol"):  # idle just as long, but not alice's: untouched, messages and all
        assert [i.session_id for i in await store.list_sessions(ns)] == ["s", "t"]
        assert [m.message for m in await store.messages(ns, "s")] == turn(1)
    assert await store.cleanup_idle(30 * day, namespace="nobody") == []
    assert await store.cleanup_idle(30 * day, namespace=None) == [
        ("bob", "s"),
        ("bob", "t"),
        ("carol", "s"),
        ("carol", "t"),
    ]
    assert await store.integrity_check() == []


async def test_cleanup_idle_has_no_default_namespace(store: SessionStore) -> None:
    with pytest.raises(TypeError, match="namespace"):
        await store.cleanup_idle(0)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="Fix"):
        await store.cleanup_idle(0, namespace="../x")


async def test_conditional_append_writes_only_at_the_expected_seq(store: SessionStore) -> None:
    # A session that does not exist yet is at next_seq 1.
    assert await store.append("ns", "s", turn(1), expected_next_seq=1) == [1, 2]
    assert await store.append("ns", "s", [user("three")], expected_next_seq=3) == [3]
    with pytest.raises(SessionConflictError, match="Fix") as stale:
        await store.append("ns", "s", [user("stale writer")], expected_next_seq=3)
    assert (stale.value.expected, stale.value.actual) == (3, 4)
    with pytest.raises(SessionConflictError) as ahead:
        await store.append("ns", "s", [user("from the future")], expected_next_seq=9)
    assert (ahead.value.expected, ahead.value.actual) == (9, 4)
    # nothing of the refused appends was written, and the session still advances normally
    assert [m.message for m in await store.messages("ns", "s")] == [*turn(1), user("three")]
    assert (await store.open_session("ns", "s")).next_seq == 4
    assert await store.append("ns", "s", [user("four")]) == [4]  # unconditional appends still work
    assert await store.integrity_check() == []


async def test_conditional_append_on_a_missing_session_creates_nothing(store: SessionStore) -> None:
    with pytest.raises(SessionConflictError) as exc:
        await store.append("ns", "ghost", turn(1), expected_next_seq=5)
    assert (exc.value.expected, exc.value.actual) == (5, 1)
    assert await store.list_sessions("ns") == []  # not even an empty session
    await store.append("ns", "taken", turn(1))
    with pytest.raises(SessionConflictError) as taken:  # "create it" is an expectation too
        await store.append("ns", "taken", turn(2), expected_next_seq=1)
    assert taken.value.actual == 3
    assert len(await store.messages("ns", "taken")) == 2


@pytest.mark.parametrize("existing", [False, True], ids=["new-session", "existing-session"])
async def test_concurrent_conditional_appends_exactly_one_wins(backend: Backend, existing: bool) -> None:
    writers = [backend.open() for _ in range(4)]
    expected = 1
    if existing:
        expected = len(await writers[0].append("ns", "s", turn(0))) + 1
    # Each writer appends a tool call with its result, all expecting the same next_seq: one wins, and
    # the stored history never holds a call without its result (the orphans issue 12 saw).
    calls = [
        [assistant(None, tool_calls=[tool_call(f"w{i}", "lookup", {"i": i})]), tool_result(f"w{i}", f"r{i}")]
        for i in range(len(writers))
    ]
    results = await asyncio.gather(
        *(w.append("ns", "s", c, expected_next_seq=expected) for w, c in zip(writers, calls, strict=True)),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, list)]
    lost = [r for r in results if isinstance(r, SessionConflictError)]
    assert len(won) == 1 and len(lost) == len(writers) - 1, results
    assert won[0] == [expected, expected + 1]
    assert all((e.expected, e.actual) == (expected, expected + 2) for e in lost)
    stored = [m.message for m in await writers[0].messages("ns", "s")][expected - 1 :]
    assert stored in calls
    assert (await writers[0].open_session("ns", "s")).next_seq == expected + 2
    assert await writers[0].integrity_check() == []


async def test_namespaces_are_isolated(store: SessionStore) -> None:
    await store.append("alice", "s", [user("alice's secret")])
    await store.append("bob", "s", [user("bob's"), assistant("reply")])
    await store.set_meta("alice", "s", summary="alice summary")
    assert [m.message for m in await store.messages("bob", "s")] == [user("bob's"), assistant("reply")]
    assert (await store.open_session("bob", "s")).summary is None
    assert [(i.namespace, i.live_count) for i in await store.list_sessions("bob")] == [("bob", 2)]
    await store.delete_session("bob", "s")
    assert [m.message for m in await store.messages("alice", "s")] == [user("alice's secret")]
    # ids that would collide if namespace and session were simply joined
    await store.append("a.b", "c", [user("one")])
    await store.append("a", "b.c", [user("two")])
    await store.append("a", "b/c", [user("three")])
    assert [m.message for m in await store.messages("a.b", "c")] == [user("one")]
    assert [m.message for m in await store.messages("a", "b/c")] == [user("three")]


async def test_lock_is_exclusive_between_stores(backend: Backend) -> None:
    a, b = backend.open(), backend.open()
    events: list[str] = []

    async def hold() -> None:
        async with a.lock("ns", "s"):
            events.append("a in")
            await asyncio.sleep(0.5)
            events.append("a out")

    holder = asyncio.create_task(hold())
    while not events:
        await asyncio.sleep(0.01)
    async with b.lock("ns", "other"):  # another session is not blocked
        events.append("other")
    async with b.lock("ns", "s"):
        events.append("b in")
    await holder
    assert events == ["a in", "other", "a out", "b in"]


async def test_lock_is_released_on_error_and_a_cancelled_waiter_leaves_it_free(store: SessionStore) -> None:
    with pytest.raises(RuntimeError):
        async with store.lock("ns", "s"):
            raise RuntimeError("compaction failed")
    async with store.lock("ns", "s"):
        waiter = asyncio.create_task(_enter(store))
        await asyncio.sleep(0.2)
        assert not waiter.done()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    async with asyncio.timeout(5):
        async with store.lock("ns", "s"):
            pass


async def _enter(store: SessionStore) -> None:
    async with store.lock("ns", "s"):
        pass


async def test_lock_excludes_other_processes_and_dies_with_its_holder(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("an in-memory store is one process's: no other process can hold its lock")
    spec = backend.url if backend.name == "postgres" else f"sqlite:{backend.url.removeprefix('sqlite:///')}"
    script = textwrap.dedent(
        f"""
        import asyncio, sys, time
        from tests.store_workload import make_store
        async def main():
            store = make_store({spec!r})
            async with store.lock("ns", "s"):
                print("held", flush=True)
                time.sleep(3600)
        asyncio.run(main())
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert await asyncio.to_thread(child.stdout.readline) == "held\n"
        store = backend.open()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await _enter(store)
        child.kill()  # SIGKILL: the holder never releases; the OS / server must
        child.wait()
        async with asyncio.timeout(10):
            await _enter(store)
    finally:
        child.kill()
        child.wait()


async def test_integrity_check_is_empty_when_healthy(store: SessionStore) -> None:
    assert await store.integrity_check() == []
    await store.append("ns", "s", VARIED)
    await store.replace("ns", "s", 1, user("cut"))
    await store.archive("ns", "s", [1, 2], summary="x")
    await store.append("ns", "t", turn(1))
    assert await store.integrity_check() == []


async def test_integrity_check_finds_damage_done_behind_its_back(backend: Backend) -> None:
    store = backend.open()
    await store.append("ns", "s", turn(1) + turn(2))
    await store.append("ns", "t", turn(1))
    backend.sql("DELETE FROM cm_messages WHERE seq = 2 AND session = (SELECT MIN(id) FROM cm_sessions)")
    backend.sql('UPDATE cm_messages SET current = \'{"role": "wizard"\' WHERE seq = 3')
    problems = await store.integrity_check()
    assert any("'s'" in p and "not contiguous" in p for p in problems), problems
    assert any("seq 3: current does not decode" in p for p in problems), problems
    assert not any("'t'" in p for p in problems), problems


async def test_originals_cannot_be_rewritten_even_behind_its_back(backend: Backend) -> None:
    store = backend.open()
    await store.append("ns", "s", turn(1))
    with pytest.raises(Exception, match="never change"):
        backend.sql("UPDATE cm_messages SET original = '{}' WHERE seq = 1")


async def test_open_store_reads_urls(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("no URL opens an in-memory store (open_store refuses one: see below)")
    store = open_store(backend.url)
    backend.opened.append(store)
    assert isinstance(store, SqliteSessionStore if backend.name == "sqlite" else PostgresSessionStore)
    assert await store.append("ns", "s", turn(1)) == [1, 2]


def test_open_store_rejects_what_it_cannot_open(tmp_path: Path) -> None:
    with pytest.raises(StoreURLError, match="unknown scheme 'mysql'"):
        open_store("mysql://x/y")
    with pytest.raises(StoreURLError, match="in-memory"):
        open_store("sqlite:///:memory:")
    with pytest.raises(StoreURLError, match="path"):
        open_store("sqlite://")
    relative = open_store("sqlite:///rel/s.db")
    absolute = open_store(f"sqlite:///{tmp_path}/s.db")
    assert isinstance(relative, SqliteSessionStore) and isinstance(absolute, SqliteSessionStore)
    assert relative.path == Path("rel/s.db")
    assert absolute.path == tmp_path / "s.db"


# --- many hosts, one database: the tail a writer saw, conditional archives, offloads ----------


async def test_an_append_expecting_a_tail_that_was_archived_conflicts(store: SessionStore) -> None:
    await store.append("ns", "s", turn(1) + turn(2))
    # A compactor on another host archives the tail this writer validated against; next_seq stays 5.
    await store.archive("ns", "s", [3, 4], summary="sum")
    for expected in (5, None):
        with pytest.raises(SessionConflictError, match=r"seq 3 \(and 1 more\) was archived.*Fix:") as moved:
            await store.append("ns", "s", [user("late")], expected_next_seq=expected, expected_live=[4, 3, 1])
        assert (moved.value.archived, moved.value.expected, moved.value.actual) == ((3, 4), 5, 5)
        assert "\n" not in str(moved.value)
    with pytest.raises(SessionConflictError) as gone:  # a seq that never was is not live either
        await store.append("ns", "s", [user("late")], expected_live=[9])
    assert gone.value.archived == (9,)
    assert [m.seq for m in await store.messages("ns", "s")] == [1, 2, 3, 4]  # nothing was written
    assert (await store.open_session("ns", "s")).next_seq == 5
    assert await store.append("ns", "s", [user("on time")], expected_next_seq=5, expected_live=[1, 2]) == [5]
    with pytest.raises(SessionConflictError):  # a session that does not exist has no live tail
        await store.append("ns", "ghost", [user("x")], expected_next_seq=1, expected_live=[1])
    assert [i.session_id for i in await store.list_sessions("ns")] == ["s"]
    assert await store.integrity_check() == []


async def test_a_conditional_archive_after_an_append_conflicts_and_changes_nothing(
    store: SessionStore,
) -> None:
    await store.append("ns", "s", turn(1) + turn(2))
    await store.set_meta("ns", "s", summary="sum 0", meta="m0")
    await store.append("ns", "s", [user("arrived while the summary was written")])  # next_seq 5 -> 6
    with pytest.raises(SessionConflictError, match=r"expected next seq 5, found 6.*Fix:") as moved:
        await store.archive("ns", "s", [1, 2], summary="sum 1", meta="m1", expected_next_seq=5)
    assert (moved.value.expected, moved.value.actual, moved.value.archived) == (5, 6, ())
    state = await store.open_session("ns", "s")
    assert ([m.seq for m in state.live], state.summary, state.meta) == ([1, 2, 3, 4, 5], "sum 0", "m0")

    await store.archive("ns", "s", [1, 2], summary="sum 1", meta="m1", expected_next_seq=6)
    # Another compactor already archived seq 1: a plan made before that must not land.
    with pytest.raises(SessionConflictError, match="seq 1 was archived") as twice:
        await store.archive("ns", "s", [1, 3], summary="sum 2", expected_next_seq=6)
    assert twice.value.archived == (1,)
    with pytest.raises(MessageStateError, match="does not exist"):  # an unknown seq stays the caller's error
        await store.archive("ns", "s", [3, 9], expected_next_seq=6)
    state = await store.open_session("ns", "s")
    assert ([m.seq for m in state.live], state.summary, state.meta) == ([3, 4, 5], "sum 1", "m1")
    with pytest.raises(SessionConflictError):
        await store.archive("ns", "ghost", [], summary="x", expected_next_seq=3)
    assert [i.session_id for i in await store.list_sessions("ns")] == ["s"]  # not even an empty session
    await store.archive("ns", "s", [1, 3])  # unconditional archives keep their old, forgiving behaviour
    assert await store.integrity_check() == []


async def test_archive_and_append_on_one_tail_exactly_one_lands(backend: Backend) -> None:
    writer, compactor = backend.open(), backend.open()
    await writer.append("ns", "s", turn(0))
    for round_ in range(8):
        state = await writer.open_session("ns", "s")
        tail, n = state.live[-1].seq, state.next_seq
        results = await asyncio.gather(
            compactor.archive("ns", "s", [tail], summary=f"sum {round_}", expected_next_seq=n),
            writer.append("ns", "s", turn(round_ + 1), expected_next_seq=n, expected_live=[tail]),
            return_exceptions=True,
        )
        landed = [r for r in results if not isinstance(r, SessionConflictError)]
        assert len(landed) == 1, results
        if results[0] is None:  # the archive won: the append was refused, the tail is archived
            await writer.append("ns", "s", turn(round_ + 1), expected_next_seq=n)
    assert await writer.integrity_check() == []


async def test_offloaded_results_come_back_whole_from_the_store(store: SessionStore) -> None:
    full = tool_result("c1", "x" * 5000)
    await store.append("ns", "s", [*turn(1), full, user("next")])
    await store.replace("ns", "s", 3, tool_result("c1", "xx…(cut, full text in tool_results/a.txt)"))
    await store.record_offload("ns", "s", 3, "tool_results/a.txt")
    await store.record_offload("ns", "s", 3, "tool_results/a.txt")  # idempotent
    assert await store.offloaded("ns", "tool_results/a.txt") == full  # the original, not the cut form
    assert await store.offloaded("ns", "./tool_results//a.txt") == full
    assert await store.offloaded("ns", "tool_results/b.txt") is None
    assert await store.offloaded("other", "tool_results/a.txt") is None  # namespaces never meet
    assert await store.offloaded("ns", "../ns/tool_results/a.txt") is None
    await store.archive("ns", "s", [1, 2, 3])
    assert await store.offloaded("ns", "tool_results/a.txt") == full  # archived rows are the archive

    with pytest.raises(MessageStateError, match="does not exist"):
        await store.record_offload("ns", "s", 9, "tool_results/c.txt")
    with pytest.raises(MessageStateError):
        await store.record_offload("ns", "ghost", 1, "tool_results/c.txt")
    for bad in ("/etc/passwd", "../escape.txt", "tool_results/../../x", ""):
        with pytest.raises(PathEscapeError, match="Fix:"):
            await store.record_offload("ns", "s", 3, bad)

    await store.append("other", "s", [tool_result("c9", "other namespace")])
    await store.record_offload("other", "s", 1, "tool_results/a.txt")
    assert await store.offloaded("ns", "tool_results/a.txt") == full
    assert await store.offloaded("other", "tool_results/a.txt") == tool_result("c9", "other namespace")

    await store.append("ns", "t", [tool_result("c2", "session t")])
    await store.record_offload("ns", "t", 1, "tool_results/t.txt")
    await store.record_offload("ns", "t", 1, "tool_results/a.txt")  # recorded again: the newest names it
    assert await store.offloaded("ns", "tool_results/a.txt") == tool_result("c2", "session t")
    await store.delete_session("ns", "t")  # its records go with it
    assert await store.offloaded("ns", "tool_results/t.txt") is None
    assert await store.offloaded("ns", "tool_results/a.txt") is None
    await store.record_offload("ns", "s", 3, "tool_results/a.txt")
    await store.delete_session("ns", "s")
    assert await store.offloaded("ns", "tool_results/a.txt") is None
    assert await store.offloaded("other", "tool_results/a.txt") == tool_result("c9", "other namespace")
    assert await store.integrity_check() == []


async def test_offload_records_survive_reopening_and_die_with_idle_sessions(backend: Backend) -> None:
    clock = Clock()
    first = backend.open(clock=clock)
    await first.append("ns", "s", [tool_result("c1", "full text")])
    await first.record_offload("ns", "s", 1, "tool_results/a.txt")
    await first.close()
    second = backend.open(clock=clock)
    assert await second.offloaded("ns", "tool_results/a.txt") == tool_result("c1", "full text")
    assert await second.cleanup_idle(10, namespace="ns", now=clock.now + 20) == [("ns", "s")]
    assert await second.offloaded("ns", "tool_results/a.txt") is None
    assert await second.integrity_check() == []


async def test_shared_says_whether_every_host_reaches_the_store(store: SessionStore) -> None:
    assert store.shared is isinstance(store, PostgresSessionStore)
    assert "shared" in SessionStore.__annotations__


def test_a_conflict_error_reads_as_before_when_no_seq_was_archived() -> None:
    old = SessionConflictError("ns", "s", 3, 4)
    assert (old.expected, old.actual, old.archived) == (3, 4, ())
    assert str(old) == (
        "session ('ns', 's') moved: expected next seq 3, found 4; nothing was written. "
        "Fix: reload the session (ContextEngine does) and append again."
    )


# --- versions, and the loaded states open_session keeps --------------------------------------------------


def count_loads(store: SessionStore) -> list[tuple[str, str]]:
    """The sessions ``store`` reads (with their messages) from now on, one entry per read."""
    loads: list[tuple[str, str]] = []
    load = store._load_session  # type: ignore[attr-defined]  (the storage hook every backend has)

    async def counted(namespace: str, session_id: str) -> Any:
        loads.append((namespace, session_id))
        return await load(namespace, session_id)

    store._load_session = counted  # type: ignore[attr-defined]
    return loads


async def test_an_unchanged_session_is_not_read_again(store: SessionStore) -> None:
    big = tool_result("c1", "log line\n" * 20_000)
    await store.append("ns", "s", [*turn(1), big])
    loads = count_loads(store)
    first = await store.open_session("ns", "s")
    again = await store.open_session("ns", "s")
    assert loads == [("ns", "s")]  # the second open read the version only, no message row
    assert again is first
    assert first.version > 0


WRITES: dict[str, Callable[[SessionStore], Any]] = {
    "append": lambda s: s.append("ns", "s", turn(9)),
    "replace": lambda s: s.replace("ns", "s", 2, assistant("cut")),
    "archive": lambda s: s.archive("ns", "s", [1, 2]),
    "set_meta summary": lambda s: s.set_meta("ns", "s", summary="new summary"),
    "set_meta meta": lambda s: s.set_meta("ns", "s", meta='{"k": 1}'),
    "record_offload": lambda s: s.record_offload("ns", "s", 2, "tool_results/a.txt"),
}


@pytest.mark.parametrize("write", list(WRITES))
async def test_a_write_through_another_store_is_seen_by_the_next_open(backend: Backend, write: str) -> None:
    clock = Clock()  # a clock that never moves: a version is no timestamp
    reader, writer = backend.open(clock=clock), backend.open(clock=clock)
    await writer.append("ns", "s", turn(1) + turn(2))
    before = await reader.open_session("ns", "s")
    assert await reader.open_session("ns", "s") is before
    await WRITES[write](writer)
    after = await reader.open_session("ns", "s")
    assert after.version != before.version
    fresh = await backend.open(clock=clock).open_session("ns", "s")  # a store that kept nothing
    assert after == fresh
    if write != "record_offload":  # the only write that leaves the loaded state as it was
        assert after != before


async def test_a_session_deleted_and_written_again_is_read_again(backend: Backend) -> None:
    clock = Clock()
    reader, writer = backend.open(clock=clock), backend.open(clock=clock)
    await writer.append("ns", "gone", turn(1))
    await writer.append("ns", "s", [user("first life")])
    before = await reader.open_session("ns", "s")
    await writer.delete_session("ns", "s")
    await writer.delete_session("ns", "gone")  # SQLite may give a new session the id of a deleted one
    await writer.append("ns", "s", [user("second life")])  # as many writes as the first life had
    after = await reader.open_session("ns", "s")
    assert [m.message for m in after.live] == [user("second life")]
    assert after.version != before.version


async def test_a_kept_state_is_never_handed_to_another_namespace(store: SessionStore) -> None:
    await store.append("alice", "s", [user("alice's secret")])
    await store.append("bob", "s", [user("bob's")])
    loads = count_loads(store)
    alice = await store.open_session("alice", "s")
    bob = await store.open_session("bob", "s")
    assert [m.message for m in bob.live] == [user("bob's")]
    assert (bob.namespace, alice.namespace) == ("bob", "alice")
    assert await store.open_session("alice", "s") is alice
    assert await store.open_session("bob", "s") is bob
    assert loads == [("alice", "s"), ("bob", "s")]


async def test_a_session_too_big_for_what_the_store_keeps_is_read_every_time(backend: Backend) -> None:
    store = backend.open()
    store.session_cache_bytes = 50_000  # type: ignore[attr-defined]
    await store.append("ns", "big", [tool_result("c1", "x" * 60_000)])
    await store.append("ns", "small", turn(1))
    loads = count_loads(store)
    for _ in range(2):
        assert len((await store.open_session("ns", "big")).live) == 1
        assert len((await store.open_session("ns", "small")).live) == 2
    assert loads == [("ns", "big"), ("ns", "small"), ("ns", "big")]


async def test_every_write_gives_a_new_version_never_given_before(store: SessionStore) -> None:
    await store.append("ns", "s", turn(1) + turn(2))
    await store.append("ns", "t", turn(1))
    seen = [(await store.open_session("ns", "s")).version, (await store.open_session("ns", "t")).version]
    for write in WRITES.values():
        await write(store)
        seen.append((await store.open_session("ns", "s")).version)
    assert len(set(seen)) == len(seen), seen
    assert (await store.open_session("ns", "s")).version == seen[-1]  # an open is no write
