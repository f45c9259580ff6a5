"""An OpenAI Agents SDK agent whose session is contextmem: 60 turns, a 3,000-token window, no network.

python examples/openai_agents_session.py
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from contextmem import ContextMem, Settings, Workspace
from contextmem.integrations.openai_agents import ContextMemSession, agent_tool_specs
from contextmem.testing import InMemorySessionStore


class ScriptedModel(Model):
    """Stands in for a real model: calls ``lookup`` for each question, then answers."""

    def __init__(self) -> None:
        self.input_sizes: list[int] = []

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any, **kw: Any) -> Any:
        self.input_sizes.append(len(input))
        last, n = input[-1], len(self.input_sizes)
        if last.get("role") == "user":
            out: Any = ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{n}", name="lookup", arguments='{"topic": "release"}'
            )
        else:
            text = ResponseOutputText(type="output_text", text=f"Answer {n}: " + "ok " * 60, annotations=[])
            out = ResponseOutputMessage(
                type="message", id=f"msg_{n}", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
def lookup(topic: str) -> str:
    """Look up a topic in the release notes."""
    return f"{topic}: " + "a long line of release notes\n" * 20


async def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=workspace, context_window=3000, max_tokens=400)
        cm = ContextMem(
            settings, store=InMemorySessionStore(), workspace=Workspace(workspace), llm=None, memory=None
        )
        model = ScriptedModel()
        agent = Agent(
            name="helper", instructions="Answer from the release notes.", model=model, tools=[lookup]
        )
        session = ContextMemSession(
            cm, "demo", system_prompt="Answer from the release notes.", tools=agent_tool_specs(agent)
        )
        for turn in range(60):
            await Runner.run(
                agent,
                f"question {turn}",
                session=session,
                run_config=session.run_config(tracing_disabled=True),
            )
        engine = await session.engine()
        stats = engine.stats("Answer from the release notes.")
        items = await session.get_items()
        calls, largest = len(model.input_sizes), max(model.input_sizes)
        print(f"turns run: 60; model calls: {calls}; largest input: {largest} items")
        next_request = await engine.build("Answer from the release notes.", agent_tool_specs(agent))
        prompt = next_request.estimate.prompt  # what the next call would send: fitted to the window
        print(f"live messages: {stats.messages}; archived: {stats.archived}; prompt tokens: {prompt}")
        summary_first, lost = items[0]["role"] == "developer", (await engine.verify()).lost
        print(f"summary sent first: {summary_first}; nothing lost: {lost == 0}")


if __name__ == "__main__":
    asyncio.run(main())
