"""The Agents SDK session: the SDK's own ``Session`` protocol, and 200 turns through ``Runner``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

pytest.importorskip("agents")
pytest.importorskip("numpy")

from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.memory import Session
from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from contextmem import (
    ArchiveError,
    ContextMem,
    Settings,
    SystemMessage,
    UserMessage,
    Workspace,
    orphan_tool_messages,
)
from contextmem.integrations.openai_agents import (
    ContextMemSession,
    agent_tool_specs,
    items_to_messages,
    messages_to_items,
)
from contextmem.testing import InMemorySessionStore, ScriptedLLM
from contextmem.tokens.counter import REPLY_PRIMING

from .engine_helpers import GOOD_SUMMARY, small_settings
from .security.doors import assert_one_line_error, hostile_text


def _runtime(tmp: Path, **settings: Any) -> ContextMem:
    config: Settings = small_settings(workspace=tmp, **settings)
    return ContextMem(
        config,
        store=InMemorySessionStore(),
        workspace=Workspace(tmp),
        llm=ScriptedLLM(default=GOOD_SUMMARY),
        memory=None,
    )


# A turn as the Runner stores it: user input, a function call with its output, the final reply.
TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Need the weather tool."}],
        "encrypted_content": "opaque-signature",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21 C"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It is sunny in Paris.", "annotations": []}],
    },
]


async def test_session_satisfies_the_sdk_protocol(tmp_path: Path) -> None:
    session = ContextMemSession(_runtime(tmp_path), "contract")
    assert isinstance(session, Session)
    assert session.session_id == "contract" and session.session_settings is None

    assert await session.get_items() == []
    assert await session.pop_item() is None

    await session.add_items(TURN[:1])
    await session.add_items(TURN[1:3])  # the Runner saves a tool call before its output exists
    await session.add_items(TURN[3:])
    assert await session.get_items() == TURN  # verbatim: ids, reasoning signature, statuses
    assert await session.get_items(limit=2) == TURN[-2:]
    assert await session.get_items(limit=100) == TURN
    assert await session.get_items(limit=0) == []

    # pop_item: the newest item, removed, the rest kept in order
    assert await session.pop_item() == TURN[-1]
    assert await session.get_items() == TURN[:-1]
    assert await session.pop_item() == TURN[-2]
    assert await session.pop_item() == TURN[-3]  # the call goes; the reasoning of its group stays
    assert await session.get_items() == TURN[:2]
    # popped items are archived, never lost
    engine = await session.engine()
    assert (await engine.verify()).lost == 0

    # a fresh session object over the same store sees the same history
    again = ContextMemSession(session.runtime, "contract")
    assert await again.get_items() == TURN[:2]

    await session.clear_session()
    assert await session.get_items() == []
    assert await again.get_items() == TURN[:2]  # a stale object keeps its loaded state until reloaded
    assert await ContextMemSession(session.runtime, "contract").get_items() == []


def test_items_map_to_messages_with_tool_pairs_intact() -> None:
    messages = items_to_messages(TURN)
    assert [m.kind for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1]
    assert call.kind == "assistant" and call.reasoning == "Need the weather tool."
    assert [c.id for c in call.tool_calls] == ["call_1"]
    assert orphan_tool_messages(messages) == []
    assert messages_to_items(messages) == TURN
    # a message the engine rewrote is rebuilt from its fields (here, a cut tool result)
    cut = messages[2].__class__("call_1", "sunny [cut]", extra=messages[2].extra)
    assert messages_to_items([cut]) == [
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny [cut]"}
    ]
    assert messages_to_items([SystemMessage("summary")]) == [{"role": "developer", "content": "summary"}]
    assert messages_to_items([UserMessage("hi")]) == [{"role": "user", "content": "hi"}]


class ScriptedAgentModel(Model):
    """An Agents SDK model: calls ``lookup`` once per turn, then answers; records every input."""

    def __init__(self) -> None:
        self.inputs: list[tuple[str | None, list[dict[str, Any]]]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else [dict(i) for i in input]
        self.inputs.append((system_instructions, items))
        n = len(self.inputs)
        last = items[-1]
        if last.get("role") == "user":
            turn = text = str(last["content"]).split()[1]
            output: Any = ResponseFunctionToolCall(
                type="function_call",
                id=f"fc_{n}",
                call_id=f"call_{n}",
                name="lookup",
                arguments=json.dumps({"ticket": turn}),
                status="completed",
            )
        else:
            text = f"Ticket {n} is resolved; notes: " + "details " * 40
            output = ResponseOutputMessage(
                type="message",
                id=f"msg_{n}",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this scripted model does not stream")


@function_tool
def lookup(ticket: str) -> str:
    """Look up a support ticket."""
    return f"ticket {ticket}: " + "log line with several words in it\n" * 30


async def test_200_turns_through_runner_stay_within_budget(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, context_window=4000, max_tokens=500, agent_max_context_turns=100)
    model = ScriptedAgentModel()
    agent = Agent(name="support", instructions="You resolve support tickets.", model=model, tools=[lookup])
    session = ContextMemSession(
        runtime, "runner", system_prompt=str(agent.instructions), tools=agent_tool_specs(agent)
    )
    for turn in range(200):
        result = await Runner.run(
            agent,
            f"ticket {turn} needs attention",
            session=session,
            run_config=RunConfig(tracing_disabled=True),
        )
        assert "resolved" in str(result.final_output)

    engine = await session.engine()
    await engine.wait_idle()
    window = engine.window
    tools = agent_tool_specs(agent)
    assert len(model.inputs) == 400
    summaries = 0
    prompts: list[int] = []
    for instructions, items in model.inputs:
        messages = items_to_messages(items)
        head = [
            m for m in messages if isinstance(m, UserMessage) and m.extra["agents_items"][0]["role"] != "user"
        ]
        summaries += bool(head)
        body = [m for m in messages if m not in head]
        assert orphan_tool_messages(body) == []
        prompt = (
            sum(engine.counter.count_messages([SystemMessage(instructions or ""), *messages]))
            + engine.counter.count_tools(tools)
            + REPLY_PRIMING
        )
        assert prompt + window.max_tokens <= window.context_window, prompt
        prompts.append(prompt)
    assert summaries > 100  # the summary was sent as a developer item once history had left the context
    assert "Goal" in str(model.inputs[-1][1][0]["content"])
    report = await engine.verify()
    assert report.appended == 800 and report.lost == 0 and report.archived > 700


async def test_pop_removes_nothing_when_the_archive_cannot_take_it(tmp_path: Path) -> None:
    session = ContextMemSession(_runtime(tmp_path), "pop")
    await session.add_items(TURN)
    (tmp_path / "dialog").write_text("in the way")  # a real failure: the archive directory cannot exist
    with pytest.raises(ArchiveError, match="nothing was removed"):
        await session.pop_item()
    assert await session.get_items() == TURN
    (tmp_path / "dialog").unlink()
    assert await session.pop_item() == TURN[-1]
    assert (await (await session.engine()).verify()).lost == 0


async def test_pop_takes_the_newest_item_another_writer_added(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path)
    mine, theirs = ContextMemSession(runtime, "shared"), ContextMemSession(runtime, "shared")
    await mine.add_items(TURN[:1])
    await theirs.add_items(TURN[1:])  # another engine on the same store: mine has not seen these
    assert await mine.pop_item() == TURN[-1]
    assert await ContextMemSession(runtime, "shared").get_items() == TURN[:-1]


@pytest.mark.parametrize("injection", ["system", "first_user"])
async def test_the_summary_goes_where_the_engine_put_it(tmp_path: Path, injection: str) -> None:
    session = ContextMemSession(_runtime(tmp_path, summary_injection=injection), "summary")
    for turn in range(3):  # each turn's call has its own id (a reused one is refused); the last is TURN's
        steps = [{**i, "call_id": f"call_1_{turn}"} if "call_id" in i else i for i in TURN[1:]]
        await session.add_items(
            [{"role": "user", "content": f"question {turn}"}, *(TURN[1:] if turn == 2 else steps)]
        )
    engine = await session.engine()
    await engine.compact()
    assert engine.summary is not None
    summary = engine.summary.render()
    items = await session.get_items()
    assert items[-4:] == TURN[1:]  # the newest turn, verbatim; the older two left the context
    if injection == "system":  # the summary alone, as a developer item; the instructions are the agent's
        assert items[:-4] == [
            {"role": "developer", "content": summary},
            {"role": "user", "content": "question 2"},
        ]
    else:  # already in the first user message: no developer item
        assert items[:-4] == [{"role": "user", "content": f"{summary}\n\nquestion 2"}]


# --- the door of the session's call_model_input_filter ------------------------------------------------------


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_text())
async def test_an_item_the_filter_takes_is_sent_and_stored_once_exactly_or_refused_in_one_line(
    tmp_path: Path, text: str
) -> None:
    """A streamed run's input reaches the engine through the filter before the SDK stores it: hostile
    text is sent and stored exactly (once: the SDK's later ``add_items`` of it adds nothing), or the
    filter refuses it with one typed line."""
    session = ContextMemSession(_runtime(tmp_path, context_window=8000, max_tokens=500), "door")
    item = {"role": "user", "content": text}
    agent: Agent[Any] = Agent(name="door", instructions="Answer.")
    await session.get_items()  # the run starts
    data = CallModelData(
        model_data=ModelInputData(input=[item], instructions="Answer."), agent=agent, context=None
    )
    try:
        sent = await session.model_input_filter(data)
    except Exception as exc:
        assert_one_line_error(exc)
        return
    assert sent.input == [item] and sent.instructions == "Answer."
    await session.add_items([item])  # the SDK stores the input after the first call of a streamed run
    engine = await session.engine()
    assert [m.content for m in engine.history.messages] == [text]
    assert (await engine.verify()).appended == 1
