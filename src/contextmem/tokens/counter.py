"""Counting messages and tool definitions on top of a text tokenizer, with a per-message cache."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from ..errors import TokenizerError
from ..messages import AssistantMessage, Content, ImagePart, Message, TextPart, ToolMessage, ToolSpec
from .heuristic import HeuristicCounter
from .tiktoken_backend import ENCODINGS, TiktokenCounter

__all__ = [
    "DEFAULT_IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "REPLY_PRIMING",
    "TOOL_CALL_OVERHEAD",
    "TOOL_DEF_OVERHEAD",
    "MessageCounter",
    "TokenCounter",
    "get_counter",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text. Implementations must be pure functions of the text."""

    @property
    def name(self) -> str: ...

    def count_text(self, text: str) -> int: ...


# Framing the chat format adds, as OpenAI documents for its chat models: every message costs a few
# tokens for its role and separators, a name one more, and the reply is primed with three.
MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3
TOOL_CALL_OVERHEAD = 3
TOOL_DEF_OVERHEAD = 8
DEFAULT_IMAGE_TOKENS = 765  # one 1024x1024 high-detail image on GPT-4o-class models


class MessageCounter:
    """Counts messages, requests and tool definitions with one :class:`TokenCounter`.

    The count of a message is cached by value (messages are frozen, and Python caches the hash of
    a string, so a lookup is cheap): re-counting a history of N messages of which K are new costs K
    tokenisations. The cache is bounded; old entries are evicted first.
    """

    def __init__(
        self,
        counter: TokenCounter | None = None,
        *,
        image_tokens: int = DEFAULT_IMAGE_TOKENS,
        cache_size: int = 100_000,
    ) -> None:
        self.counter: TokenCounter = counter if counter is not None else get_counter("auto")
        self.image_tokens = image_tokens
        self._cache: dict[Message, int] = {}
        self._cache_size = cache_size

    @property
    def name(self) -> str:
        return self.counter.name

    def count_text(self, text: str) -> int:
        return self.counter.count_text(text) if text else 0

    def count_message(self, message: Message) -> int:
        cached = self._cache.get(message)
        if cached is not None:
            return cached
        n = self._count_uncached(message)
        if len(self._cache) >= self._cache_size:
            del self._cache[next(iter(self._cache))]
        self._cache[message] = n
        return n

    def remember(self, counted: Iterable[tuple[Message, int]]) -> None:
        """Take counts this counter's tokenizer gave before (another engine's, of the same messages):
        the next :meth:`count_message` of each finds it, as if counted here."""
        for message, n in counted:
            if len(self._cache) >= self._cache_size:
                del self._cache[next(iter(self._cache))]
            self._cache[message] = n

    def count_messages(self, messages: Iterable[Message]) -> list[int]:
        return [self.count_message(m) for m in messages]

    def count_request(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
        """Everything a request carries: messages, reply priming and tool definitions."""
        return sum(self.count_messages(messages)) + REPLY_PRIMING + self.count_tools(tools)

    def count_tools(self, tools: Sequence[ToolSpec]) -> int:
        total = 0
        for spec in tools:
            schema = json.dumps(
                dict(spec.parameters), ensure_ascii=False, separators=(",", ":"), sort_keys=True
            )
            total += (
                TOOL_DEF_OVERHEAD
                + self.count_text(spec.name)
                + self.count_text(spec.description)
                + self.count_text(schema)
            )
        return total

    def _count_content(self, content: Content | None) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count_text(content)
        total = 0
        for part in content:
            if isinstance(part, TextPart):
                total += self.count_text(part.text)
            elif isinstance(part, ImagePart):
                total += self.image_tokens
        return total

    def _count_uncached(self, message: Message) -> int:
        n = MESSAGE_OVERHEAD + self._count_content(message.content)
        if message.name:
            n += NAME_OVERHEAD + self.count_text(message.name)
        if isinstance(message, AssistantMessage):
            if message.reasoning:
                n += self.count_text(message.reasoning)
            for call in message.tool_calls:
                n += (
                    TOOL_CALL_OVERHEAD
                    + self.count_text(call.id)
                    + self.count_text(call.name)
                    + self.count_text(call.arguments)
                )
        elif isinstance(message, ToolMessage):
            n += self.count_text(message.tool_call_id)
        return n


def get_counter(name: str = "auto") -> TokenCounter:
    """A counter by name: an encoding (``o200k_base``, ``cl100k_base``), ``heuristic``, or ``auto``.

    ``auto`` is o200k_base when its data loads, else the heuristic — a missing tokenizer degrades
    the estimate, it never stops the agent.
    """
    if name == "heuristic":
        return HeuristicCounter()
    if name == "auto":
        try:
            counter = TiktokenCounter("o200k_base")
            counter.count_text("probe")
        except (TokenizerError, ImportError):
            return HeuristicCounter()
        return counter
    if name in ENCODINGS:
        return TiktokenCounter(name)
    raise TokenizerError(
        f"unknown tokenizer {name!r}. Fix: use 'auto', 'heuristic' or one of {list(ENCODINGS)}"
    )
