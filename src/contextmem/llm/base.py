"""The LLM protocol: what contextmem needs from a model, and what every provider adapter returns.

Async first. Adapters map :mod:`contextmem.messages` values to their wire format at the edge and
translate their SDK's exceptions into :mod:`contextmem.errors` in one place each.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from ..messages import AssistantMessage, Message

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it.

    ``prompt_tokens`` is the whole prompt as billed, *including* ``cached_tokens`` (cache reads);
    the calibrator subtracts nothing itself — it asks for :attr:`uncached_prompt_tokens` where needed.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def uncached_prompt_tokens(self) -> int:
        return max(0, self.prompt_tokens - self.cached_tokens)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool definition as handed to a model: name, description and JSON schema of its parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True, slots=True)
class ChatResponse:
    message: AssistantMessage
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str = ""


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One piece of a streamed reply. The last event has ``kind == "done"`` and carries ``response``."""

    kind: Literal["text", "reasoning", "tool_call", "done"]
    text: str = ""
    response: ChatResponse | None = None


@runtime_checkable
class LLM(Protocol):
    """A chat model. ``name`` identifies it for calibration and logs (e.g. ``"openai:gpt-4o"``).

    A model with a small window may also have a ``context_window`` attribute (tokens per call, prompt
    and reply); the engine then sizes its summary requests to fit (the local model has one).
    """

    name: str

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResponse: ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[StreamEvent]: ...


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The sync facade: run one coroutine to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError("run_sync() called from a running event loop. Fix: await the async method instead.")
