"""The reference agent loop: tool calling, step limit, overflow retry, task folding, first launch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextmem.agent import (
    Agent,
    FunctionTool,
    Toolbox,
    fit_settings,
    needs_onboarding,
    plan_fold_task,
    save_user_facts,
)
from contextmem.errors import CompactionError, ContextOverflowError
from contextmem.memory import HashEmbedder
from contextmem.messages import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    orphan_tool_messages,
    text_of,
)
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore, Reply, ScriptedLLM
from contextmem.workspace import Workspace


def call(i: int | str, name: str, **args: Any) -> ToolCall:
    return ToolCall(f"call_{i}", name, json.dumps(args))


async def open_agent(
    tmp_path: Path, llm: ScriptedLLM, *, tools: list[Any] | None = None, **settings: Any
) -> tuple[ContextMem, Agent]:
    base: dict[str, Any] = {"workspace": tmp_path, "context_window": 8000, "max_tokens": 500}
    runtime = await ContextMem.open(
        Settings(**{**base, **settings}),
        llm=ScriptedLLM(default="not a summary"),
        store=InMemorySessionStore(),
        embedder=HashEmbedder(),
    )
    agent = await Agent.open(runtime, "s1", llm=llm, tools=tools or [])
    return runtime, agent


async def test_a_tool_call_runs_and_the_reply_streams(tmp_path):
    seen: list[dict[str, Any]] = []

    def weather(city: str) -> str:
        seen.append({"city": city})
        return f"{city}: 21°C, sunny"

    tool = FunctionTool(
        "weather",
        "Current weather",
        weather,
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    llm = ScriptedLLM.of(
        Reply(tool_calls=(call(1, "weather", city="Paris"),)), "It is 21°C and sunny in Paris."
    )
    runtime, agent = await open_agent(tmp_path, llm, tools=[tool], fold_task_memory=False)
    events = [e async for e in agent.run("Weather in Paris?")]
    kinds = [e.kind for e in events]
    assert kinds[0] == "tool_call" and kinds[1] == "tool_result" and kinds[-1] == "done"
    assert "".join(e.text for e in events if e.kind == "text") == "It is 21°C and sunny in Paris."
    assert seen == [{"city": "Paris"}]
    # The model saw the memory tools and the user tool, and the tool result on its second call.
    assert {t.name for t in llm.request_tools[0]} == {
        "memory_search",
        "memory_get",
        "memory_write",
        "read_file",
        "weather",
    }
    assert isinstance(llm.requests[1][-1], ToolMessage) and "21°C" in str(llm.requests[1][-1].content)
    kinds_in_history = [m.kind for m in agent.engine.history.messages]
    assert kinds_in_history == ["user", "assistant", "tool", "assistant"]
    await runtime.close()


async def test_tool_errors_go_back_to_the_model(tmp_path):
    def broken() -> str:
        raise RuntimeError("disk on fire")

    llm = ScriptedLLM.of(
        Reply(tool_calls=(call(1, "broken"), call(2, "nope"), ToolCall("call_3", "broken", "{bad json"))),
        "Sorry, the tool failed.",
    )
    runtime, agent = await open_agent(
        tmp_path, llm, tools=[FunctionTool("broken", "", broken)], fold_task_memory=False
    )
    await agent.ask("go")
    results = [str(m.content) for m in llm.requests[1] if isinstance(m, ToolMessage)]
    assert "disk on fire" in results[0] and "unknown tool 'nope'" in results[1] and "JSON" in results[2]
    await runtime.close()


async def test_at_most_max_steps_and_the_last_step_offers_no_tools(tmp_path):
    looping = Reply(text="checking", tool_calls=(call("x", "memory_search", query="x"),))
    counter = iter(range(100))

    def step(_msgs: Any) -> Reply:
        n = next(counter)
        return Reply(text="checking", tool_calls=(call(n, "memory_search", query="x"),))

    llm = ScriptedLLM(default=step)
    runtime, agent = await open_agent(tmp_path, llm, agent_max_steps=3)
    result = await agent.ask("loop forever")
    assert len(llm.requests) == 3 and result.steps == 3
    assert llm.request_tools[-1] == [] and llm.request_tools[0] != []
    assert result.reply == looping.text
    assert orphan_tool_messages(agent.engine.history.messages) == []
    await runtime.close()


async def test_a_provider_overflow_is_handled_and_retried(tmp_path):
    overflow = ContextOverflowError("This model's maximum context length is 8000 tokens", provider="openai")
    llm = ScriptedLLM.of(overflow, "fine now")
    runtime, agent = await open_agent(tmp_path, llm)
    filler = "the quick brown fox jumps over the lazy dog " * 60
    for i in range(8):
        await agent.engine.add(
            UserMessage(f"question {i}: {filler}"), AssistantMessage(f"answer {i}: {filler}")
        )
    result = await agent.ask("and now?")
    assert result.reply == "fine now" and len(llm.requests) == 2
    sizes = [sum(len(text_of(m.content)) for m in request) for request in llm.requests]
    assert sizes[1] < sizes[0]  # the retry was shrunk by the emergency stage
    assert (await agent.engine.verify()).lost == 0
    await runtime.close()


async def test_overflow_retries_are_bounded(tmp_path):
    overflow = ContextOverflowError("context_length_exceeded", provider="openai")
    llm = ScriptedLLM(default=overflow)
    runtime, agent = await open_agent(tmp_path, llm)
    agent.max_overflow_retries = 2
    with pytest.raises(CompactionError, match=r"still reports an overflow .* after every emergency stage"):
        await agent.ask("hello")
    assert 1 <= len(llm.requests) <= 3
    await runtime.close()


async def test_task_steps_fold_to_the_outcome_and_stay_archived(tmp_path):
    llm = ScriptedLLM.of(
        Reply(tool_calls=(call(1, "memory_write", text="Deploys happen on Tuesdays", target="core"),)),
        Reply(tool_calls=(call(2, "memory_search", query="deploy day"),)),
        "Noted: deploys happen on Tuesdays.",
    )
    runtime, agent = await open_agent(tmp_path, llm)  # fold_task_memory defaults to True
    result = await agent.ask("Remember that deploys happen on Tuesdays")
    assert len(result.task.steps) == 2 and result.task.folded == 4
    assert [t.name for t in result.task.tool_calls] == ["memory_write", "memory_search"]
    assert [m.kind for m in agent.engine.history.messages] == ["user", "assistant"]
    report = await agent.engine.verify()
    assert report.lost == 0 and report.archived == 4
    archived = list(agent.engine.archive.read("s1"))
    assert {a.reason for a in archived} == {"fold_task"}
    assert "Tuesdays" in (tmp_path / "MEMORY.md").read_text()
    await runtime.close()


def test_fold_plan_keeps_unfinished_turns_and_whole_pairs():
    c = call(1, "t")
    done = [
        UserMessage("q"),
        AssistantMessage(None, tool_calls=(c,)),
        ToolMessage(c.id, "r"),
        AssistantMessage("a"),
    ]
    plan = plan_fold_task(done)
    assert plan.drop == (1, 2) and plan.keep == (0, 3)
    assert plan_fold_task(done[:3]).empty  # still running
    assert plan_fold_task([UserMessage("q"), AssistantMessage("a")]).empty  # no steps


def test_first_launch_facts_are_saved(tmp_path):
    ws = Workspace(tmp_path)
    assert needs_onboarding(ws)
    assert save_user_facts(ws, {"name": " ", "goals": ""}) is None and needs_onboarding(ws)
    path = save_user_facts(ws, {"name": "Mei", "preferences": "short answers", "goals": "ship v2"})
    assert path == ws.user_file and not needs_onboarding(ws)
    assert "- Name: Mei" in path.read_text() and "- Goals: ship v2" in path.read_text()


async def test_user_facts_reach_the_system_prompt(tmp_path):
    save_user_facts(Workspace(tmp_path), {"name": "Mei"})
    llm = ScriptedLLM.of("hi Mei")
    runtime, agent = await open_agent(tmp_path, llm)
    await agent.ask("hi")
    assert "Mei" in str(llm.requests[0][0].content) and llm.requests[0][0].kind == "system"
    await runtime.close()


def test_settings_fit_a_local_model_unless_set():
    class Local:
        name = "local:x"
        context_window = 4096
        max_tokens = 512

    fitted = fit_settings(Settings(), Local())  # type: ignore[arg-type]
    assert fitted.context_window == 4096 and fitted.max_tokens == 512
    # The summary 35% of the window, the chunk what a call holding 1.5 summaries leaves.
    assert (fitted.summary_max_tokens, fitted.summary_chunk_tokens) == (1433, 4096 - 3 * 1433 // 2 - 400)
    assert fitted.sources["context_window"].startswith("fitted")
    mine = fit_settings(Settings.load(env={}, context_window=3000), Local())  # type: ignore[arg-type]
    assert mine.context_window == 3000
    assert fit_settings(Settings(), Toolbox()) == Settings()  # type: ignore[arg-type]


# --- a save the model claims but never made (issue 31, item 8) ---------------------------------------


@pytest.mark.parametrize(
    ("claim", "note"),
    [
        ("I've saved BLUEHERON to your long-term memory.", "(not saved: no memory_write call was made)"),
        ("好的，我已经将“我的猫叫小白”记在了长期记忆中。", "（未保存：本轮没有调用 memory_write）"),
    ],
)
async def test_a_claimed_save_without_a_memory_write_is_marked_not_saved(
    tmp_path: Path, claim: str, note: str
) -> None:
    runtime, agent = await open_agent(tmp_path, ScriptedLLM.of(claim))
    events = [e async for e in agent.run("Remember that my code word is BLUEHERON.")]
    shown = "".join(e.text for e in events if e.kind == "text")
    assert shown == f"{claim}\n\n{note}"
    assert events[-1].result is not None and events[-1].result.reply == shown
    assert agent.engine.history.messages[-1] == AssistantMessage(shown)  # the model reads it too
    assert "BLUEHERON" not in "".join(p.read_text() for p in tmp_path.rglob("*.md"))
    await runtime.close()


async def test_a_save_that_was_made_or_no_claim_at_all_is_left_alone(tmp_path: Path) -> None:
    write = call(1, "memory_write", text="My code word is BLUEHERON.")
    llm = ScriptedLLM.of(
        Reply(tool_calls=(write,)),
        "I've saved BLUEHERON to your long-term memory.",
        "I found it in memory: your code word is BLUEHERON.",
    )
    runtime, agent = await open_agent(tmp_path, llm)
    saved = await agent.ask("Remember that my code word is BLUEHERON.")
    recalled = await agent.ask("What is my code word?")
    assert saved.reply == "I've saved BLUEHERON to your long-term memory."
    assert recalled.reply == "I found it in memory: your code word is BLUEHERON."
    assert "BLUEHERON" in "".join(p.read_text() for p in tmp_path.rglob("*.md"))
    await runtime.close()
