"""The provider-reply door (issue 49): what a server answers, read by the real SDKs, hostile in every field.

The OpenAI-compatible and Anthropic adapters read a reply's text, reasoning, tool calls (id, name,
arguments), usage numbers and, for a failed call, the error body. Each test here draws
:func:`hostile_text` (or hostile numbers) into those fields, serves them from a local HTTP server
(:mod:`tests.servers`) through the SDK's real HTTP stack and SSE parser, and checks the contract:

* the reply is a message stored exactly (its fields as sent, and :func:`encode_message` reads it back
  equal), or a typed :class:`ContextmemError` of one printable line — never a raw exception, never a
  pydantic warning on the user's stderr;
* an error built from the provider's body (``error.message`` of a 400, 401, 429, 500, 529) is one line with
  no terminal control in it, whatever the body held (:func:`assert_one_line_error`);
* usage counts are whole numbers from 0 to :data:`MAX_TOKEN_COUNT`, or the reply is refused in one line.
"""

from __future__ import annotations

import asyncio
import json
import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.errors import ContextmemError, LLMError
from contextmem.llm.anthropic_api import AnthropicLLM
from contextmem.llm.base import MAX_TOKEN_COUNT, ChatResponse, Usage
from contextmem.llm.openai_compat import OpenAICompatLLM
from contextmem.llm.retry import RetryPolicy
from contextmem.messages import ToolCall, text_of, user
from contextmem.store.codec import decode_message, encode_message

from ..servers import (
    FakeAnthropicServer,
    FakeOpenAIServer,
    ServerError,
    ServerReply,
    anthropic_error,
    openai_error,
)
from .doors import SURROGATES, assert_one_line_error, hostile_text

ONCE = RetryPolicy(max_attempts=1)
Server = FakeOpenAIServer | FakeAnthropicServer
LLM = OpenAICompatLLM | AnthropicLLM


def _openai(server: Server) -> LLM:
    return OpenAICompatLLM("gpt-test", base_url=server.base_url, api_key="sk-test", retry=ONCE)


def _anthropic(server: Server) -> LLM:
    return AnthropicLLM("claude-test", base_url=server.base_url, api_key="sk-ant-test", retry=ONCE)


PROVIDERS: dict[str, tuple[type[Server], Callable[[Server], LLM]]] = {
    "openai": (FakeOpenAIServer, _openai),
    "anthropic": (FakeAnthropicServer, _anthropic),
}


async def _call(llm: LLM, stream: bool) -> ChatResponse:
    if not stream:
        return await llm.complete([user("hi")])
    events = [event async for event in llm.stream([user("hi")])]
    assert events[-1].kind == "done" and events[-1].response is not None, events[-1]
    return events[-1].response


def outcome(provider: str, scripted: Any, *, stream: bool = False) -> ChatResponse | ContextmemError:
    """Serve ``scripted`` once and call the provider's adapter: the reply, or the typed error it raised.
    Any other exception, and any warning the SDK's models emit, escapes and fails the test."""
    server_type, make = PROVIDERS[provider]

    async def run() -> ChatResponse | ContextmemError:
        with server_type([scripted]) as server:
            llm = make(server)
            try:
                return await _call(llm, stream)
            except ContextmemError as exc:
                return exc
            finally:
                await llm._client.close()  # on this loop, which asyncio.run closes next

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # pydantic's serializer warnings go to the user's stderr
        return asyncio.run(run())


def raw_reply(body: dict[str, Any]) -> ServerError:
    """A 200 whose body is ``body`` exactly as written, escaped to ASCII (so lone surrogates, NaN and
    numbers past any integer type survive the wire as JSON text)."""
    return ServerError(200, json.dumps(body, allow_nan=True))


def completion(provider: str, *, text: str = "ok", usage: Any = None) -> dict[str, Any]:
    """A whole non-streamed reply in the provider's shape, with ``text`` and ``usage`` as given."""
    if provider == "openai":
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]} | (
            {} if usage is None else {"usage": usage}
        )
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
    } | ({} if usage is None else {"usage": usage})


def assert_stored_exactly(response: ChatResponse) -> None:
    message = response.message
    assert decode_message(encode_message(message)) == message


def assert_counts(usage: Usage) -> None:
    for count in (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens):
        assert type(count) is int and 0 <= count <= MAX_TOKEN_COUNT, usage


# --- the reply's text, reasoning and tool calls ----------------------------------------------------


# Pinned at 25 in every profile: each example starts an HTTP server and runs the real SDK against it
# (both providers, streamed or not, are what the draws vary).
@settings(max_examples=25, deadline=None)
@given(
    provider=st.sampled_from(sorted(PROVIDERS)),
    stream=st.booleans(),
    text=hostile_text(surrogates=False),
    reasoning=hostile_text(max_size=10, surrogates=False),
    call_id=hostile_text(max_size=5, surrogates=False),
    name=hostile_text(max_size=5, surrogates=False),
    argument=hostile_text(max_size=10, surrogates=False),
)
def test_hostile_reply_fields_come_back_exactly_or_as_one_typed_line(
    provider: str, stream: bool, text: str, reasoning: str, call_id: str, name: str, argument: str
) -> None:
    call = ToolCall(call_id, name, json.dumps({"q": argument}, ensure_ascii=False))
    got = outcome(provider, ServerReply(text, (call,), reasoning or None), stream=stream)
    if isinstance(got, ContextmemError):  # an empty id or name: a reply that cannot be stored
        assert_one_line_error(got)
        assert not (call_id and name), f"a reply with a valid call was refused: {got}"
        return
    assert_stored_exactly(got)
    message = got.message
    assert text_of(message.content) == text
    assert (message.reasoning or "") == reasoning
    [back] = message.tool_calls
    # A streamed call without an id gets one of contextmem's own (unique in the session), as documented.
    made = stream and provider == "openai" and not call_id and back.id.startswith("call_")
    assert (back.id if not made else "", back.name, json.loads(back.arguments)) == (
        call_id,
        name,
        {"q": argument},
    )


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("surrogate", SURROGATES, ids=lambda s: f"U+{ord(s):04X}")
def test_a_lone_surrogate_in_a_reply_is_refused_in_one_line(provider: str, surrogate: str) -> None:
    got = outcome(provider, raw_reply(completion(provider, text=f"ok {surrogate} then")))
    assert isinstance(got, ContextmemError), got
    assert_one_line_error(got)


# --- error bodies ----------------------------------------------------------------------------------

ERROR_BODIES = {"openai": openai_error, "anthropic": anthropic_error}


# Pinned at 30 in every profile: each example starts an HTTP server and runs the real SDK against it.
@settings(max_examples=30, deadline=None)
@given(
    provider=st.sampled_from(sorted(PROVIDERS)),
    status=st.sampled_from([400, 401, 403, 404, 413, 422, 429, 500, 503, 529]),
    message=hostile_text(),
    stream=st.booleans(),
)
def test_an_error_body_becomes_one_typed_line(provider: str, status: int, message: str, stream: bool) -> None:
    error = ERROR_BODIES[provider](status, message)
    scripted = ServerError(status, json.dumps(error.body))  # escaped to ASCII: lone surrogates travel too
    got = outcome(provider, scripted, stream=stream)
    assert isinstance(got, LLMError), got
    assert_one_line_error(got)
    assert len(str(got)) < 1_000


# --- usage numbers ---------------------------------------------------------------------------------

numbers = (
    st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([math.nan, math.inf, -math.inf, 2**53, 2**53 + 1, 2**64, -1, 0.5])
)
values = numbers | st.none() | st.booleans() | hostile_text(max_size=5) | st.lists(st.integers(), max_size=2)


def usage_of(provider: str, a: Any, b: Any, c: Any) -> dict[str, Any]:
    if provider == "openai":
        return {"prompt_tokens": a, "completion_tokens": b, "prompt_tokens_details": {"cached_tokens": c}}
    return {"input_tokens": a, "output_tokens": b, "cache_read_input_tokens": c}


# Pinned at 30 in every profile: each example starts an HTTP server and runs the real SDK against it.
@settings(max_examples=30, deadline=None)
@given(provider=st.sampled_from(sorted(PROVIDERS)), a=values, b=values, c=values)
def test_hostile_usage_numbers_are_counts_or_one_typed_line(provider: str, a: Any, b: Any, c: Any) -> None:
    got = outcome(provider, raw_reply(completion(provider, usage=usage_of(provider, a, b, c))))
    if isinstance(got, ContextmemError):
        assert_one_line_error(got)
        return
    assert_counts(got.usage)


# Pinned at 20 in every profile: each example starts an HTTP server and runs the real SDK against it.
@settings(max_examples=20, deadline=None)
@given(provider=st.sampled_from(sorted(PROVIDERS)), a=numbers, b=numbers)
def test_hostile_usage_numbers_in_a_stream_are_counts_or_one_typed_line(
    provider: str, a: Any, b: Any
) -> None:
    got = outcome(provider, ServerReply("ok", usage=Usage(a, b, 0)), stream=True)
    if isinstance(got, ContextmemError):
        assert_one_line_error(got)
        return
    assert_counts(got.usage)
