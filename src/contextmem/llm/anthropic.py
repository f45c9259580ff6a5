"""Anthropic Messages API through the official ``anthropic`` SDK.

The system prompt travels in the ``system`` parameter, tool results as ``tool_result`` blocks, thinking
as ``thinking`` blocks with their signature (all mapped by :mod:`contextmem.formats.anthropic`).
``max_tokens`` is required by the API: 4096 unless the call or the constructor says otherwise.

Usage is normalised to what the other adapters report: Anthropic counts cache reads and cache writes
*apart from* ``input_tokens``, so ``prompt_tokens = input + cache_read + cache_creation`` and
``cached_tokens = cache_read``. SDK exceptions are translated in :meth:`AnthropicLLM._translate` only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, LLMError, MissingExtraError
from ..formats.anthropic import from_anthropic, to_anthropic
from ..messages import AssistantMessage, Message, TextPart
from ._sdk_errors import guarded, translate_sdk_error
from .base import ChatResponse, StreamEvent, ToolSpec, Usage
from .registry import api_key_from_env
from .retry import RetryPolicy, call_with_retries

__all__ = ["ANTHROPIC_BASE_URL", "DEFAULT_MAX_TOKENS", "AnthropicLLM"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096

# Anthropic's stop reasons in the vocabulary the rest of contextmem (and OpenAI) uses.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _import_sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingExtraError("anthropic", "anthropic") from exc
    return anthropic


class AnthropicLLM:
    """An :class:`~.base.LLM` over ``POST {base_url}/v1/messages``.

    ``extra_body`` is merged into every request (e.g. ``{"thinking": {"type": "adaptive"}}``); a
    ``temperature`` goes there too, because the SDK no longer has a typed parameter for it.

    Retries cover a whole ``complete`` call and the *opening* of a stream; an error after a stream has
    yielded events is raised, translated, since the deltas already handed out cannot be taken back.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        self._sdk = _import_sdk()
        if api_key is None:
            api_key = api_key_from_env("anthropic")
        if api_key is None:
            raise ConfigError(
                f"no API key for Anthropic model {model!r}. Fix: pass api_key=... or set ANTHROPIC_API_KEY."
            )
        self.model = model
        self.name = name or f"anthropic:{model}"
        self.base_url = base_url or ANTHROPIC_BASE_URL
        self.retry = retry or RetryPolicy()
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self._client = self._sdk.AsyncAnthropic(
            api_key=api_key, base_url=self.base_url, timeout=timeout, max_retries=0
        )

    def __repr__(self) -> str:
        return f"AnthropicLLM({self.model!r}, base_url={self.base_url!r})"

    def _translate(self, exc: Exception) -> LLMError | None:
        """The one place where ``anthropic`` SDK exceptions become :mod:`contextmem.errors`."""
        return translate_sdk_error(self._sdk, exc, self.name, self.base_url)

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None,
        temperature: float | None,
    ) -> dict[str, Any]:
        system, wire = to_anthropic(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "max_tokens": max_tokens or self.max_tokens,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in tools
            ]
        extra = {**self.extra_body, **({"temperature": temperature} if temperature is not None else {})}
        if extra:
            body["extra_body"] = extra
        return body

    async def _create(self, body: dict[str, Any]) -> Any:
        create = self._client.messages.create
        return await call_with_retries(lambda: guarded(lambda: create(**body), self._translate), self.retry)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        reply = (await self._create(self._request(messages, tools, max_tokens, temperature))).to_dict()
        finish = reply.get("stop_reason")
        return ChatResponse(
            _assistant(reply.get("content") or []),
            _usage(reply.get("usage") or {}),
            _finish(finish),
            reply.get("model", ""),
        )

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[StreamEvent]:
        body = self._request(messages, tools, max_tokens, temperature)
        events = await self._create({**body, "stream": True})
        assembly = _Assembly()
        try:
            iterator = aiter(events)
            while True:
                try:
                    event = await guarded(lambda: anext(iterator), self._translate)
                except StopAsyncIteration:
                    break
                for out in assembly.feed(event.to_dict()):
                    yield out
        finally:
            await events.close()
        yield StreamEvent("done", response=assembly.response())


# --- reading responses --------------------------------------------------------------------------


def _assistant(blocks: Sequence[Mapping[str, Any]]) -> AssistantMessage:
    """Blocks of a reply -> our message; a reply of one plain text block reads as a string, like OpenAI's."""
    clean = [{k: v for k, v in b.items() if v is not None} for b in blocks]
    (message,) = from_anthropic([{"role": "assistant", "content": clean}])
    assert isinstance(message, AssistantMessage)  # the role says so
    content = message.content
    if isinstance(content, tuple) and len(content) == 1 and isinstance(content[0], TextPart):
        message = dataclasses.replace(message, content=content[0].text)
    return message


def _finish(stop_reason: str | None) -> str | None:
    return _FINISH.get(stop_reason, stop_reason) if stop_reason else None


def _usage(usage: Mapping[str, Any]) -> Usage:
    read = int(usage.get("cache_read_input_tokens") or 0)
    written = int(usage.get("cache_creation_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + read + written
    return Usage(prompt, int(usage.get("output_tokens") or 0), read)


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

    def _merge_usage(self, usage: Mapping[str, Any] | None) -> None:
        # message_delta carries cumulative counts; a null there means "unchanged".
        self.usage.update({k: v for k, v in (usage or {}).items() if v is not None})

    def response(self) -> ChatResponse:
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        return ChatResponse(_assistant(blocks), _usage(self.usage), _finish(self.stop_reason), self.model)
