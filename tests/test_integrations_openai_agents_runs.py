"""The Agents SDK session under a real ``Runner`` over HTTP, while background summaries run.

The agent's model is the SDK's own ``OpenAIChatCompletionsModel`` on a real ``AsyncOpenAI`` client talking
to a local server (:mod:`tests.servers`). The summariser waits on a gate the test opens, so a summary
finishes exactly where the test says: in the middle of a run. The session's contract (module docstring
of :mod:`contextmem.integrations.openai_agents`): ``get_items`` changes only at the first call after a
turn ended; ``pop_item`` never waits for a summary.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("numpy")

import openai
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from openai import AsyncOpenAI

from contextmem import ContextMem, Message, ToolCall, Workspace
from contextmem.integrations.openai_agents import ContextMemSession, agent_tool_specs
from contextmem.testing import InMemorySessionStore, ScriptedLLM

from .engine_helpers import GOOD_SUMMARY, correcting, small_settings
from .servers import FakeOpenAIServer, ServerReply

TURNS = 10  # enough for three summaries to finish mid-run (the model corrects a growing draft)


class GatedSummaries:
    """A summariser's script entry that waits until the test opens the gate; ``started`` says one waits."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.calls = 0

    async def __call__(self, messages: list[Message]) -> str:
        self.started.set()
        await self.gate.wait()
        self.calls += 1
        return correcting(GOOD_SUMMARY.replace("Work is under way.", f"Summary {self.calls} is done."))(
            messages
        )

    async def finish(self, session: ContextMemSession) -> None:
        """Let the waiting round finish (it is then held by the session) and close the gate again."""
        self.started.clear()
        self.gate.set()
        await (await session.engine()).wait_idle()
        self.gate.clear()


def _runtime(tmp: Path, summaries: GatedSummaries) -> ContextMem:
    settings = small_settings(
        workspace=tmp,
        context_window=6000,
        max_tokens=500,
        compact_message_threshold=6,  # a summary is due from the third turn on
        summary_timeout_seconds=600.0,  # the gate, not a timeout, decides when a summary finishes
    )
    llm = ScriptedLLM(default=summaries)
    return ContextMem(settings, store=InMemorySessionStore(), workspace=Workspace(tmp), llm=llm, memory=None)


class SpySession(ContextMemSession):
    """Records every ``get_items`` and checks the contract between them.

    ``expected`` is the last result plus the items added since; a read that is not the first after a
    turn ended must equal it. After each add that does not end a turn the spy reads again, as a caller
    checking the session mid-run does — and after the turn's first add it first lets a waiting summary
    finish, so the summary is ready mid-run.
    """

    def __init__(self, *args: Any, summaries: GatedSummaries, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.summaries = summaries
        self.expected: list[Any] = []
        self.turn_ended = True
        self.starts: list[list[Any]] = []  # the reads at a turn start (the defined point)
        self.mid_run_reads = 0
        self.finished_mid_run = 0

    async def get_items(self, limit: int | None = None) -> list[Any]:
        assert limit is None
        items = await super().get_items()
        if self.turn_ended:
            self.starts.append(items)
        else:
            assert items == self.expected, "get_items changed between two reads of one turn"
            self.mid_run_reads += 1
        self.turn_ended = False
        self.expected = list(items)
        return items

    async def add_items(self, items: list[Any]) -> None:
        await super().add_items(items)
        self.expected.extend(items)
        last = items[-1]
        if last.get("role") == "assistant" and last.get("type", "message") == "message":
            self.turn_ended = True
            return
        if last.get("role") == "user" and self.summaries.started.is_set():
            await self.summaries.finish(self)
            self.finished_mid_run += 1
        await self.get_items()


@function_tool
def lookup(ticket: str) -> str:
    """Look up a support ticket."""
    return f"ticket {ticket}: " + "log line with several words in it\n" * 12


def _script() -> list[ServerReply]:
    replies = []
    for turn in range(TURNS):
        call = ToolCall(f"call_{turn}", "lookup", json.dumps({"ticket": str(turn)}))
        replies.append(ServerReply(tool_calls=(call,)))
        replies.append(ServerReply(f"Ticket {turn} is resolved; notes: " + "details " * 30))
    return replies


def _is_summary(item: dict[str, Any]) -> bool:
    return item.get("role") == "developer"


async def test_ten_runs_never_see_get_items_change_under_them(tmp_path: Path) -> None:
    summaries = GatedSummaries()
    runtime = _runtime(tmp_path, summaries)
    with FakeOpenAIServer(_script()) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
        agent = Agent(name="support", instructions="You resolve tickets.", model=model, tools=[lookup])
        session = SpySession(
            runtime,
            "runs",
            system_prompt=str(agent.instructions),
            tools=agent_tool_specs(agent),
            summaries=summaries,
        )
        for turn in range(TURNS):
            result = await Runner.run(
                agent,
                f"ticket {turn} needs attention",
                session=session,
                run_config=RunConfig(tracing_disabled=True),
            )
            assert f"Ticket {turn} is resolved" in str(result.final_output)
        await client.close()

    assert len(server.requests) == 2 * TURNS
    assert len(session.starts) == TURNS  # the SDK reads once per run, at its start
    assert session.mid_run_reads == 2 * TURNS  # and every read of ours mid-run saw nothing move
    assert session.finished_mid_run >= 3  # summaries did finish mid-run, and waited for the next run
    applied = [
        i
        for i in range(1, TURNS)
        if [x for x in session.starts[i] if _is_summary(x)]
        != [x for x in session.starts[i - 1] if _is_summary(x)]
    ]
    assert len(applied) >= 3  # each a new summary, taking effect at the start of a run
    for items in session.starts[1:]:
        live = [x for x in items if not _is_summary(x)]
        assert live and live[0].get("role") == "user"  # a summary never leaves the session without messages
        assert len(live) >= 4  # at least the previous turn, whole: its question, call, output and reply
    # what the model received at each run's start is what get_items said then, after the instructions
    for turn, items in enumerate(session.starts):
        sent = server.requests[2 * turn].body["messages"]
        assert sent[0] == {"role": "system", "content": "You resolve tickets."}
        assert len(sent) == 1 + len(items) + 1  # instructions, the history, the new question
        assert sent[-1]["content"] == f"ticket {turn} needs attention"
    engine = await session.engine()
    report = await engine.verify()
    assert report.appended == 4 * TURNS and report.lost == 0 and report.archived > 0


async def test_pop_item_is_immediate_while_a_summary_runs(tmp_path: Path) -> None:
    summaries = GatedSummaries()
    session = ContextMemSession(_runtime(tmp_path, summaries), "pop")

    def turn(n: int) -> list[dict[str, Any]]:  # each turn's call has its own id: a reused one is refused
        return [
            {"role": "user", "content": f"question {n}"},
            {"type": "function_call", "call_id": f"c{n}", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{n}", "output": "out"},
            {"role": "assistant", "content": "a"},
        ]

    for n in range(3):
        await session.add_items(turn(n))
    await summaries.started.wait()  # a round is running: its model call waits on the gate
    before = await session.get_items()

    # The gate stays shut: a pop that waited for the round would never return (the guard only stops a
    # hung test; the contract is that it does not wait at all).
    popped = await asyncio.wait_for(session.pop_item(), timeout=60)
    assert popped == turn(2)[-1] and summaries.calls == 0
    assert await session.get_items() == before[:-1]

    # The round folded the first two turns, not the popped reply: it is held, then applied at a turn start.
    await summaries.finish(session)
    await session.add_items([{"role": "assistant", "content": "again"}])
    items = await session.get_items()
    assert _is_summary(items[0]) and "## Goal" in items[0]["content"]
    assert items[1:] == [
        *turn(2)[:3],
        {"role": "assistant", "content": "again"},
    ]
    engine = await session.engine()
    assert (await engine.verify()).lost == 0


async def test_a_summary_that_folded_a_popped_message_is_discarded(tmp_path: Path) -> None:
    summaries = GatedSummaries()
    session = ContextMemSession(_runtime(tmp_path, summaries), "undo")
    for n in range(3):
        await session.add_items(
            [{"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": "a"}]
        )
    await session.add_items(
        [{"role": "user", "content": "question 3"}, {"role": "assistant", "content": "a"}]
    )
    await summaries.started.wait()  # folding the older turns
    for _ in range(6):  # undo back into what the round is folding
        assert await asyncio.wait_for(session.pop_item(), timeout=60) is not None
    await summaries.finish(session)
    items = await session.get_items()  # a turn start: the held round is applied, or discarded
    assert items == [{"role": "user", "content": "question 0"}, {"role": "assistant", "content": "a"}]
    assert (await session.engine()).summary is None  # the undone messages were never summarised


# --- every model call of a run fits: the session's call_model_input_filter -------------------------------

LOG_LINES = 2400  # about 150 KB of tool output: some 44,000 tokens, five times the window


@function_tool
def fetch_log(job: str) -> str:
    """Fetch the whole log of a build job."""
    lines = [f"{job} step {i}: compiled module {i} of {LOG_LINES} without warnings" for i in range(LOG_LINES)]
    lines[LOG_LINES // 2] = f"{job} step {LOG_LINES // 2}: ERROR linker ran out of memory (exit 137)"
    return "\n".join(lines)


def _log_run(tmp_path: Path) -> tuple[ContextMemSession, Agent[Any], FakeOpenAIServer, AsyncOpenAI]:
    settings = small_settings(workspace=tmp_path, context_window=8000, max_tokens=500)
    runtime = ContextMem(
        settings, store=InMemorySessionStore(), workspace=Workspace(tmp_path), llm=None, memory=None
    )
    call = ToolCall("call_log", "fetch_log", json.dumps({"job": "nightly"}))
    server = FakeOpenAIServer(
        [ServerReply(tool_calls=(call,)), ServerReply("The nightly build ran out of memory.")]
    )
    server.context_window = 8000
    server.start()
    client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
    agent = Agent(name="builds", instructions="You read build logs.", model=model, tools=[fetch_log])
    return ContextMemSession(runtime, "builds", system_prompt="You read build logs."), agent, server, client


async def test_without_the_filter_the_provider_refuses_the_call_after_the_tool(tmp_path: Path) -> None:
    """The oracle of the test below: the fake provider does refuse a call over the window, and the SDK
    sends the run's tool output whole when the session's filter is not in the run config."""
    session, agent, server, client = _log_run(tmp_path)
    try:
        with pytest.raises(openai.BadRequestError, match="maximum context length is 8000 tokens"):
            await Runner.run(
                agent, "why did it fail?", session=session, run_config=RunConfig(tracing_disabled=True)
            )
    finally:
        await client.close()
        server.stop()
    assert len(server.requests) == 2 and len(json.dumps(server.requests[1].body)) > 140_000


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_a_large_tool_output_is_cut_at_the_next_call_of_the_same_run(
    tmp_path: Path, streamed: bool
) -> None:
    """Window 8,000 tokens; a tool returns 140 KB. The provider (which refuses a request over the window,
    as OpenAI does) gets every call of the run within it: the output is cut at the next call of the same
    run, its whole text readable in ``tool_results/``; the session stores each item once."""
    session, agent, server, client = _log_run(tmp_path)
    try:
        config = session.run_config(tracing_disabled=True)
        question = "why did the nightly build fail?"
        if streamed:
            streaming = Runner.run_streamed(agent, question, session=session, run_config=config)
            async for _ in streaming.stream_events():
                pass
            output = streaming.final_output
        else:
            output = (await Runner.run(agent, question, session=session, run_config=config)).final_output
    finally:
        await client.close()
        server.stop()

    assert output == "The nightly build ran out of memory."  # no call was refused as over the window
    assert len(server.requests) == 2
    sent = server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]  # the call kept its result
    cut = sent[-1]["content"]
    assert len(cut) < 20_000 and "tool_results/" in cut
    (offloaded,) = (tmp_path / "tool_results").iterdir()
    text = offloaded.read_text(encoding="utf-8")
    assert "ERROR linker ran out of memory" in text and len(text) > 140_000  # nothing of it is lost
    report = await (await session.engine()).verify()
    assert report.appended == 4 and report.lost == 0  # question, call, output, reply: each stored once
