"""Many writers on one session never wedge it (issue 30), on SQLite and real PostgreSQL.

Two engines stand for two processes (or two hosts: each has its own workspace, so its own disk). What
must hold: a compaction never archives another writer's open tool call; an append never lands against a
tail that was archived meanwhile; a stored history with a broken pair is repaired, not fatal; a crashed
writer's open call is closed once its lease runs out; a shared store is the archive every host reads.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as settings_
from hypothesis import strategies as st

from contextmem.budget import Window
from contextmem.engine import ContextEngine
from contextmem.engine.writer import LEASE_TEXT
from contextmem.errors import HistoryError, ToolCallExpiredError
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, orphan_tool_messages
from contextmem.store.base import SessionStore
from tests.security.doors import hostile_text
from tests.security.test_concurrency import SESSION, open_store, settings

NS = "default"


async def engine_on(store: SessionStore, root: Path, *, window: int = 30_000, **kw: object) -> ContextEngine:
    """An engine on its own disk (``root``) when the store is shared by hosts; on SQLite, one machine's
    store, engines share the machine's workspace (the parent of ``root``)."""
    where = root if store.shared else root.parent / "workspace"
    return await ContextEngine.open(
        SESSION, store=store, settings=settings(where).model_copy(update=kw), window=Window(window, 200)
    )


async def stored(store: SessionStore) -> list[object]:
    return [s.message for s in await store.messages(NS, SESSION)]


async def test_a_compaction_keeps_another_writers_open_call(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    try:
        a = await engine_on(store, tmp_path / "a")
        b = await engine_on(store, tmp_path / "b", window=900)  # b's window forces emergencies
        for i in range(6):
            await a.add(UserMessage(f"question {i} " * 30), AssistantMessage(f"answer {i} " * 30))
        call = ToolCall("a-call", "shell", "{}")
        await a.add(UserMessage("run it"), AssistantMessage(None, tool_calls=(call,)))
        await b._load()
        request = await b.build("system")  # over budget: b compacts while a's tool still runs
        assert orphan_tool_messages([m for m in request.messages if m.kind != "system"]) == []
        assert call.id not in str(request.messages)  # the open call waits for its result, unsent
        live = [s.message for s in await store.messages(NS, SESSION, state="live")]
        assert AssistantMessage(None, tool_calls=(call,)) in live  # never archived
        await a.add(ToolMessage("a-call", "done"), AssistantMessage("a finished"))  # lands, no orphan
        await b.add(UserMessage("b goes on"))
        assert orphan_tool_messages(await stored(store)) == []  # type: ignore[arg-type]
        assert (await a.verify()).lost == 0 and (await b.verify()).lost == 0
    finally:
        await store.close()


async def test_an_append_never_lands_on_a_tail_archived_meanwhile(store_url: str, tmp_path: Path) -> None:
    """A compactor that archived the call without moving next_seq (what every archive does) must make the
    caller's results conflict, not land as orphans that wedge the session."""
    store = open_store(store_url)
    try:
        a = await engine_on(store, tmp_path / "a")
        await a.add(UserMessage("q"), AssistantMessage(None, tool_calls=(ToolCall("c1", "x", "{}"),)))
        state = await store.open_session(NS, SESSION)
        await store.archive(NS, SESSION, [s.seq for s in state.live])  # behind a's back, next_seq unmoved
        with pytest.raises(HistoryError):
            await a.add(ToolMessage("c1", "late result"))
        live = [s.message for s in await store.messages(NS, SESSION, state="live")]
        assert live == []  # nothing landed
        b = await engine_on(store, tmp_path / "b")
        await b.add(UserMessage("the session is not wedged"))
        await a.add(UserMessage("nor for a"))
        live = [s.message for s in await store.messages(NS, SESSION, state="live")]
        assert live == [UserMessage("the session is not wedged"), UserMessage("nor for a")]
    finally:
        await store.close()


async def test_a_broken_stored_history_is_repaired_not_fatal(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    try:
        await store.append(NS, SESSION, [UserMessage("q"), AssistantMessage("a")])
        await store.append(
            NS, SESSION, [ToolMessage("ghost", "a result with no call")]
        )  # bypasses the engine
        a = await engine_on(store, tmp_path / "a")
        events: list[str] = []
        a.subscribe(lambda e: events.append(e.kind))
        await a.add(UserMessage("next"))  # a second engine, already open, repairs on its reload
        assert "ghost" not in str(a.history.messages)
        live = [s.message for s in await store.messages(NS, SESSION, state="live")]
        assert ToolMessage("ghost", "a result with no call") not in live
        assert orphan_tool_messages(live) == []
        assert (await a.verify()).lost == 0  # the broken result left through the archive
    finally:
        await store.close()


async def test_repair_runs_when_an_engine_opens_a_broken_session(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    try:
        call = AssistantMessage(None, tool_calls=(ToolCall("lost", "x", "{}"),))
        await store.append(NS, SESSION, [UserMessage("q"), call, UserMessage("after the call")])
        a = await engine_on(store, tmp_path / "a")
        assert list(a.history.messages) == [UserMessage("q"), UserMessage("after the call")]
        await a.add(AssistantMessage("fine"))
        assert (await a.verify()).lost == 0
    finally:
        await store.close()


async def test_a_crashed_writers_call_is_closed_when_its_lease_runs_out(
    store_url: str, tmp_path: Path
) -> None:
    store = open_store(store_url)
    try:
        a = await engine_on(store, tmp_path / "a")
        b = await engine_on(store, tmp_path / "b", tool_call_lease_seconds=0.5)  # open before a's call
        call = ToolCall("a1", "shell", "{}")
        await a.add(UserMessage("a asks"), AssistantMessage(None, tool_calls=(call,)))  # then a "dies"
        b.busy_timeout = 20.0
        events: list[dict[str, object]] = []
        b.subscribe(lambda e: events.append({"kind": e.kind, **e.data}))
        await b.add(UserMessage("b asks"))  # waits for the lease, closes a's call, then appends
        messages = await stored(store)
        closing = messages[2]
        assert isinstance(closing, ToolMessage) and closing.tool_call_id == "a1"
        assert str(closing.content).startswith(LEASE_TEXT[:40]) and "0.5 s" in str(closing.content)
        assert messages[3] == UserMessage("b asks") and orphan_tool_messages(messages) == []  # type: ignore[arg-type]
        assert {"kind": "lease_expired", "calls": ["a1"]} in events
        marks = [s.lease_closure for s in await store.messages(NS, SESSION)]
        assert marks == [False, False, True, False]  # the closure is marked by data, in the store
        with pytest.raises(ToolCallExpiredError, match=r"'a1'.*Fix: raise tool_call_lease_seconds"):
            await a.add(ToolMessage("a1", "the result, too late"))
        restarted = await engine_on(store, tmp_path / "c")  # the mark survives a restart
        with pytest.raises(ToolCallExpiredError, match=r"'a1'"):
            await restarted.add(ToolMessage("a1", "the result, later still"))
    finally:
        await store.close()


async def test_an_open_call_within_its_lease_is_not_closed(store_url: str, tmp_path: Path) -> None:
    """The lease oracle: with a long lease the other writer still gets SessionBusyError and nothing closes."""
    from contextmem.errors import SessionBusyError

    store = open_store(store_url)
    try:
        a = await engine_on(store, tmp_path / "a")
        await a.add(UserMessage("a asks"), AssistantMessage(None, tool_calls=(ToolCall("a1", "x", "{}"),)))
        b = await engine_on(store, tmp_path / "b", tool_call_lease_seconds=3600)
        b.busy_timeout = 0.3
        with pytest.raises(SessionBusyError):
            await b.add(UserMessage("b asks"))
        assert len(await stored(store)) == 2
    finally:
        await store.close()


async def test_an_offloaded_result_reads_the_same_from_every_host(store_url: str, tmp_path: Path) -> None:
    """read_file of a tool_results/ path answers from the store when the file is not on this host's disk:
    another host offloaded it (PostgreSQL), or the local file is gone (SQLite)."""
    from contextmem import ContextMem
    from contextmem.memory import HashEmbedder, MemoryTools, SqliteMemoryIndex
    from contextmem.workspace import Workspace

    store = open_store(store_url)

    def host(name: str) -> ContextMem:
        root = tmp_path / name if store.shared else tmp_path / "workspace"
        workspace = Workspace(root, "default")
        workspace.ensure()
        index = SqliteMemoryIndex(workspace, HashEmbedder())
        return ContextMem(settings(root), store=store, workspace=workspace, llm=None, memory=index)

    try:
        h1, h2 = host("h1"), host("h2")
        engine = await h1.session(SESSION)
        full = "".join(f"row {i}: 数据 {i * 7}\n" for i in range(3000))
        path = await offload_one(engine, "r1", full)
        if not store.shared:
            (tmp_path / "workspace" / path).unlink()  # the local copy expired: the store still has it
        else:
            assert not (tmp_path / "h1" / path).exists()  # a shared store writes no local file at all
        read = await h2.tools.acall("read_file", {"path": path, "offset": 2, "limit": 2})
        assert read.splitlines()[1:] == ["row 1: 数据 7", "row 2: 数据 14"], read
        other = await h2.session(SESSION)
        assert (await other.verify()).lost == 0 and (await engine.verify()).lost == 0
        # The oracle: without the store's copy the same read is a not-found error.
        bare = MemoryTools(h2.tools.index)
        assert (await bare.acall("read_file", {"path": path})).startswith("error: ")
    finally:
        await store.close()


async def offload_one(engine: ContextEngine, call_id: str, text: str) -> str:
    """Add a call and a result long enough to be offloaded by the next ``build``; the offload's path, as
    the request shows it."""
    await engine.add(
        UserMessage("read it"), AssistantMessage(None, tool_calls=(ToolCall(call_id, "cat", "{}"),))
    )
    await engine.add(ToolMessage(call_id, text), AssistantMessage("read"))
    await engine.add(UserMessage("next"), AssistantMessage("ok"))
    await engine.build("system")
    cut = next(m for m in engine.history.messages if isinstance(m, ToolMessage))
    return next(w for w in str(cut.content).split() if w.startswith("tool_results/"))


async def test_the_readme_loops_sync_tool_call_reads_an_offload_the_store_holds(
    store_url: str, tmp_path: Path
) -> None:
    """Issue 49 item 8: the README's own loop calls the sync ``mem.tools.call`` inside ``async def``, on the
    store's own event loop. A read_file of an offloaded result whose local file is gone (SQLite: expired;
    PostgreSQL: never on this host) gives the same lines as ``acall``, never "does not exist"."""
    from contextmem import ContextMem
    from contextmem.memory import HashEmbedder, SqliteMemoryIndex
    from contextmem.workspace import Workspace

    store = open_store(store_url)
    root = tmp_path / "workspace"
    workspace = Workspace(root, "default")
    workspace.ensure()
    mem = ContextMem(
        settings(root),
        store=store,
        workspace=workspace,
        llm=None,
        memory=SqliteMemoryIndex(workspace, HashEmbedder()),
    )
    try:
        engine = await mem.session(SESSION)
        full = "".join(f"line {i}: 値 {i * 3}\n" for i in range(3000))
        path = await offload_one(engine, "d1", full)
        (root / path).unlink(missing_ok=True)  # the local copy expired (a shared store wrote none)
        arguments = json.dumps({"path": path, "offset": 3, "limit": 2})  # as a model sends them: JSON text
        result = mem.tools.call("read_file", arguments)  # sync, on the running loop: the README's shape
        assert result.splitlines()[1:] == ["line 2: 値 6", "line 3: 値 9"], result
        assert result == await mem.tools.acall("read_file", arguments)
        assert mem.tools.call("read_file", '{"path": "tool_results/none.txt"}').startswith(
            "error: 'tool_results/none.txt' does not exist"
        )  # a path the store never recorded is still not found
    finally:
        await mem.close()


@pytest.mark.parametrize("tail", ["", " (the tool's own words after it)"])
async def test_a_result_that_reads_like_a_closure_is_a_normal_result(
    store_url: str, tmp_path: Path, tail: str
) -> None:
    """Issue 49 item 9: a tool's genuine result whose text is (or starts with) the closure text is stored
    and sent as it is; a second result for its call is a plain HistoryError, not ToolCallExpiredError."""
    store = open_store(store_url)
    try:
        a = await engine_on(store, tmp_path / "a", tool_call_lease_seconds=0.5)
        text = LEASE_TEXT.format(seconds=0.5) + tail
        await a.add(UserMessage("q"), AssistantMessage(None, tool_calls=(ToolCall("g1", "probe", "{}"),)))
        await a.add(ToolMessage("g1", text, name="probe"))
        stored_rows = await store.messages(NS, SESSION)
        assert stored_rows[2].message == ToolMessage("g1", text, name="probe")
        assert [s.lease_closure for s in stored_rows] == [False, False, False]
        request = await a.build("system")
        assert ToolMessage("g1", text, name="probe") in request.messages  # sent as the tool said it
        b = await engine_on(store, tmp_path / "b", tool_call_lease_seconds=0.5)  # another writer, fresh
        for engine in (a, b):
            with pytest.raises(HistoryError) as raised:
                await engine.add(ToolMessage("g1", "a second answer"))
            assert not isinstance(raised.value, ToolCallExpiredError), raised.value
    finally:
        await store.close()


async def test_closures_stored_by_the_old_code_are_marked_by_the_migration(
    store_url: str, tmp_path: Path
) -> None:
    """Old data (schema 3) has no mark: migration 4 marks a tool result whose whole text is the old
    closure text, and nothing else: a result that only starts with it, or a user quoting it, stays a
    normal message. The engine then treats each accordingly."""
    from contextmem.store.codec import encode_message

    closure = LEASE_TEXT.format(seconds=120)
    call = lambda i: AssistantMessage(None, tool_calls=(ToolCall(i, "x", "{}"),))  # noqa: E731
    rows = [
        UserMessage(closure),  # a person quoting it
        call("old1"),
        ToolMessage("old1", closure, name="x"),  # the old writer's closure
        call("g1"),
        ToolMessage("g1", closure + " and then the tool went on"),  # a genuine result
        call("old2"),
        ToolMessage("old2", LEASE_TEXT.format(seconds=1e-05), name="x"),  # another closure
    ]
    encoded = [encode_message(m) for m in rows]
    if store_url.startswith("sqlite:///"):
        import sqlite3

        from contextmem.store.sqlite_schema import migrate as migrate_sqlite

        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        assert migrate_sqlite(conn, upto=3) == 3
        conn.execute("INSERT INTO cm_sessions VALUES (1, ?, ?, NULL, NULL, ?, 1.0, 1.0)", (NS, SESSION, 8))
        conn.executemany(
            "INSERT INTO cm_messages (session, seq, original, created_at) VALUES (1, ?, ?, 1.0)",
            list(enumerate(encoded, 1)),
        )
        conn.close()
    else:
        import psycopg

        from contextmem.store.postgres import migrate as migrate_pg

        async with await psycopg.AsyncConnection.connect(store_url, autocommit=True) as pg:
            assert await migrate_pg(pg, upto=3) == 3
            cur = await pg.execute(
                "INSERT INTO cm_sessions (namespace, session_id, next_seq, created_at, updated_at) "
                "VALUES (%s, %s, 8, 1.0, 1.0) RETURNING id",
                (NS, SESSION),
            )
            pk = (await cur.fetchone() or [0])[0]
            for seq, text in enumerate(encoded, 1):
                await pg.execute(
                    "INSERT INTO cm_messages (session, seq, original, created_at) VALUES (%s, %s, %s, 1.0)",
                    (pk, seq, text),
                )
    store = open_store(store_url)
    try:
        stored_rows = await store.messages(NS, SESSION)  # opening migrates to the newest schema
        assert [s.message for s in stored_rows] == rows
        assert [s.seq for s in stored_rows if s.lease_closure] == [3, 7]
        a = await engine_on(store, tmp_path / "a")
        with pytest.raises(ToolCallExpiredError, match=r"'old1'"):
            await a.add(ToolMessage("old1", "too late"))
        with pytest.raises(HistoryError) as raised:
            await a.add(ToolMessage("g1", "again"))
        assert not isinstance(raised.value, ToolCallExpiredError)
    finally:
        await store.close()


# Pinned at 25 in every profile: each example opens a store and an engine and appends a call and its result.
@settings_(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_text(), closure_first=st.booleans())
def test_any_tool_result_is_stored_exactly_and_never_a_closure(
    store_url: str, tmp_path: Path, text: str, closure_first: bool
) -> None:
    """The tool-result door (issue 49 item 9): any text, also one that begins with the closure text, added
    after its call is stored exactly (or refused with one typed line: a lone surrogate), is unmarked, and a
    second answer to its call is a plain HistoryError, never ToolCallExpiredError."""
    from contextmem.errors import MessageFormatError
    from tests.security.doors import assert_one_line_error

    body = LEASE_TEXT.format(seconds=0.5) + text if closure_first else text
    session = f"p-{uuid.uuid4().hex}"

    async def run() -> None:
        store = open_store(store_url)
        try:
            engine = await ContextEngine.open(
                session,
                store=store,
                settings=settings(tmp_path / "ws").model_copy(update={"tool_call_lease_seconds": 0.5}),
                window=Window(30_000, 200),
            )
            await engine.add(
                UserMessage("q"), AssistantMessage(None, tool_calls=(ToolCall("t1", "f", "{}"),))
            )
            try:
                await engine.add(ToolMessage("t1", body))
            except MessageFormatError as exc:  # only text UTF-8 cannot encode is refused
                assert_one_line_error(exc)
                assert any("\ud800" <= ch <= "\udfff" for ch in body)
                return
            rows = await store.messages(NS, session)
            assert rows[2].message == ToolMessage("t1", body) and not rows[2].lease_closure
            with pytest.raises(HistoryError) as raised:
                await engine.add(ToolMessage("t1", "again"))
            assert not isinstance(raised.value, ToolCallExpiredError)
        finally:
            await store.close()

    asyncio.run(run())
