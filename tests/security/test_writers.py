"""Many writers on one session never wedge it (issue 30), on SQLite and real PostgreSQL.

Two engines stand for two processes (or two hosts: each has its own workspace, so its own disk). What
must hold: a compaction never archives another writer's open tool call; an append never lands against a
tail that was archived meanwhile; a stored history with a broken pair is repaired, not fatal; a crashed
writer's open call is closed once its lease runs out; a shared store is the archive every host reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextmem.budget import Window
from contextmem.engine import ContextEngine
from contextmem.engine.writer import LEASE_TEXT
from contextmem.errors import HistoryError, ToolCallExpiredError
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, orphan_tool_messages
from contextmem.store.base import SessionStore
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
        with pytest.raises(ToolCallExpiredError, match=r"'a1'.*Fix: raise tool_call_lease_seconds"):
            await a.add(ToolMessage("a1", "the result, too late"))
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
        await engine.add(
            UserMessage("read it"), AssistantMessage(None, tool_calls=(ToolCall("r1", "cat", "{}"),))
        )
        await engine.add(ToolMessage("r1", full), AssistantMessage("read"))
        await engine.add(UserMessage("next"), AssistantMessage("ok"))
        await engine.build("system")
        cut = next(m for m in engine.history.messages if isinstance(m, ToolMessage))
        path = next(w for w in str(cut.content).split() if w.startswith("tool_results/"))
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
