"""OpenAI Chat Completions, and every server that speaks it, through the official ``openai`` SDK.

One adapter covers OpenAI and the OpenAI-compatible endpoints (DeepSeek, DashScope/Qwen, Moonshot, Zhipu,
Ollama, vLLM, llama.cpp server): only ``base_url`` and the key differ. The SDK does transport, SSE and
validation; its own retries are off (``max_retries=0``) because :func:`~.retry.call_with_retries` owns the
policy, and it never reads the environment (the key comes from :mod:`.registry`).

Messages are mapped by :mod:`contextmem.formats.openai`; SDK exceptions are translated into the
:mod:`contextmem.errors` tree in :meth:`OpenAICompatLLM._translate` (from :mod:`.sdk`), the one place for
this provider. This module holds only what is OpenAI's own: the request, the reply, usage and the stream fold.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Unpack

from ..errors import IncompleteReplyError
from ..formats.openai import from_openai_reply, messages_to_openai
from ..messages import AssistantMessage, text_of
from ._sdk_errors import connection_error, error_from_response
from .base import ChatResponse, ModelCall, StreamEvent, Usage
from .cache import current_cache_key
from .discovery import discover_window
from .sdk import SDKAdapter, SDKOptions

__all__ = ["OpenAICompatLLM"]

NO_KEY = "no-key"
"""Sent when a self-hosted server (Ollama, vLLM, llama.cpp) needs no key: the SDK insists on one."""


class OpenAICompatLLM(SDKAdapter):
    """An :class:`~.base.LLM` over ``POST {base_url}/chat/completions``.

    ``extra_body`` is merged into every request (e.g. ``{"enable_thinking": False}`` for Qwen);
    ``max_tokens_param`` is ``"max_completion_tokens"`` for OpenAI reasoning models. ``strict_server``
    is an opt-in compatibility shim for llama.cpp's server and other strict ones (setting
    ``strict_server``): ``"content": null`` beside ``tool_calls`` (which the Agents SDK and
    langchain-openai send, and they reject) is sent as ``""``, and a call with tools states
    ``tool_choice: "auto"`` (their default chat format ignores tools without it). History is not changed,
    only the wire copy. Keys, URLs and client options: :mod:`.sdk` and :func:`~.registry.resolve_endpoint`.

    ``send_cache_key`` sends the session's ``prompt_cache_key`` (set by the caller, :mod:`.cache`) so that a
    session's calls share one prompt cache. By default (``None``) it is sent to OpenAI's own endpoint only:
    other servers gain nothing from it, vLLM logs a warning for each request with a field it does not know,
    and strict gateways reject one. ``True`` sends it anywhere (Azure OpenAI, a proxy to OpenAI), ``False``
    nowhere.

    Retries cover a whole ``complete`` call and the *opening* of a stream (see :mod:`.sdk`). A stream that
    ends before anything arrived (llama.cpp's answer to an over-long prompt) is asked once more without
    streaming, so the server's own error (a context overflow, with its limit) is what the caller sees.
    """

    provider = "openai"
    label = "OpenAI"
    sdk_module = "openai"
    client_class = "AsyncOpenAI"
    create_path = "chat.completions.create"
    placeholder_key = NO_KEY
    stream_params = MappingProxyType({"stream": True, "stream_options": {"include_usage": True}})

    def __init__(
        self,
        model: str,
        *,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        strict_server: bool = False,
        send_cache_key: bool | None = None,
        **options: Unpack[SDKOptions],
    ) -> None:
        self.max_tokens_param = max_tokens_param
        self.strict_server = strict_server
        super().__init__(model, **options)
        openai_itself = self.vendor_endpoint and (options.get("provider") or self.provider) == "openai"
        self.send_cache_key = openai_itself if send_cache_key is None else send_cache_key

    async def discover_window(self) -> int | None:
        """Ask the server for its window (:mod:`.discovery`); remember and return it."""
        probing = self._client.with_options(timeout=10.0)

        async def fetch(method: str, url: str, body: Mapping[str, Any] | None) -> Any:
            try:
                if method == "POST":
                    return await probing.post(url, body=body, cast_to=object)
                return await probing.get(url, cast_to=object)
            except self._sdk.APITimeoutError:
                raise
            except self._sdk.APIConnectionError as exc:  # nothing listens there: the one error to report
                raise connection_error(self.name, self.base_url, exc) from exc

        self.context_window = await discover_window(fetch, self.base_url, self.model) or self.context_window
        return self.context_window

    def _request(self, call: ModelCall) -> dict[str, Any]:
        messages = messages_to_openai(call.messages)
        if self.strict_server:
            messages = [_no_null_beside_tool_calls(m) for m in messages]
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if call.tools:
            body["tools"] = [t.to_openai() for t in call.tools]
            if self.strict_server:
                body["tool_choice"] = "auto"
        if call.max_tokens is not None:
            body[self.max_tokens_param] = call.max_tokens
        if call.temperature is not None:
            body["temperature"] = call.temperature
        if self.send_cache_key and (key := current_cache_key()) is not None:
            body["prompt_cache_key"] = key
        if self.extra_body:
            body["extra_body"] = self.extra_body
        return body

    def _reply(self, raw: Mapping[str, Any]) -> ChatResponse:
        choices = raw.get("choices") or []
        if not choices:
            raise error_from_response(self.name, None, raw, {}, "the response has no choices")
        message = from_openai_reply(choices[0].get("message") or {})
        finish = choices[0].get("finish_reason")
        _check_usable(self.name, message, finish, streamed=False)
        return ChatResponse(message, Usage.from_openai(raw.get("usage")), finish, raw.get("model", ""))

    def _assembly(self) -> _Assembly:
        return _Assembly(self.name)

    async def _stream(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        started = False
        try:
            async for event in super()._stream(request):
                started = True
                yield event
        except IncompleteReplyError:
            if started:
                raise
        else:
            return
        # Nothing arrived: ask once without streaming, so the server's own error (or reply) is what we see.
        response = await self._complete(request)
        if text := text_of(response.message.content):
            yield StreamEvent("text", text)
        for call in response.message.tool_calls:
            yield StreamEvent("tool_call", call.name)
        yield StreamEvent("done", response=response)


def _check_usable(provider: str, message: AssistantMessage, finish: str | None, *, streamed: bool) -> None:
    """Raise :class:`IncompleteReplyError` for a reply that must not become a stored message."""
    if streamed and finish is None:
        got = len(text_of(message.content))
        raise IncompleteReplyError(
            f"{provider}: the stream ended without a finish_reason ({got} characters received): the server "
            "stopped before finishing the reply; nothing was stored. Fix: retry; if it repeats on long "
            "conversations, the prompt may exceed the server's real context — set context_window "
            "(--context-window) to it (llama.cpp: its n_ctx).",
            provider=provider,
        )
    if not text_of(message.content).strip() and not message.tool_calls:
        raise IncompleteReplyError(
            f"{provider}: the model gave an empty reply (finish_reason {finish!r}); nothing was stored. Fix: "
            "retry; with finish_reason 'length' raise max_tokens; if it repeats on long conversations, set "
            "context_window (--context-window) to the server's real context.",
            provider=provider,
        )


def _no_null_beside_tool_calls(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with ``"content": ""`` where it had ``null`` (or none) beside tool calls."""
    if message.get("tool_calls") and message.get("content") is None:
        return {**message, "content": ""}
    return message


# --- reading responses --------------------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Assembly:
    """Folds stream chunks into the final message, yielding text and reasoning deltas as they arrive."""

    provider: str = "openai"
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = Usage.from_openai(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.reasoning.append(reasoning)
                events.append(StreamEvent("reasoning", reasoning))
            if isinstance(delta.get("content"), str) and delta["content"]:
                self.text.append(delta["content"])
                events.append(StreamEvent("text", delta["content"]))
            for piece in delta.get("tool_calls") or ():
                self._call_piece(piece)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return events

    def finish(self) -> list[StreamEvent]:
        """One ``tool_call`` event per call: its pieces are only complete once the stream has ended."""
        return [StreamEvent("tool_call", call.name) for call in self.calls.values()]

    def _call_piece(self, piece: Mapping[str, Any]) -> None:
        index = piece.get("index", len(self.calls))
        call = self.calls.get(index)
        # Some servers reuse index 0 for every call; a new id then starts a new call.
        if call is not None and piece.get("id") and call.id and piece["id"] != call.id:
            index = max(self.calls) + 1
            call = None
        if call is None:
            call = self.calls[index] = _PartialCall()
        fn = piece.get("function") or {}
        call.id = call.id or piece.get("id") or ""
        call.name = call.name or fn.get("name") or ""
        if fn.get("arguments"):
            call.arguments.append(fn["arguments"])

    def response(self) -> ChatResponse:
        message: dict[str, Any] = {"role": "assistant"}
        if self.text:
            message["content"] = "".join(self.text)
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            message["tool_calls"] = [
                {
                    # A few servers stream calls without ids: a fresh one each (an id is never reused).
                    "id": c.id or f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": "".join(c.arguments) or "{}"},
                }
                for c in self.calls.values()
            ]
        reply = from_openai_reply(message)
        _check_usable(self.provider, reply, self.finish_reason, streamed=True)
        return ChatResponse(reply, self.usage, self.finish_reason, self.model)
