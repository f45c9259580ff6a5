"""The reference agent loop (A1): any LLM, tool calling, every model call assembled by the engine.

One turn::

    add(user) → [ build → stream the model (overflow? handle_overflow → retry) → record_usage
                  → tool calls? run them, add(call + results), next step : add(reply), done ]
             → fold the task's steps (C14, by setting) → end_turn (background summarisation)

A reply claiming a save that no ``memory_write`` call of the turn made gets a note saying it was not saved
(:mod:`.claims`): small models claim saves they never made.

At most ``agent_max_steps`` model calls per turn; the last allowed call is offered no tools, so the turn
ends in a reply. Overflow retries are bounded by the engine's emergency stages (it raises
:class:`~contextmem.errors.CompactionError` when none is left), and by ``max_overflow_retries`` here.
Every model call carries the session's prompt-cache key (:mod:`contextmem.llm.cache`), so a provider that
routes by it keeps the session on one cache.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from ..engine import ContextEngine, Request
from ..errors import ConfigError, IncompleteReplyError
from ..llm.base import LLM, ChatResponse, StreamEvent, ToolSpec
from ..llm.cache import keyed, session_cache_key
from ..llm.overflow import is_overflow
from ..messages import AssistantMessage, ToolMessage, UserMessage, text_of
from .claims import SAVE_TOOL, unbacked_save_note
from .profile import compose_system_prompt
from .task import TaskMemory, fold_task
from .toolbox import Tool, Toolbox, memory_tools

if TYPE_CHECKING:
    from ..runtime import ContextMem

__all__ = ["Agent", "AgentEvent", "TurnResult"]

STOPPED_NOTE = "(stopped after {n} steps without a final answer)"


@dataclass(frozen=True, slots=True)
class TurnResult:
    """What one turn produced: the reply, the task's working memory, and every request sent."""

    reply: str
    task: TaskMemory
    requests: tuple[Request, ...]
    steps: int


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """A piece of a running turn, for streaming UIs: reply text, a tool call or result, or the end."""

    kind: Literal["text", "tool_call", "tool_result", "overflow", "done"]
    text: str = ""
    name: str = ""
    result: TurnResult | None = None


@dataclass
class Agent:
    """A tool-calling agent over one engine session. Build with :meth:`open` or directly."""

    engine: ContextEngine
    llm: LLM
    tools: Toolbox = field(default_factory=Toolbox)
    system_prompt: str = ""
    max_overflow_retries: int = 3
    temperature: float | None = None
    last_task: TaskMemory | None = None

    @classmethod
    async def open(
        cls,
        runtime: ContextMem,
        session_id: str,
        *,
        llm: LLM | None = None,
        tools: Iterable[Tool] = (),
        restore: bool = True,
        system_prompt: str | None = None,
    ) -> Agent:
        """An agent on ``runtime``'s session ``session_id`` with the memory tools plus ``tools``.

        ``llm`` defaults to the runtime's model (which also writes the summaries).
        """
        model = llm or runtime.llm
        if model is None:
            raise ConfigError(
                "no model to answer with: the runtime was opened with model 'none'. "
                "Fix: set model to 'local', 'openai:MODEL' or 'anthropic:MODEL', or pass llm=..."
            )
        engine = await runtime.session(session_id, restore=restore)
        box = Toolbox([*(memory_tools(runtime.tools) if runtime.memory is not None else ()), *tools])
        prompt = compose_system_prompt(runtime.workspace, system_prompt)
        return cls(engine, model, box, prompt)

    @property
    def tool_specs(self) -> tuple[ToolSpec, ...]:
        return self.tools.specs

    async def ask(self, text: str) -> TurnResult:
        """Run one turn to the end and return its result (no streaming)."""
        result: TurnResult | None = None
        async for event in self.run(text):
            if event.result is not None:
                result = event.result
        assert result is not None
        return result

    async def run(self, text: str | UserMessage) -> AsyncIterator[AgentEvent]:
        """Run one turn, yielding reply text as it streams, tool calls and results, then ``done``."""
        user = text if isinstance(text, UserMessage) else UserMessage(text)
        engine, settings = self.engine, self.engine.settings
        await engine.add(user)
        task = TaskMemory(text_of(user.content))
        requests: list[Request] = []
        reply: AssistantMessage | None = None
        steps = 0
        for step in range(settings.agent_max_steps):
            steps = step + 1
            last_step = step == settings.agent_max_steps - 1
            specs = () if last_step else self.tool_specs
            request = await engine.build(self.system_prompt, specs)
            response: ChatResponse | None = None
            for attempt in range(self.max_overflow_retries + 1):
                try:
                    async for event in self._stream(request):
                        if event.kind == "text":
                            yield AgentEvent("text", event.text)
                        elif event.response is not None:
                            response = event.response
                    break
                except Exception as exc:
                    if not is_overflow(exc) or attempt == self.max_overflow_retries:
                        raise
                    yield AgentEvent("overflow", str(exc)[:200])
                    request = await engine.handle_overflow(exc, self.system_prompt, specs)
            requests.append(request)
            if response is None:
                raise IncompleteReplyError(
                    f"{self.llm.name} ended its stream without a final response. "
                    "Fix: retry the turn; if it recurs, check the server's logs"
                )
            engine.record_usage(request, response.usage)
            message = response.message
            if message.tool_calls and not last_step:
                results: list[ToolMessage] = []
                for call in message.tool_calls:
                    yield AgentEvent("tool_call", call.arguments, call.name)
                    output = await self.tools.run(call)
                    yield AgentEvent("tool_result", output, call.name)
                    results.append(ToolMessage(call.id, output, name=call.name))
                await engine.add(message, *results)
                task.record(message, results)
                continue
            reply = message if not message.tool_calls else _without_calls(message, steps)
            break
        assert reply is not None
        if SAVE_TOOL in self.tools and (note := unbacked_save_note(text_of(reply.content), task)):
            yield AgentEvent("text", f"\n\n{note}")  # the claim must not stand unmarked (.claims)
            reply = replace(reply, content=f"{text_of(reply.content).rstrip()}\n\n{note}")
        result = await self._end_turn(reply, task, TurnResult("", task, tuple(requests), steps))
        yield AgentEvent("done", result.reply, result=result)

    async def _end_turn(self, reply: AssistantMessage, task: TaskMemory, result: TurnResult) -> TurnResult:
        """Store the reply, fold the task's steps (by setting), end the turn: ``result`` with the reply."""
        await self.engine.add(reply)
        task.outcome = text_of(reply.content)
        if self.engine.settings.fold_task_memory and task.steps:
            task.folded = await fold_task(self.engine)
        self.last_task = task
        await self.engine.end_turn()
        return replace(result, reply=task.outcome)

    async def _stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """The model's stream for ``request`` (the engine's messages, tools and output reserve), keyed
        to this session's prompt cache."""
        events = self.llm.stream(
            request.messages,
            tools=request.tools,
            max_tokens=request.max_tokens,
            temperature=self.temperature,
        )
        async for event in keyed(session_cache_key(self.engine.namespace, self.engine.session_id), events):
            yield event


def _without_calls(message: AssistantMessage, steps: int) -> AssistantMessage:
    """A reply from the last allowed step that still asked for tools: keep its text, drop the calls."""
    text = text_of(message.content).strip() or STOPPED_NOTE.format(n=steps)
    return AssistantMessage(text)
