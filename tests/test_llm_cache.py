"""Prompt caching end to end: the session's cache key, and cached tokens in the engine's totals.

The agent keys its model calls to the session (OpenAI's ``prompt_cache_key``); summaries go unkeyed. The
cached tokens a provider reports reach the session's totals, the ``usage`` event, ``/context`` and the
calibration, through the real SDKs against the local fake servers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from pathlib import Path

import pytest

from contextmem.agent import Agent
from contextmem.budget import RequestEstimate
from contextmem.cli.render import context_report
from contextmem.engine import EngineEvent
from contextmem.engine.inspect import context_stats
from contextmem.engine.session import LiveSession
from contextmem.engine.types import UsageTotals
from contextmem.llm.anthropic_api import AnthropicLLM
from contextmem.llm.base import LLM, Usage
from contextmem.llm.cache import cache_key, current_cache_key, keyed, session_cache_key
from contextmem.llm.openai_compat import OpenAICompatLLM
from contextmem.memory import HashEmbedder
from contextmem.messages import ToolCall
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore, ScriptedLLM
from contextmem.tokens import MessageCounter, get_counter
from contextmem.tokens.counter import REPLY_PRIMING

from .engine_helpers import GOOD_SUMMARY
from .servers import FakeAnthropicServer, FakeOpenAIServer, ServerReply


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key="sk-test") as s:
        yield s


async def open_agent(tmp_path: Path, llm: LLM, *, summaries: LLM, system_prompt: str = "") -> Agent:
    settings = Settings(workspace=tmp_path, context_window=8000, max_tokens=500)
    runtime = await ContextMem.open(
        settings, llm=summaries, store=InMemorySessionStore(), embedder=HashEmbedder()
    )
    return await Agent.open(runtime, "s1", llm=llm, system_prompt=system_prompt)


def context_report_of(live: LiveSession) -> str:
    return context_report(context_stats(live, RequestEstimate(0, 0, 0, 0, 100, 1000)))


async def test_keyed_sets_the_key_while_a_step_runs_and_never_across_a_yield() -> None:
    seen: list[str | None] = []
    closed: list[bool] = []

    async def model() -> AsyncGenerator[int, None]:
        try:
            for i in range(3):
                seen.append(current_cache_key())
                yield i
        finally:
            closed.append(True)

    async def background() -> str | None:
        return current_cache_key()

    between: list[str | None] = []
    async with aclosing(keyed("k", model())) as events:
        async for _ in events:
            between.append(current_cache_key())
            between.append(await asyncio.create_task(background()))  # e.g. a summary scheduled meanwhile
            break

    assert seen == ["k"] and between == [None, None] and closed == [True]  # closing it closed the model
    with cache_key("outer"):
        with cache_key(None):
            assert current_cache_key() is None
        assert current_cache_key() == "outer"
    assert current_cache_key() is None
    assert session_cache_key("ns", "s1") != session_cache_key("ns", "s2")
    assert len(session_cache_key("ns", "s1")) == 32 and "s1" not in session_cache_key("ns", "s1")


async def test_agent_calls_carry_the_session_key_summaries_do_not_and_cached_tokens_add_up(
    tmp_path: Path, openai_server: FakeOpenAIServer
) -> None:
    llm = OpenAICompatLLM("gpt-test", base_url=openai_server.base_url, api_key="sk-test", send_cache_key=True)
    agent = await open_agent(tmp_path, llm, summaries=llm)
    events: list[EngineEvent] = []
    agent.engine.subscribe(events.append)
    call = ToolCall("call_1", "memory_search", '{"query": "deploy day"}')
    openai_server.push(
        ServerReply(tool_calls=(call,), usage=Usage(1000, 10, 0)),
        ServerReply("Tuesdays.", usage=Usage(1200, 5, 1000)),
        ServerReply("Still Tuesdays.", usage=Usage(1400, 5, 1100)),
        ServerReply(GOOD_SUMMARY),
    )

    await agent.ask("When do we deploy?")
    await agent.ask("Sure?")
    await agent.engine.compact()

    key = session_cache_key(agent.engine.namespace, "s1")
    *turns, summary = (r.body for r in openai_server.requests)
    assert [b.get("prompt_cache_key") for b in turns] == [key, key, key]
    assert "prompt_cache_key" not in summary
    usage = agent.engine.stats().usage
    assert (usage.calls, usage.prompt_tokens, usage.cached_tokens) == (3, 3600, 2100)
    assert usage.cache_ratio == pytest.approx(2100 / 3600)
    # beside them, what the engine expected: each request after the first extended the one before
    assert 0 < usage.expected_cached_tokens < usage.sent_tokens
    data = [dict(e.data) for e in events if e.kind == "usage"]
    expected = round(usage.expected_cache_ratio, 4)
    assert data[-1] == {
        "prompt": 1400,
        "cached": 1100,
        "ratio": round(2100 / 3600, 4),
        "expected_ratio": expected,
        "calls": 3,
    }
    assert len(data) == 3
    report = context_report(agent.engine.stats())
    assert (
        "cache: 58% of prompt tokens read from the provider's cache (2,100 of 3,600, 3 calls); "
        f"{100 * expected:.0f}% of each request was the previous one unchanged"
    ) in report


async def test_usage_totals_are_kept_with_the_session_metadata() -> None:
    store = InMemorySessionStore()
    counter = MessageCounter(get_counter("heuristic"))
    live = LiveSession(store, "ns", "s1", counter)
    await live.load()
    assert "cache:" not in context_report_of(live)
    live.usage = UsageTotals(4, 5000, 3000, 4900, 3500)
    await store.set_meta("ns", "s1", meta=live.meta())

    reopened = LiveSession(store, "ns", "s1", counter)
    await reopened.load()
    assert reopened.usage == UsageTotals(4, 5000, 3000, 4900, 3500)
    # counted since the last write: a reload keeps them
    reopened.usage = UsageTotals(6, 7000, 4000, 6800, 4100)
    await reopened.load()
    assert reopened.usage == UsageTotals(6, 7000, 4000, 6800, 4100)


async def test_anthropic_cache_reads_and_writes_count_in_the_calibrated_prompt(tmp_path: Path) -> None:
    """Anthropic bills input, cache reads and cache writes apart; the prompt the model saw is their sum,
    which is what the estimate is calibrated against (C2) and what the totals count."""
    with FakeAnthropicServer(api_key="sk-ant-test") as server:
        llm = AnthropicLLM("claude-test", base_url=server.base_url, api_key="sk-ant-test")
        facts = "The deploy window is Tuesday 10:00 to 12:00 UTC; rollbacks need two approvals. " * 60
        agent = await open_agent(tmp_path, llm, summaries=ScriptedLLM(), system_prompt=facts)
        # Wire: input_tokens 100, cache_read 1500, cache_creation 600.
        server.push(ServerReply("Tuesday.", usage=Usage(2200, 5, 1500), cache_write_tokens=600))

        result = await agent.ask("When is the deploy window?")

    body = server.requests[0].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}  # big enough to be cached
    estimated = result.requests[0].estimate.prompt + REPLY_PRIMING
    assert 0.5 < 2200 / estimated < 2.0  # within the clamp, so the ratio below is the observed one
    assert agent.engine.calibration.ratio == pytest.approx(2200 / estimated)
    assert _billed(agent.engine.stats().usage) == (1, 2200, 1500)


def _billed(usage: UsageTotals) -> tuple[int, int, int]:
    """The provider's side of the usage totals: calls, prompt tokens, cached tokens."""
    return usage.calls, usage.prompt_tokens, usage.cached_tokens
