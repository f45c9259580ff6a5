"""LangChain v1 / LangGraph: an agent middleware that sends the model contextmem's fitted context.

::

    cm = await ContextMem.open(settings)
    middleware = ContextMemMiddleware(cm)
    agent = create_agent(model, tools, system_prompt="...", middleware=[middleware])
    await agent.ainvoke({"messages": [...]}, {"configurable": {"thread_id": "user-42"}})
    await middleware.aclose()  # waits for background summaries, closes cm

In sync code, ``agent.invoke(...)`` and then ``middleware.close_sync()`` — no ``asyncio.run``; an
``asyncio.run(cm.close())`` works too (:meth:`ContextMem.close` does its work on the loop the sessions
run on), but does not wait for a summary still running.

The graph state keeps its messages untouched (the full log, as checkpointed); before every model call the
middleware appends the messages the engine has not seen yet to the contextmem session of the thread, and
replaces the request's messages with what :meth:`ContextEngine.build` assembles: the budget-fitted history
— older turns summarised and archived, tool calls kept with their results — and the system prompt with
the running summary appended. LangChain messages are converted at the edge through the OpenAI format;
each stored message keeps its LangChain id in ``extra["lc_id"]``, which is how "already seen" is known,
across restarts too. When a run ends (``after_agent``) its final reply is stored and the turn ended, so
the session holds every message of the graph, not all but the newest until the next call.

Both paths work: ``ainvoke``/``astream`` (``awrap_model_call``) and ``invoke``/``stream``
(``wrap_model_call``); they share one coroutine that fits the request. The engine is async, so the sync
path runs that coroutine on the middleware's private event loop, in a daemon thread started by the
first sync call, and waits for it — whether or not the calling thread runs a loop of its own. Not
``asyncio.run`` per call: a background summary started in one call must outlive it, and the engine's
lock must stay on one loop. And not the caller's loop, which a sync call inside a running loop blocks.
Each session's engine lives on one loop: the async path uses the running loop (or the private one,
where a sync call opened the session), and a session whose loop is gone, or that a sync call needs
off the private loop, is reopened from the store, which is the truth. A store bound to one event loop
(the PostgreSQL pool) must then be used from one path only.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

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

T = TypeVar("T")

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
    return [ToolSpec.from_openai(convert_to_openai_tool(tool), f"tools[{i}]") for i, tool in enumerate(tools)]


@dataclass
class _Session:
    """A contextmem session as the middleware holds it: its engine, the loop the engine lives on, and
    the LangChain ids it already holds (live or archived)."""

    engine: ContextEngine
    loop: asyncio.AbstractEventLoop
    seen: set[str]


class ContextMemMiddleware(AgentMiddleware):
    """Fits every model call of a LangChain v1 agent with contextmem (see the module docstring).

    ``session_id`` fixes the contextmem session; by default it is the run's ``thread_id``
    (``"default"`` when the run has none).
    """

    def __init__(self, runtime: ContextMem, *, session_id: str | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        self.session_id = session_id
        self._sessions: dict[str, _Session] = {}
        self._private: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._private_lock = threading.Lock()

    def _session_of(self) -> str:
        if self.session_id is not None:
            return self.session_id
        from langgraph.config import get_config

        try:
            configurable = get_config().get("configurable", {})
        except RuntimeError:  # called outside a graph run
            configurable = {}
        return str(configurable.get("thread_id") or "default")

    async def engine(self, session_id: str) -> ContextEngine:
        """The engine of a session, opened on the running loop unless it lives on one already."""
        session = self._sessions.get(session_id)
        if session is None or not session.loop.is_running():
            session = await self._open(session_id)
        return session.engine

    async def _open(self, session_id: str) -> _Session:
        """Open the session's engine on the running loop (from the store, which knows every id seen)."""
        engine = await self.runtime.session(session_id)
        stored = await engine.store.messages(engine.namespace, session_id)
        seen = {str(s.message.extra[ID_KEY]) for s in stored if ID_KEY in s.message.extra}
        session = self._sessions[session_id] = _Session(engine, asyncio.get_running_loop(), seen)
        return session

    async def _caught_up(self, session_id: str, messages: Sequence[AnyMessage]) -> ContextEngine:
        """The session's engine, on the loop it lives on (opened there if it lives nowhere yet, or on
        another loop), holding ``messages``: those it has not seen are added; a human one among them
        begins a new turn, so the previous one is over."""
        session = self._sessions.get(session_id)
        if session is None or session.loop is not asyncio.get_running_loop():
            session = await self._open(session_id)
        new = [m for m in messages if m.id is None or m.id not in session.seen]
        if new:
            await session.engine.add(*from_langchain(new))
            session.seen.update(str(m.id) for m in new if m.id is not None)
            if any(m.type == "human" for m in new):
                await session.engine.end_turn()
        return session.engine

    async def _fitted(self, session_id: str, request: ModelRequest) -> ModelRequest:
        """The request with contextmem's messages (see the module docstring)."""
        engine = await self._caught_up(session_id, request.messages)
        built = await engine.build(request.system_prompt or "", _tool_specs(request.tools))
        messages = list(built.messages)
        system = messages.pop(0) if messages and isinstance(messages[0], SystemMessage) else None
        return request.override(
            messages=to_langchain(messages),
            system_message=LCSystemMessage(text_of(system.content)) if system else None,
        )

    async def _finished(self, session_id: str, messages: Sequence[AnyMessage]) -> None:
        """The run is over: store its final reply now (not at the next call, which may never come), and
        end the turn."""
        engine = await self._caught_up(session_id, messages)
        await engine.end_turn()

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """The sync path (``invoke``/``stream``): the engine runs on the private loop (module docstring)."""
        return handler(self._on_private(self._fitted(self._session_of(), request)))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """The async path (``ainvoke``/``astream``): the engine runs on the running loop, or on the
        private loop when the session's engine lives there (module docstring)."""
        session_id = self._session_of()
        return await handler(await self._on_home(session_id, self._fitted(session_id, request)))

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The end of a sync run: its final reply is stored (:meth:`_finished`)."""
        self._on_private(self._finished(self._session_of(), state["messages"]))
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """The end of an async run: its final reply is stored (:meth:`_finished`)."""
        session_id = self._session_of()
        await self._on_home(session_id, self._finished(session_id, state["messages"]))
        return None

    def _on_private(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the private loop and wait for it (the sync path)."""
        return asyncio.run_coroutine_threadsafe(work, self._private_loop()).result()

    async def _on_home(self, session_id: str, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` on the running loop, or on the private one when the session lives there."""
        session = self._sessions.get(session_id)
        if session is not None and session.loop is self._private and session.loop.is_running():
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, session.loop))
        return await work

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        """The middleware's own event loop, running in a daemon thread from the first sync call on."""
        with self._private_lock:
            if self._private is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="contextmem-langchain", daemon=True
                )
                self._thread.start()
                self._private = loop
            return self._private

    # --- shutting down ------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Shut down from async code: wait for every session's background summary, close the runtime
        (:meth:`ContextMem.close`) and stop the private loop."""
        await self._shutdown(other_loops=True)
        self._stop_private()

    def close_sync(self) -> None:
        """Shut down from sync code (after ``invoke``), with no ``asyncio.run``: as :meth:`aclose`, run on
        the private loop, where the sync path's sessions live."""
        self._on_private(self._shutdown(other_loops=False))
        self._stop_private()

    async def _shutdown(self, *, other_loops: bool) -> None:
        """Wait for the background summaries of the sessions on this loop (and, with ``other_loops``, of
        those on another running loop), then close the runtime."""
        for session in list(self._sessions.values()):
            if session.loop is asyncio.get_running_loop():
                await session.engine.wait_idle()
            elif other_loops and session.loop.is_running():
                idle = asyncio.run_coroutine_threadsafe(session.engine.wait_idle(), session.loop)
                await asyncio.wrap_future(idle)
        await self.runtime.close()

    def _stop_private(self) -> None:
        with self._private_lock:
            loop, thread, self._private, self._thread = self._private, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
