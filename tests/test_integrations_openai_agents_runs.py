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
