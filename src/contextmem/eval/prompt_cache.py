"""How much of each request a provider's prompt cache could serve: the replay's cache metrics. Pure, no I/O.

Providers bill the longest prefix a request shares with an earlier one as a cache read. A request is
compared, *as it is sent*, with the previous request of the same session: the tool definitions first
(OpenAI form), then each message in OpenAI wire form (:func:`~contextmem.formats.openai.to_openai`,
serialised with ``sort_keys``). The shared prefix is counted at **message granularity**: the tool
definitions' tokens if they are unchanged, plus the tokens of the leading messages that are byte-identical;
the first message that differs contributes nothing, even if it shares a beginning with its predecessor
(a provider may cache a little more, never less on this account). Tokens are those of the engine's
:class:`~contextmem.tokens.MessageCounter`; a request's prompt tokens are its tool definitions' plus its
messages' (the few reply-priming tokens that follow the last message are left out: they are never part
of a later request's prefix), so an append-only request shares exactly the previous request's prompt.

Each call is classified: ``first`` (no previous request), ``append`` (the previous request is a prefix of
this one: every previous token is a cache hit), or a break, named by the first differing message:

* ``tools``: the tool definitions changed (the whole request misses);
* ``system``: the system message changed (e.g. the running summary lives there);
* ``tool_result_rewritten``: a tool message with the same ``tool_call_id`` but other content (offloaded);
* ``trimmed``: the previous request's first messages are gone from the front (a later one now follows,
  or nothing does);
* ``summary_first_user``: the first user message changed (the summary was prepended to it);
* ``other``: anything else.

Billed-equivalent tokens: misses at full price plus hits at :data:`CACHE_READ_PRICE`, a setting-free
constant (Anthropic bills cache reads at 0.1×; OpenAI at 0.1–0.5×), so figures compare across runs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from ..formats.openai import to_openai
from ..messages import Message, SystemMessage, ToolMessage, ToolSpec, UserMessage
from ..tokens import MessageCounter

__all__ = [
    "BREAK_REASONS",
    "CACHE_READ_PRICE",
    "CacheTally",
    "CallCache",
    "WireRequest",
    "canonical",
    "compare",
    "tally",
    "wire_request",
]

CACHE_READ_PRICE = 0.1
"""What a cached prompt token costs relative to an uncached one (Anthropic's rate; fixed on purpose)."""

BreakReason = Literal["tools", "system", "tool_result_rewritten", "trimmed", "summary_first_user", "other"]
BREAK_REASONS: tuple[BreakReason, ...] = (
    "tools",
    "system",
    "tool_result_rewritten",
    "trimmed",
    "summary_first_user",
    "other",
)
CallKind = Literal["first", "append"] | BreakReason


@lru_cache(maxsize=8192)
def canonical(message: Message) -> str:
    """``message`` in OpenAI wire form, serialised with sorted keys: equal strings, equal bytes sent."""
    return json.dumps(to_openai(message), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One request as it is sent: tool definitions, then messages, with the tokens of each part."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    keys: tuple[str, ...]  # canonical(m) for each message
    tools_key: str
    message_tokens: tuple[int, ...]
    tool_tokens: int
    prompt: int  # tool definitions + messages (see the module docs)

    def to_json(self) -> dict[str, Any]:
        """``{"tools": [...], "messages": [...]}``: the OpenAI tool definitions and chat dicts."""
        return {
            "tools": [t.to_openai() for t in self.tools],
            "messages": [to_openai(m) for m in self.messages],
        }


def wire_request(
    messages: Sequence[Message], tools: Sequence[ToolSpec], counter: MessageCounter
) -> WireRequest:
    """The :class:`WireRequest` for ``messages`` and ``tools``, counted with ``counter``."""
    tools = tuple(tools)
    message_tokens = tuple(counter.count_messages(messages))
    tool_tokens = counter.count_tools(tools)
    return WireRequest(
        messages=tuple(messages),
        tools=tools,
        keys=tuple(canonical(m) for m in messages),
        tools_key=json.dumps([t.to_openai() for t in tools], sort_keys=True, ensure_ascii=False),
        message_tokens=message_tokens,
        tool_tokens=tool_tokens,
        prompt=tool_tokens + sum(message_tokens),
    )


@dataclass(frozen=True, slots=True)
class CallCache:
    """One call: its prompt tokens, the prefix it shares with the previous request, and its kind."""

    prompt: int
    shared: int
    kind: CallKind

    @property
    def appended(self) -> bool:
        return self.kind == "append"

    @property
    def billed(self) -> float:
        return (self.prompt - self.shared) + CACHE_READ_PRICE * self.shared


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _break_reason(previous: WireRequest, current: WireRequest, k: int) -> BreakReason:
    """Why ``current`` stops sharing ``previous``'s messages at index ``k`` (see the module docs)."""
    old = previous.messages[k] if k < len(previous.messages) else None
    new = current.messages[k] if k < len(current.messages) else None
    if isinstance(old, SystemMessage) or isinstance(new, SystemMessage):
        return "system"
    if isinstance(old, ToolMessage) and isinstance(new, ToolMessage) and old.tool_call_id == new.tool_call_id:
        return "tool_result_rewritten"
    if new is None or current.keys[k] in previous.keys[k + 1 :]:
        return "trimmed"
    if isinstance(new, UserMessage) and not any(isinstance(m, UserMessage) for m in current.messages[:k]):
        return "summary_first_user"
    return "other"


def compare(previous: WireRequest | None, current: WireRequest) -> CallCache:
    """The cache figures of ``current`` sent after ``previous`` (``None``: the session's first call)."""
    if previous is None:
        return CallCache(current.prompt, 0, "first")
    if previous.tools_key != current.tools_key:
        return CallCache(current.prompt, 0, "tools")
    k = _common_prefix(previous.keys, current.keys)
    shared = current.tool_tokens + sum(current.message_tokens[:k])
    if k == len(previous.keys):
        return CallCache(current.prompt, shared, "append")
    return CallCache(current.prompt, shared, _break_reason(previous, current, k))


@dataclass(frozen=True, slots=True)
class CacheTally:
    """Cache figures summed over calls (a turn's, or a whole replay's)."""

    calls: int = 0
    prompt: int = 0
    shared: int = 0
    appended: int = 0
    billed: float = 0.0
    breaks: Mapping[str, int] = field(default_factory=dict)

    @property
    def cache_ratio(self) -> float:
        """Shared prefix tokens / prompt tokens (0 when nothing was sent)."""
        return self.shared / self.prompt if self.prompt else 0.0

    @property
    def billed_per_call(self) -> float:
        return self.billed / self.calls if self.calls else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt,
            "shared_tokens": self.shared,
            "cache_ratio": round(self.cache_ratio, 4),
            "appended": self.appended,
            "billed_equivalent": round(self.billed, 1),
            "billed_per_call": round(self.billed_per_call, 1),
            "cache_read_price": CACHE_READ_PRICE,
            "breaks": dict(self.breaks),
        }


def tally(calls: Iterable[CallCache]) -> CacheTally:
    """Sum ``calls``; ``breaks`` counts each break reason that occurred (``first`` is not a break)."""
    calls = list(calls)
    breaks = Counter(c.kind for c in calls if c.kind not in ("first", "append"))
    return CacheTally(
        calls=len(calls),
        prompt=sum(c.prompt for c in calls),
        shared=sum(c.shared for c in calls),
        appended=sum(c.appended for c in calls),
        billed=sum(c.billed for c in calls),
        breaks={r: breaks[r] for r in BREAK_REASONS if breaks[r]},
    )
