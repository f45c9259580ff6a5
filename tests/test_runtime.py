"""ContextMem: parts wired from settings; what leaves the context reaches daily memory and is searchable."""

import asyncio

import pytest

from contextmem.messages import AssistantMessage, UserMessage
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore, ScriptedLLM
from tests.pg import pg_dsn  # noqa: F401  (fixture)


async def open_runtime(tmp_path, **kw):
    settings = Settings(
        workspace=tmp_path / "ws",
        agent_max_context_turns=4,
        summary_max_tokens=300,
        context_window=20_000,
        **kw,
    )
    return await ContextMem.open(settings, llm=ScriptedLLM(default="not a summary"), embedder="hash:64")


async def test_left_context_is_written_to_daily_memory_and_found(tmp_path):
    runtime = await open_runtime(tmp_path)
    engine = await runtime.session("chat-1")
    await engine.add(
        UserMessage("My staging database lives at db-staging-7.internal:5432"), AssistantMessage("Noted.")
    )
    for i in range(6):
        await engine.add(UserMessage(f"unrelated question {i}"), AssistantMessage(f"answer {i}"))
    await engine.build("system")  # over 4 turns: the oldest half leaves the context
    await engine.wait_idle()
    await runtime.flush()
    daily = list((tmp_path / "ws" / "memory").glob("*.md"))
    assert daily and "db-staging-7.internal:5432" in daily[0].read_text()
    hits = runtime.memory.search("staging database host", k=3)
    assert any("db-staging-7.internal" in h.snippet for h in hits)
    assert (await engine.verify()).lost == 0
    await runtime.close()


async def test_sqlite_store_in_workspace_by_default_and_sessions_survive(tmp_path):
    runtime = await open_runtime(tmp_path)
    engine = await runtime.session("s")
    await engine.add(UserMessage("hello"), AssistantMessage("hi"))
    await runtime.close()
    assert (tmp_path / "ws" / "sessions.sqlite").exists()
    again = await open_runtime(tmp_path)
    engine = await again.session("s")
    assert [m.content for m in engine.history.messages] == ["hello", "hi"]
    await again.close()


async def test_idle_sessions_are_cleaned_up_by_the_job(tmp_path):
    now = [1_000_000.0]
    store = InMemorySessionStore(clock=lambda: now[0])
    settings = Settings(workspace=tmp_path / "ws", session_retention_days=30)
    runtime = await ContextMem.open(settings, llm=ScriptedLLM(), store=store, embedder="hash:64")
    old = await runtime.session("old")
    await old.add(UserMessage("x"))
    now[0] += 31 * 86400
    fresh = await runtime.session("fresh")
    await fresh.add(UserMessage("y"))
    store._clock = lambda: now[0]
    runtime.start_jobs()  # runs a cleanup at once, then hourly
    for _ in range(50):
        if [s.session_id for s in await store.list_sessions("default")] == ["fresh"]:
            break
        await asyncio.sleep(0.02)
    assert [s.session_id for s in await store.list_sessions("default")] == ["fresh"]
    await runtime.close()  # stops the jobs


async def test_postgres_url_puts_sessions_and_memory_in_postgres(tmp_path, pg_dsn):  # noqa: F811
    from contextmem.memory import PgMemoryIndex
    from contextmem.store.postgres import PostgresSessionStore

    settings = Settings(
        workspace=tmp_path / "ws", store=pg_dsn, agent_max_context_turns=2, context_window=20_000
    )
    runtime = await ContextMem.open(settings, llm=ScriptedLLM(default="not a summary"), embedder="hash:384")
    assert isinstance(runtime.store, PostgresSessionStore) and isinstance(runtime.memory, PgMemoryIndex)
    engine = await runtime.session("pg-chat")
    await engine.add(UserMessage("The release train leaves on 2026-12-03"), AssistantMessage("Noted."))
    for i in range(3):
        await engine.add(UserMessage(f"other {i}"), AssistantMessage(f"ok {i}"))
    await engine.build("system")
    await runtime.flush()
    hits = runtime.memory.search("release train date", k=3)
    assert any("2026-12-03" in h.snippet for h in hits)
    assert (await engine.verify()).lost == 0
    await runtime.close()


LOCAL = "local:qwen2.5-coder-1.5b-instruct-q4_k_m"  # the name a LocalLLM gives itself (and a wrapper keeps)


@pytest.mark.parametrize(
    ("model", "summary_local_model", "asked"),
    [
        (LOCAL, False, False),  # the default: the local model answers, the extractive summary is written
        (LOCAL, True, True),
        ("openai:gpt-4o-mini", False, True),  # hosted models always write summaries
        ("anthropic:claude-sonnet-4-5", False, True),
    ],
)
async def test_the_local_model_writes_summaries_only_with_summary_local_model(
    tmp_path, model, summary_local_model, asked
):
    llm = ScriptedLLM(default="not a summary", name=model)
    settings = Settings(
        workspace=tmp_path / "ws",
        agent_max_context_turns=4,
        summary_max_tokens=300,
        context_window=20_000,
        summary_local_model=summary_local_model,
    )
    runtime = await ContextMem.open(settings, llm=llm, embedder="hash:64")
    engine = await runtime.session("chat")
    assert (engine.summarizer is not None) is asked
    await engine.add(UserMessage("Deploy to db-staging-7.internal:5432"), AssistantMessage("Noted."))
    for i in range(6):
        await engine.add(UserMessage(f"question {i}"), AssistantMessage(f"answer {i}"))
    await engine.build("system")  # over 4 turns: the oldest leave, summarised
    await engine.wait_idle()
    assert engine.summary is not None and "db-staging-7.internal:5432" in engine.summary.render()
    assert bool(llm.requests) is asked
    daily = await runtime.summarize_text("We moved the replica to port 5433.")
    assert "5433" in daily
    assert bool(llm.requests) is asked
    await runtime.close()


async def test_runtimes_on_a_shared_store_leave_it_open_and_an_owner_closes_its_own(tmp_path):
    """``owns_store=False``: an adapter's runtimes share one store, and closing them leaves it open."""
    from contextmem.errors import StoreError
    from contextmem.store.open import open_store

    url = f"sqlite:///{tmp_path / 'sessions.sqlite'}"
    settings = Settings(workspace=tmp_path / "ws", model="none")
    store = open_store(url, settings)
    alice = await ContextMem.open(settings, store=store, memory=False, owns_store=False)
    bob = await ContextMem.open(
        settings.with_value("namespace", "bob"), store=store, memory=False, owns_store=False
    )
    await (await alice.session("s")).add(UserMessage("hello"))
    await alice.close()
    await bob.close()
    assert [i.session_id for i in await store.list_sessions("default")] == ["s"]  # still open
    assert alice.workspace.dir != bob.workspace.dir
    await store.close()

    owner = await ContextMem.open(settings, store=url, memory=False)
    await owner.close()
    with pytest.raises(StoreError, match="closed"):
        await owner.store.list_sessions("default")


class _DiscoveringLLM(ScriptedLLM):
    """An OpenAI-compatible server's adapter: asked for its window when nobody set one."""

    asked = 0

    async def discover_window(self) -> int | None:
        self.asked += 1
        return None


async def test_fitted_settings_are_not_fitted_again(tmp_path):
    llm = _DiscoveringLLM(default="ok")
    settings = Settings(workspace=tmp_path / "ws", store="")
    first = await ContextMem.open(settings, llm=llm, store=InMemorySessionStore(), memory=False)
    assert llm.asked == 1
    second = await ContextMem.open(
        first.settings, llm=llm, store=InMemorySessionStore(), memory=False, fitted=True
    )
    assert llm.asked == 1  # the server is asked once per adapter, not once per runtime
    assert second.settings == first.settings
    await first.close()
    await second.close()


async def test_close_closes_the_memory_index_the_runtime_opened(tmp_path):
    """The runtime opened the index, so it closes it: no adapter closes it on the side (before, the CLI
    and the MCP server each did, and a library user's index stayed open)."""
    import sqlite3

    runtime = await open_runtime(tmp_path)
    assert runtime.memory is not None
    assert runtime.memory.search("anything", k=1) == []
    await runtime.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        runtime.memory.search("anything", k=1)


async def test_daily_entries_land_in_the_order_of_their_events(tmp_path, monkeypatch):
    """Memory writes run off the loop so they never block a reply; on a pool of threads, two compactions
    close together could land in the daily file in either order (a replayed eval's figures moved by one
    answer between two runs of the same code). They run on one thread, in the order of their events."""
    import random
    import time

    from contextmem import runtime as runtime_module
    from contextmem.engine import EngineEvent

    real = runtime_module.append_daily

    def slow(*args, **kwargs):
        time.sleep(random.uniform(0, 0.003))  # the jitter a busy machine adds to each write
        return real(*args, **kwargs)

    monkeypatch.setattr(runtime_module, "append_daily", slow)
    runtime = await open_runtime(tmp_path)
    for n in range(40):
        runtime._remember(EngineEvent("compaction_finished", "default", "s", {"digest": f"entry number {n}"}))
    await runtime.flush()
    [daily] = (tmp_path / "ws" / "memory").glob("*.md")
    text = daily.read_text()
    assert [int(line.split()[-1]) for line in text.splitlines() if line.startswith("entry number")] == list(
        range(40)
    )
    await runtime.close()
