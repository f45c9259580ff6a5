"""The LangChain v1 middleware: a scripted 200-turn agent with tool calls, fitted by contextmem; and a real
``create_agent`` with ``ChatOpenAI`` over HTTP through both paths, ``invoke`` and ``ainvoke``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langgraph")
pytest.importorskip("numpy")

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from contextmem import ContextMem, ToolCall, ToolSpec, Workspace, open_store, orphan_tool_messages
from contextmem.integrations.langchain import ContextMemMiddleware, from_langchain, to_langchain
from contextmem.testing import InMemorySessionStore, ScriptedLLM
from contextmem.tokens.counter import REPLY_PRIMING

from .engine_helpers import GOOD_SUMMARY, small_settings
from .servers import FakeOpenAIServer, ServerReply


class ScriptedChatModel(BaseChatModel):
    """Calls ``lookup`` after each human message, answers after each tool result; records every call."""

    calls: list[list[BaseMessage]] = []  # noqa: RUF012 - pydantic field, one list per instance

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        n = len(self.calls)
        last = messages[-1]
        if isinstance(last, HumanMessage):
            ticket = str(last.content).split()[1]
            reply = AIMessage(
                "", tool_calls=[{"id": f"call_{n}", "name": "lookup", "args": {"ticket": ticket}}]
            )
        else:
            reply = AIMessage(f"Ticket resolved (call {n}); notes: " + "details " * 40)
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def lookup(ticket: str) -> str:
    """Look up a support ticket."""
    return f"ticket {ticket}: " + "log line with several words in it\n" * 30


def _agent(tmp: Path, model: Any, **settings: Any) -> tuple[Any, ContextMemMiddleware]:
    """A support agent with the middleware over a fresh in-memory runtime; summaries are scripted."""
    runtime = ContextMem(
        small_settings(workspace=tmp, **settings),
        store=InMemorySessionStore(),
        workspace=Workspace(tmp),
        llm=ScriptedLLM(default=GOOD_SUMMARY),
        memory=None,
    )
    middleware = ContextMemMiddleware(runtime)
    agent = create_agent(
        model,
        [lookup],
        system_prompt="You resolve support tickets.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    return agent, middleware


def test_messages_convert_with_tool_pairs_and_ids() -> None:
    lc = [
        HumanMessage("hi", id="h1"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "lookup", "args": {"ticket": "7"}}], id="a1"),
        ToolMessage("open", tool_call_id="c1", id="t1"),
        AIMessage("done", id="a2"),
    ]
    ours = from_langchain(lc)
    assert [m.kind for m in ours] == ["user", "assistant", "tool", "assistant"]
    assert orphan_tool_messages(ours) == []
    back = to_langchain(ours)
    assert [m.id for m in back] == ["h1", "a1", "t1", "a2"]
    assert isinstance(back[1], AIMessage) and back[1].tool_calls[0]["args"] == {"ticket": "7"}
    assert isinstance(back[2], ToolMessage) and back[2].tool_call_id == "c1"


async def test_200_turn_agent_stays_within_budget_with_summary(tmp_path: Path) -> None:
    model = ScriptedChatModel(calls=[])
    agent, middleware = _agent(
        tmp_path, model, context_window=4000, max_tokens=500, agent_max_context_turns=100
    )
    config = {"configurable": {"thread_id": "support-1"}}
    for turn in range(200):
        state = await agent.ainvoke({"messages": [HumanMessage(f"ticket {turn} needs attention")]}, config)
        assert "Ticket resolved" in str(state["messages"][-1].content)
    assert len(state["messages"]) == 800  # the graph keeps its full log; the model saw the fitted one

    engine = await middleware.engine("support-1")
    await engine.wait_idle()
    window = engine.window
    fn = convert_to_openai_tool(lookup)["function"]
    tool_tokens = engine.counter.count_tools([ToolSpec(fn["name"], fn["description"], fn["parameters"])])
    assert tool_tokens > 0
    assert len(model.calls) == 400
    with_summary = 0
    for sent in model.calls:
        assert sent[0].type == "system" and str(sent[0].content).startswith("You resolve support tickets.")
        with_summary += "## Goal" in str(sent[0].content)
        messages = from_langchain(sent)
        assert orphan_tool_messages(messages[1:]) == []
        assert isinstance(sent[-1], HumanMessage | ToolMessage)  # the newest input is always sent
        prompt = sum(engine.counter.count_messages(messages)) + tool_tokens + REPLY_PRIMING
        assert prompt + window.max_tokens <= window.context_window, prompt
    assert with_summary > 300
    assert len(model.calls[-1]) < 60  # far fewer than the 800 messages in the graph state
    report = await engine.verify()
    assert report.appended == 800 and report.lost == 0 and report.archived > 700  # the last reply too


# --- a real create_agent with ChatOpenAI over HTTP, through invoke and ainvoke ---------------------------


def _http_agent(tmp: Path, server: Any) -> tuple[Any, ContextMemMiddleware]:
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI
    model = chat_openai(model="gpt-test", base_url=server.base_url, api_key="sk-test", max_retries=0)
    return _agent(tmp, model, context_window=2500, max_tokens=300, compact_message_threshold=8)


HTTP_TURNS = 8


def _http_script() -> list[ServerReply]:
    replies = []
    for turn in range(HTTP_TURNS):
        call = ToolCall(f"call_{turn}", "lookup", json.dumps({"ticket": str(turn)}))
        replies += [ServerReply(tool_calls=(call,)), ServerReply(f"Ticket {turn} resolved. " + "notes " * 40)]
    return replies


def _check_requests(server: Any, states: list[dict[str, Any]]) -> None:
    """The server saw every call fitted: the system prompt first (with the summary once history left),
    tool calls with their results (the server refuses orphans), far fewer messages than the graph holds."""
    assert len(server.requests) == 2 * HTTP_TURNS
    for turn, state in enumerate(states):
        assert f"Ticket {turn} resolved" in str(state["messages"][-1].content)
    assert len(states[-1]["messages"]) == 4 * HTTP_TURNS
    sent = [r.body["messages"] for r in server.requests]
    assert all(m[0]["role"] == "system" and m[0]["content"].startswith("You resolve") for m in sent)
    assert "## Goal" in sent[-1][0]["content"]
    assert len(sent[-1]) < 4 * HTTP_TURNS - 8
    assert sent[-2][-1]["content"] == f"ticket {HTTP_TURNS - 1} needs attention"


def _verify(middleware: ContextMemMiddleware) -> None:
    """Nothing lost, read back from the store by a fresh engine on a loop of its own."""

    async def report() -> Any:
        engine = await middleware.runtime.session("support-http")
        return await engine.verify()

    result = asyncio.run(report())
    assert result.lost == 0 and result.archived > 0


def _invoke_all(agent: Any) -> list[dict[str, Any]]:
    config = {"configurable": {"thread_id": "support-http"}}
    return [
        agent.invoke({"messages": [HumanMessage(f"ticket {turn} needs attention")]}, config)
        for turn in range(HTTP_TURNS)
    ]


def test_invoke_without_a_running_loop(tmp_path: Path) -> None:
    with FakeOpenAIServer(_http_script()) as server:
        agent, middleware = _http_agent(tmp_path, server)
        states = _invoke_all(agent)
    _check_requests(server, states)
    _verify(middleware)


async def test_invoke_inside_a_running_loop(tmp_path: Path) -> None:
    # A sync call from a coroutine blocks this loop; the engine runs on the middleware's own loop.
    with FakeOpenAIServer(_http_script()) as server:
        agent, _ = _http_agent(tmp_path, server)
        states = _invoke_all(agent)
    _check_requests(server, states)


async def test_ainvoke(tmp_path: Path) -> None:
    with FakeOpenAIServer(_http_script()) as server:
        agent, middleware = _http_agent(tmp_path, server)
        config = {"configurable": {"thread_id": "support-http"}}
        states = [
            await agent.ainvoke({"messages": [HumanMessage(f"ticket {turn} needs attention")]}, config)
            for turn in range(HTTP_TURNS)
        ]
    _check_requests(server, states)
    engine = await middleware.engine("support-http")
    assert (await engine.verify()).lost == 0


# --- sync code: the run's last reply is stored when it ends, and shutting down needs no asyncio.run -------


def _sqlite_agent(tmp: Path, server: Any) -> tuple[Any, ContextMemMiddleware]:
    """The HTTP agent over a SQLite file, with daily memory written as history leaves the context."""
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI
    model = chat_openai(model="gpt-test", base_url=server.base_url, api_key="sk-test", max_retries=0)
    settings = small_settings(workspace=tmp, context_window=2500, max_tokens=300, compact_message_threshold=8)
    runtime = ContextMem(
        settings,
        store=open_store(settings.store_url, settings),
        workspace=Workspace(tmp),
        llm=ScriptedLLM(default=GOOD_SUMMARY),
        memory=None,
    )
    middleware = ContextMemMiddleware(runtime)
    agent = create_agent(
        model, [lookup], system_prompt="You resolve support tickets.", middleware=[middleware]
    )
    return agent, middleware


def _stored(tmp: Path) -> Any:
    """What a fresh runtime on the same files reads back (after the first one closed)."""

    async def report() -> Any:
        runtime = await ContextMem.open(small_settings(workspace=tmp), llm="none", memory=False)
        try:
            return await (await runtime.session("support-http")).verify()
        finally:
            await runtime.close()

    return asyncio.run(report())


def _invoke_thread(agent: Any) -> dict[str, Any]:
    """HTTP_TURNS sync runs on one thread, the caller keeping the state (no checkpointer)."""
    config = {"configurable": {"thread_id": "support-http"}}
    state: dict[str, Any] = {"messages": []}
    for turn in range(HTTP_TURNS):
        state = agent.invoke({"messages": [*state["messages"], HumanMessage(f"ticket {turn}")]}, config)
    return state


def test_after_sync_invoke_close_sync_stores_every_message(tmp_path: Path) -> None:
    """Issue 31, item 7: the newest reply was stored only at the next call (verify counted 59 of 60), and
    sync code had no documented way to shut down."""
    with FakeOpenAIServer(_http_script()) as server:
        agent, middleware = _sqlite_agent(tmp_path, server)
        state = _invoke_thread(agent)
        middleware.close_sync()
    assert len(state["messages"]) == 4 * HTTP_TURNS
    assert list((tmp_path / "memory").glob("*.md")), "no daily memory was written: the test lost its point"
    report = _stored(tmp_path)
    assert report.appended == 4 * HTTP_TURNS and report.lost == 0 and report.archived > 0


def test_after_sync_invoke_asyncio_run_of_the_runtime_close_works(tmp_path: Path) -> None:
    """``asyncio.run(mem.close())`` failed with "Future attached to a different loop": the memory writes
    and the store belong to the loop the sync path runs on, and close now does its work there."""
    with FakeOpenAIServer(_http_script()) as server:
        agent, middleware = _sqlite_agent(tmp_path, server)
        _invoke_thread(agent)
        asyncio.run(middleware.runtime.close())
    assert _stored(tmp_path).appended == 4 * HTTP_TURNS


async def test_after_ainvoke_aclose_stores_every_message(tmp_path: Path) -> None:
    with FakeOpenAIServer(_http_script()) as server:
        agent, middleware = _sqlite_agent(tmp_path, server)
        config = {"configurable": {"thread_id": "support-http"}}
        state: dict[str, Any] = {"messages": []}
        for turn in range(HTTP_TURNS):
            state = await agent.ainvoke(
                {"messages": [*state["messages"], HumanMessage(f"ticket {turn}")]}, config
            )
        await middleware.aclose()
    report = await asyncio.to_thread(_stored, tmp_path)
    assert report.appended == len(state["messages"]) == 4 * HTTP_TURNS
