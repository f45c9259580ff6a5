"""Anthropic Messages API through the official ``anthropic`` SDK.

The system prompt travels in the ``system`` parameter, tool results as ``tool_result`` blocks, thinking
as ``thinking`` blocks with their signature (all mapped by :mod:`contextmem.formats.anthropic`).
``max_tokens`` is required by the API: 4096 unless the call or the constructor says otherwise.

Usage is normalised to what the other adapters report: Anthropic counts cache reads and cache writes
*apart from* ``input_tokens``, so ``prompt_tokens = input + cache_read + cache_creation`` and
``cached_tokens = cache_read`` (:meth:`~.base.Usage.from_anthropic`, which ``record_usage`` reads too). The
request's conversation part is :func:`messages_body`, which ``Request.to_anthropic`` returns as well.
Prompt-cache breakpoints: see :class:`AnthropicLLM`. SDK exceptions are
translated in :meth:`AnthropicLLM._translate` only (from :mod:`.sdk`, which holds the skeleton this
adapter shares with the OpenAI one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from ..formats.anthropic import from_anthropic_reply, mark_cache_breakpoints, to_anthropic
from ..messages import Message, ToolSpec
from ..tokens.heuristic import HeuristicCounter
from .base import ChatResponse, ModelCall, StreamEvent, Usage
from .sdk import SDKAdapter, SDKOptions

__all__ = ["CACHE_MIN_TOKENS", "DEFAULT_MAX_TOKENS", "AnthropicLLM", "messages_body"]

DEFAULT_MAX_TOKENS = 4096
CACHE_MIN_TOKENS = 1024
"""The shortest prompt Anthropic caches on most models (Sonnet, Opus 4/4.1); some need 2048 or 4096."""

# Anthropic's stop reasons in the vocabulary the rest of contextmem (and OpenAI) uses.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class AnthropicLLM(SDKAdapter):
    """An :class:`~.base.LLM` over ``POST {base_url}/v1/messages``.

    ``extra_body`` is merged into every request (e.g. ``{"thinking": {"type": "adaptive"}}``); a
    ``temperature`` goes there too, because the SDK no longer has a typed parameter for it.

    Prompt caching (on by default; ``cache_min_tokens=None`` turns it off): Anthropic caches a prefix only
    up to a block marked ``cache_control``, at most four per request. The wire copy of a request of at
    least ``cache_min_tokens`` (estimated, erring high) is marked at the end of tools + system, the newest
    message, the end of the previous call and of the previous turn
    (:func:`~contextmem.formats.anthropic.mark_cache_breakpoints`), so the next call reads what this one
    wrote. Smaller requests go unmarked: the API caches nothing below its minimum (1024 tokens on most
    models, 2048 or 4096 on some; raise ``cache_min_tokens`` to match yours). A write costs 1.25x the
    input price, a read 0.1x. History is never changed, only the wire copy.

    Retries cover a whole ``complete`` call and the *opening* of a stream (see :mod:`.sdk`).
    """

    provider = "anthropic"
    label = "Anthropic"
    sdk_module = "anthropic"
    client_class = "AsyncAnthropic"
    create_path = "messages.create"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        cache_min_tokens: int | None = CACHE_MIN_TOKENS,
        **options: Unpack[SDKOptions],
    ) -> None:
        self.max_tokens = max_tokens
        self.cache_min_tokens = cache_min_tokens
        super().__init__(model, **options)

    def _request(self, call: ModelCall) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": call.max_tokens or self.max_tokens,
            **messages_body(call.messages, call.tools, cache_min_tokens=self.cache_min_tokens),
        }
        extra = dict(self.extra_body)
        if call.temperature is not None:
            extra["temperature"] = call.temperature
        if extra:
            body["extra_body"] = extra
        return body

    def _reply(self, raw: Mapping[str, Any]) -> ChatResponse:
        return ChatResponse(
            from_anthropic_reply(raw.get("content") or []),
            Usage.from_anthropic(raw.get("usage")),
            _finish(raw.get("stop_reason")),
            raw.get("model", ""),
        )

    def _assembly(self) -> _Assembly:
        return _Assembly()


def messages_body(
    messages: Sequence[Message],
    tools: Sequence[ToolSpec] = (),
    *,
    cache_min_tokens: int | None = CACHE_MIN_TOKENS,
) -> dict[str, Any]:
    """The conversation part of a Messages API request: ``system`` (left out when there is none),
    ``messages`` and ``tools`` (left out when there are none), with prompt-cache breakpoints
    (:func:`~contextmem.formats.anthropic.mark_cache_breakpoints`) when it holds at least
    ``cache_min_tokens`` tokens (``None``: never). What the adapter sends, and ``Request.to_anthropic``."""
    system, wire = to_anthropic(messages)
    body: dict[str, Any] = {"system": system} if system else {}
    body["messages"] = wire
    if tools:
        body["tools"] = [t.to_anthropic() for t in tools]
    if cache_min_tokens is not None and _at_least(body, cache_min_tokens):
        body = mark_cache_breakpoints(body)
    return body


def _at_least(body: Mapping[str, Any], tokens: int) -> bool:
    """Whether a request holds ``tokens`` tokens, estimated high (its JSON's punctuation counts too).

    Only a prefix of ``16 * tokens`` characters is counted, so a 200k-token prompt costs no more than a
    small one: no text but whitespace runs needs more than 16 characters a token.
    """
    wire = json.dumps([body.get("tools"), body.get("system"), body["messages"]], ensure_ascii=False)
    return HeuristicCounter().count_text(wire[: 16 * tokens]) >= tokens


# --- reading responses --------------------------------------------------------------------------


def _finish(stop_reason: str | None) -> str | None:
    return _FINISH.get(stop_reason, stop_reason) if stop_reason else None


@dataclass
class _Assembly:
    """Folds stream events into the final blocks, yielding text, thinking and finished tool calls."""

    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    model: str = ""

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        index = event.get("index", 0)
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self._merge_usage(message.get("usage"))
        elif kind == "content_block_start":
            self.blocks[index] = dict(event.get("content_block") or {})
            if self.blocks[index].get("type") == "tool_use":
                self.partial_json[index] = []
        elif kind == "content_block_delta":
            return self._delta(index, event.get("delta") or {})
        elif kind == "content_block_stop" and index in self.partial_json:
            block = self.blocks[index]
            block["input"] = json.loads("".join(self.partial_json.pop(index)) or "{}")
            return [StreamEvent("tool_call", block.get("name", ""))]
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self._merge_usage(event.get("usage"))
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[StreamEvent]:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
            return [StreamEvent("text", delta.get("text", ""))]
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            return [StreamEvent("reasoning", delta.get("thinking", ""))]
        if kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(delta.get("partial_json", ""))
        return []

    def finish(self) -> list[StreamEvent]:
        return []  # each tool call was handed out at its content_block_stop

    def _merge_usage(self, usage: Mapping[str, Any] | None) -> None:
        # message_delta carries cumulative counts; a null there means "unchanged".
        self.usage.update({k: v for k, v in (usage or {}).items() if v is not None})

    def response(self) -> ChatResponse:
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        return ChatResponse(
            from_anthropic_reply(blocks),
            Usage.from_anthropic(self.usage),
            _finish(self.stop_reason),
            self.model,
        )
