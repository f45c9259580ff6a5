"""LangChain v1 / LangGraph: an agent middleware that sends the model contextmem's fitted context.

::

    cm = await ContextMem.open(settings)
    agent = create_agent(model, tools, system_prompt="...", middleware=[ContextMemMiddleware(cm)])
    await agent.ainvoke({"messages": [...]}, {"configurable": {"thread_id": "user-42"}})

The graph state keeps its messages untouched (the full log, as checkpointed); before every model call the
middleware appends the messages the engine has not seen yet to the contextmem session of the thread, and
replaces the request's messages with what :meth:`ContextEngine.build` assembles: the budget-fitted history
— older turns summarised and archived, tool calls kept with their results — and the system prompt with
the running summary appended. LangChain messages are converted at the edge through the OpenAI format;
each stored message keeps its LangChain id in ``extra["lc_id"]``, which is how "already seen" is known,
across restarts too. Async only (``ainvoke``/``astream``): the engine is async.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, cast

from .. import (
    ContextEngine,
    ContextMem,
    Message,
    MissingExtraError,
    SystemMessage,
    ToolSpec,
    from_openai,
    text_of,
    to_openai,
)

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import AnyMessage, convert_to_messages, convert_to_openai_messages
    from langchain_core.messages import SystemMessage as LCSystemMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("langchain", "langchain") from exc

__all__ = ["ID_KEY", "ContextMemMiddleware", "from_langchain", "to_langchain"]

ID_KEY = "lc_id"
"""``extra`` key holding the LangChain message id."""


def from_langchain(messages: Iterable[AnyMessage]) -> list[Message]:
    """LangChain messages -> contextmem messages (ids kept in ``extra``)."""
    listed = list(messages)
    dicts = convert_to_openai_messages(listed)
    return [from_openai({**d, ID_KEY: m.id} if m.id else d) for d, m in zip(dicts, listed, strict=True)]


def to_langchain(messages: Iterable[Message]) -> list[AnyMessage]:
    """contextmem messages -> LangChain messages (ids restored)."""
    dicts = []
    for message in messages:
        d = to_openai(message)
        if ID_KEY in d:
            d["id"] = d.pop(ID_KEY)
        dicts.append(d)
    return cast("list[AnyMessage]", convert_to_messages(dicts))


def _tool_specs(tools: Sequence[Any]) -> list[ToolSpec]:
    specs = []
    for tool in tools:
        fn = convert_to_openai_tool(tool)["function"]
        specs.append(ToolSpec(fn["name"], fn.get("description", ""), fn.get("parameters", {})))
    return specs


class ContextMemMiddleware(AgentMiddleware):
    """Fits every model call of a LangChain v1 agent with contextmem (see the module docstring).

    ``session_id`` fixes the contextmem session; by default it is the run's ``thread_id``
    (``"default"`` when the run has none).
    """

    def __init__(self, runtime: ContextMem, *, session_id: str | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        self.session_id = session_id
        self._engines: dict[str, ContextEngine] = {}
        self._seen: dict[str, set[str]] = {}

    def _session_of(self, request: ModelRequest) -> str:
        if self.session_id is not None:
            return self.session_id
        from langgraph.config import get_config

        try:
            configurable = get_config().get("configurable", {})
        except RuntimeError:  # called outside a graph run
            configurable = {}
        return str(configurable.get("thread_id") or "default")

    async def engine(self, session_id: str) -> ContextEngine:
        """The engine of a session, and the LangChain ids it already holds (live or archived)."""
        engine = self._engines.get(session_id)
        if engine is None:
            engine = await self.runtime.session(session_id)
            stored = await engine.store.messages(engine.namespace, session_id)
            self._seen[session_id] = {
                str(s.message.extra[ID_KEY]) for s in stored if ID_KEY in s.message.extra
            }
            self._engines[session_id] = engine
        return engine

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        session_id = self._session_of(request)
        engine = await self.engine(session_id)
        seen = self._seen[session_id]
        new = [m for m in request.messages if m.id is None or m.id not in seen]
        if new:
            await engine.add(*from_langchain(new))
            seen.update(str(m.id) for m in new if m.id is not None)
            if any(m.type == "human" for m in new):  # a new turn began: the previous one is over
                await engine.end_turn()
        system_prompt = request.system_prompt or ""
        built = await engine.build(system_prompt, _tool_specs(request.tools))
        messages = list(built.messages)
        system = messages.pop(0) if messages and isinstance(messages[0], SystemMessage) else None
        return await handler(
            request.override(
                messages=to_langchain(messages),
                system_message=LCSystemMessage(text_of(system.content)) if system else None,
            )
        )
