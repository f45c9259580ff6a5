"""The LLM protocol: what contextmem needs from a model, and what every provider adapter returns.

Async first. Adapters map :mod:`contextmem.messages` values to their wire format at the edge and
translate their SDK's exceptions into :mod:`contextmem.errors` in one place each.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Hashable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, TypedDict, TypeVar, Unpack, runtime_checkable

from ..errors import MessageFormatError, UsageError, brief
from ..messages import AssistantMessage, Message, wire_form
from ..messages import ToolSpec as ToolSpec  # noqa: PLC0414 - re-exported; it lives in the message layer
from .scheduler import EndpointGate, gate_for

__all__ = [
    "LLM",
    "BaseLLM",
    "CallOptions",
    "CallTotals",
    "ChatResponse",
    "LearnsWindow",
    "ModelCall",
    "StreamEvent",
    "Usage",
    "run_sync",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CallTotals:
    """Model calls made and the tokens they reported (0 where the provider reported none): contextmem's
    own calls, such as its summaries, which a user's agent loop does not see."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, usage: Usage | None) -> CallTotals:
        got = usage or Usage()
        return CallTotals(
            self.calls + 1,
            self.prompt_tokens + got.prompt_tokens,
            self.completion_tokens + got.completion_tokens,
        )


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

    @classmethod
    def from_openai(cls, usage: Mapping[str, Any] | None) -> Usage:
        """OpenAI Chat Completions usage: ``prompt_tokens`` (cache reads included), ``completion_tokens``,
        cache reads in ``prompt_tokens_details.cached_tokens`` (DeepSeek: ``prompt_cache_hit_tokens``)."""
        usage = usage or {}
        details = _details(usage, "prompt_tokens_details")
        cached = _count(details, "cached_tokens", "usage.prompt_tokens_details") or _count(
            usage, "prompt_cache_hit_tokens"
        )
        return cls(_count(usage, "prompt_tokens"), _count(usage, "completion_tokens"), cached)

    @classmethod
    def from_responses(cls, usage: Mapping[str, Any] | None) -> Usage:
        """OpenAI Responses usage: ``input_tokens`` (cache reads included), ``output_tokens``, cache reads
        in ``input_tokens_details.cached_tokens``."""
        usage = usage or {}
        details = _details(usage, "input_tokens_details")
        return cls(
            _count(usage, "input_tokens"),
            _count(usage, "output_tokens"),
            _count(details, "cached_tokens", "usage.input_tokens_details"),
        )

    @classmethod
    def from_anthropic(cls, usage: Mapping[str, Any] | None) -> Usage:
        """Anthropic usage, which counts cache reads and writes *apart from* ``input_tokens``: the prompt
        is ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``, the cached part the
        reads."""
        usage = usage or {}
        read = _count(usage, "cache_read_input_tokens")
        prompt = _count(usage, "input_tokens") + read + _count(usage, "cache_creation_input_tokens")
        if prompt > MAX_TOKEN_COUNT:  # each part is a count; their sum must be one too
            raise MessageFormatError("usage", f"sums to {prompt:,} prompt tokens, not a count", _USAGE_FIX)
        return cls(prompt, _count(usage, "output_tokens"), read)

    @classmethod
    def of(cls, usage: object) -> Usage | None:
        """The usage a provider reported, in whatever form the caller has it: a :class:`Usage`; the OpenAI
        SDK's ``CompletionUsage`` or Responses ``ResponseUsage``; the Anthropic SDK's ``Usage``; a dict of any
        of those shapes. ``None`` (a stream without usage) gives ``None``; anything else is a
        :class:`MessageFormatError`."""
        if usage is None or isinstance(usage, Usage):
            return usage
        data = wire_form(usage)
        if isinstance(data, Mapping):
            if "prompt_tokens" in data or "completion_tokens" in data:
                return cls.from_openai(data)
            if "input_tokens_details" in data or "output_tokens_details" in data:
                return cls.from_responses(data)
            if "input_tokens" in data or "output_tokens" in data:
                return cls.from_anthropic(data)  # Responses usage without details reads the same
        raise MessageFormatError(
            "usage",
            f"is not a usage the providers report: {str(data)[:200]!r}",
            "pass the usage of the reply as it came (completion.usage, response.usage, message.usage), "
            "a dict of it, a contextmem Usage, or None",
        )


def _details(usage: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    details = usage.get(key) or {}
    if not isinstance(details, Mapping):
        raise MessageFormatError(f"usage.{key}", f"must be an object, got {brief(details)}", _USAGE_FIX)
    return details


MAX_TOKEN_COUNT = 2**53
"""The largest count a usage may report: the largest integer every JSON reader holds exactly, and far
beyond any real one (a larger one, or NaN or infinity, is a broken reply, never arithmetic's problem)."""


def _count(usage: Mapping[str, Any], key: str, where: str = "usage") -> int:
    """A token count (a missing or null one is 0); anything but a number from 0 to
    :data:`MAX_TOKEN_COUNT` is refused."""
    value = usage.get(key) or 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_TOKEN_COUNT:
        raise MessageFormatError(f"{where}.{key}", f"must be a token count, got {brief(value)}", _USAGE_FIX)
    return int(value)


_USAGE_FIX = "pass the usage as the provider reported it, with whole numbers of tokens"


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

    A model that knows its window states it as ``context_window`` (tokens one call may hold, prompt and
    reply; the one name for it — the local model's llama.cpp ``n_ctx`` is exposed under it), and may
    state its own reply size as ``max_tokens``. :func:`contextmem.budget.fit_window` then fits every
    setting the user left unset to it: the window sessions plan against, the output reserve, and the
    summary sizes (a summary call must fit the model too).

    Only :class:`BaseLLM` subclasses take part in the replies-first scheduling of :mod:`.scheduler`; an
    object that merely satisfies this protocol is called as it is, ungated.
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


@runtime_checkable
class LearnsWindow(Protocol):
    """An LLM that can be told its window after the fact: its provider stated it in an overflow
    (llama.cpp's ``n_ctx``), and from then on the LLM states it as its ``context_window``, so every session
    fitted to it plans against it. A model whose window is its own (the local model's) has no such method."""

    def learn_window(self, context_window: int) -> None: ...


class CallOptions(TypedDict, total=False):
    """The keywords of :meth:`LLM.complete` and :meth:`LLM.stream`, as :class:`BaseLLM` takes them."""

    tools: Sequence[ToolSpec]
    max_tokens: int | None
    temperature: float | None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call as the caller asked for it, before an adapter turns it into its provider's request."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int | None = None
    temperature: float | None = None


class BaseLLM(ABC):
    """The small shared base of contextmem's own adapters (the SDK adapters and the local model).

    ``complete`` and ``stream`` turn a :class:`ModelCall` into the provider's request body with
    :meth:`_request` and hand it to the transport, :meth:`_complete` or :meth:`_stream`. A stream builds
    its request on its first step, so its errors surface there. Closing the stream closes :meth:`_stream`
    at once, so a transport's ``finally`` (an HTTP response, a model's lock) is released when the consumer
    stops.

    Both hold the endpoint's :class:`~.scheduler.EndpointGate` around the transport call (a stream for its
    whole life), at the priority of the context (see :mod:`.scheduler`): replies go first, summaries wait.
    The endpoint is :meth:`_gate_key`, with :attr:`_gate_slots` calls at once.
    """

    name: str
    _gate_slots: ClassVar[int | None] = None
    """Calls the endpoint runs at once; ``None`` (unbounded) suits an HTTP server, 1 an in-process model."""

    def _gate_key(self) -> Hashable:
        """Which endpoint this model's calls compete for.

        By default ``(base_url, model)`` for an adapter that has a ``base_url`` (the SDK adapters: every
        instance talking to one server and model shares a gate), else this instance alone.
        """
        base_url = getattr(self, "base_url", None)
        if isinstance(base_url, str) and base_url:
            return ("http", base_url.rstrip("/"), getattr(self, "model", None))
        return ("instance", id(self))

    @property
    def gate(self) -> EndpointGate:
        """The gate of this model's endpoint, shared by every model with the same :meth:`_gate_key`."""
        return gate_for(self._gate_key(), self._gate_slots)

    @abstractmethod
    def _request(self, call: ModelCall) -> dict[str, Any]:
        """The provider's request body for ``call``."""

    @abstractmethod
    async def _complete(self, request: dict[str, Any]) -> ChatResponse:
        """Send ``request`` and read the whole reply."""

    @abstractmethod
    def _stream(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        """Send ``request`` and yield the reply as it comes; the last event is ``done``."""

    async def complete(self, messages: Sequence[Message], **options: Unpack[CallOptions]) -> ChatResponse:
        request = self._request(ModelCall(messages, **options))
        async with self.gate.hold():
            return await self._complete(request)

    async def stream(
        self, messages: Sequence[Message], **options: Unpack[CallOptions]
    ) -> AsyncIterator[StreamEvent]:
        request = self._request(ModelCall(messages, **options))
        async with self.gate.hold(), aclosing(self._stream(request)) as events:
            async for event in events:
                yield event


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """The sync facade: run one coroutine to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise UsageError("run_sync() called from a running event loop. Fix: await the async method instead.")
