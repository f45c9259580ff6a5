"""A LangChain v1 agent with ContextMemMiddleware: 60 turns in a 3,000-token window, no network.

python examples/langchain_middleware.py
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from contextmem import ContextMem, Settings, Workspace
from contextmem.integrations.langchain import ContextMemMiddleware
from contextmem.testing import InMemorySessionStore


class ScriptedChatModel(BaseChatModel):
    """Stands in for a real model: calls ``lookup`` for each question, then answers."""

    sent: list[int] = []  # noqa: RUF012 - pydantic field

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Any:
        self.sent.append(len(messages))
        n = len(self.sent)
        if isinstance(messages[-1], HumanMessage):
            reply = AIMessage(
                "", tool_calls=[{"id": f"call_{n}", "name": "lookup", "args": {"topic": "release"}}]
            )
        else:
            reply = AIMessage(f"Answer {n}: " + "ok " * 60)
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def lookup(topic: str) -> str:
    """Look up a topic in the release notes."""
    return f"{topic}: " + "a long line of release notes\n" * 20


async def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=workspace, context_window=3000, max_tokens=400)
        cm = ContextMem(
            settings, store=InMemorySessionStore(), workspace=Workspace(workspace), llm=None, memory=None
        )
        model = ScriptedChatModel(sent=[])
        middleware = ContextMemMiddleware(cm)
        agent = create_agent(
            model,
            [lookup],
            system_prompt="Answer from the release notes.",
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "demo"}}
        for turn in range(60):
            state = await agent.ainvoke({"messages": [HumanMessage(f"question {turn}")]}, config)
        engine = await middleware.engine("demo")
        print(f"turns run: 60; messages in graph state: {len(state['messages'])}")
        print(f"largest model input: {max(model.sent)} messages; last: {model.sent[-1]}")
        print(
            f"summary kept: {engine.summary is not None}; nothing lost: {(await engine.verify()).lost == 0}"
        )
        await middleware.aclose()  # after invoke (sync code): middleware.close_sync()


if __name__ == "__main__":
    asyncio.run(main())
