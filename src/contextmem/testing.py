"""Fakes for tests: a scripted LLM (replies, tool calls, errors, delays, usage).

Fakes over mocks: these implement the real protocols, so code under test cannot tell them apart from a
provider except by what they were scripted to do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .llm.base import ChatResponse, StreamEvent, ToolSpec, Usage
from .messages import AssistantMessage, Message, ToolCall, text_of


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted step: a reply, an error to raise, and/or a delay before answering."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    error: BaseException | None = None
    delay: float = 0.0
    usage: Usage | None = None


Script = Reply | str | BaseException | Callable[[Sequence[Message]], "Reply | str"]


@dataclass
class ScriptedLLM:
    """An :class:`~contextmem.llm.base.LLM` that plays a script, one entry per call.

    Entries may be a string (a text reply), a :class:`Reply`, an exception (raised), or a function of
    the request returning either. When the script runs out, ``default`` answers (or, if ``None``, an
    ``IndexError`` says the test made more calls than it scripted). Every request is kept in
    :attr:`requests` so tests can assert on what was actually sent.
    """

    script: list[Script] = field(default_factory=list)
    default: Script | None = None
    name: str = "scripted"
    requests: list[list[Message]] = field(default_factory=list)
    request_tools: list[list[ToolSpec]] = field(default_factory=list)

    @classmethod
    def of(cls, *entries: Script, default: Script | None = None) -> ScriptedLLM:
        return cls(list(entries), default)

    def _next(self, messages: Sequence[Message]) -> Reply:
        if self.script:
            entry = self.script.pop(0)
        elif self.default is not None:
            entry = self.default
        else:
            raise IndexError(f"ScriptedLLM ran out of replies at call {len(self.requests)}")
        if callable(entry) and not isinstance(entry, BaseException):
            entry = entry(messages)
        if isinstance(entry, BaseException):
            return Reply(error=entry)
        if isinstance(entry, str):
            return Reply(text=entry)
        return entry

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        self.requests.append(list(messages))
        self.request_tools.append(list(tools))
        step = self._next(messages)
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.error is not None:
            raise step.error
        message = AssistantMessage(step.text, reasoning=step.reasoning, tool_calls=step.tool_calls)
        usage = step.usage or Usage(
            prompt_tokens=sum(len(text_of(getattr(m, "content", None))) // 4 + 4 for m in messages),
            completion_tokens=len(step.text or "") // 4,
        )
        finish = "tool_calls" if step.tool_calls else "stop"
        return ChatResponse(message, usage, finish, self.name)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[StreamEvent]:
        response = await self.complete(messages, tools=tools, max_tokens=max_tokens, temperature=temperature)
        text = text_of(response.message.content)
        for chunk in _chunks(text, 8):
            yield StreamEvent("text", chunk)
        for call in response.message.tool_calls:
            yield StreamEvent("tool_call", call.name)
        yield StreamEvent("done", response=response)


def _chunks(text: str, size: int) -> Iterable[str]:
    return (text[i : i + size] for i in range(0, len(text), size))
