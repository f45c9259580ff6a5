"""AnthropicLLM against a real local HTTP server speaking the Messages API, through the real SDK."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextmem.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    ContextOverflowError,
    RateLimitError,
    TransientLLMError,
)
from contextmem.llm.anthropic import AnthropicLLM
from contextmem.llm.base import StreamEvent, ToolSpec, Usage
from contextmem.llm.retry import RetryPolicy
from contextmem.messages import AssistantMessage, ToolCall, system, text_of, tool_result, user

from .servers import Disconnect, FakeAnthropicServer, ServerReply, anthropic_error

FAST = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.01)
ONCE = RetryPolicy(max_attempts=1)
SEARCH = ToolSpec(
    "search_memory",
    "Search long-term memory",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
OVERFLOW = anthropic_error(400, "prompt is too long: 208310 tokens > 200000 maximum")


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(api_key="sk-ant-test") as s:
        yield s


def make_llm(server: FakeAnthropicServer, retry: RetryPolicy = FAST, **kw: object) -> AnthropicLLM:
    return AnthropicLLM("claude-test", base_url=server.base_url, api_key="sk-ant-test", retry=retry, **kw)  # type: ignore[arg-type]


async def collect(llm: AnthropicLLM, *args: object, **kw: object) -> list[StreamEvent]:
    return [event async for event in llm.stream(*args, **kw)]  # type: ignore[arg-type]


async def test_plain_reply_with_separate_system_prompt_and_default_max_tokens(
    server: FakeAnthropicServer,
) -> None:
    server.push(ServerReply("你好！有什么可以帮你？", usage=Usage(30, 11)))

    response = await make_llm(server).complete([system("你是一个记忆助手。"), user("你好")])

    assert response.message == AssistantMessage("你好！有什么可以帮你？")
    assert response.finish_reason == "stop"
    assert response.usage == Usage(30, 11, 0)
    assert response.model == "claude-test"
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.body["system"] == "你是一个记忆助手。"
    assert request.body["messages"] == [{"role": "user", "content": "你好"}]
    assert request.body["max_tokens"] == 4096
    assert "tools" not in request.body
    assert "temperature" not in request.body


async def test_max_tokens_per_llm_and_per_call_and_temperature_are_sent(server: FakeAnthropicServer) -> None:
    server.push("ok", "ok")
    llm = make_llm(server, max_tokens=1000)
    await llm.complete([user("hi")], temperature=0.2)
    await llm.complete([user("hi")], max_tokens=77)
    first, second = (r.body for r in server.requests)
    assert (first["max_tokens"], first["temperature"]) == (1000, 0.2)
    assert second["max_tokens"] == 77
    assert "system" not in first


async def test_tool_use_round_trip_keeps_thinking_signature(server: FakeAnthropicServer) -> None:
    call = ToolCall("toolu_01", "search_memory", '{"query": "用户的生日"}')
    server.push(
        ServerReply("我查一下记忆。", tool_calls=(call,), reasoning="需要查长期记忆"),
        ServerReply("你的生日是5月3日。"),
    )
    llm = make_llm(server)
    history = [user("我的生日是哪天？")]

    first = await llm.complete(history, tools=[SEARCH])
    assert first.message.tool_calls == (call,)
    assert first.message.reasoning == "需要查长期记忆"
    assert text_of(first.message.content) == "我查一下记忆。"
    assert first.finish_reason == "tool_calls"
    assert server.requests[0].body["tools"] == [
        {
            "name": "search_memory",
            "description": "Search long-term memory",
            "input_schema": dict(SEARCH.parameters),
        }
    ]

    history += [first.message, tool_result("toolu_01", "生日：5月3日")]
    second = await llm.complete(history, tools=[SEARCH])

    assert second.message == AssistantMessage("你的生日是5月3日。")
    sent = server.requests[1].body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "需要查长期记忆", "signature": "sig-fake"},
            {"type": "text", "text": "我查一下记忆。"},
            {"type": "tool_use", "id": "toolu_01", "name": "search_memory", "input": {"query": "用户的生日"}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "生日：5月3日"}],
    }


async def test_orphan_tool_result_is_a_bad_request(server: FakeAnthropicServer) -> None:
    with pytest.raises(BadRequestError, match="tool_use_id"):
        await make_llm(server).complete([user("hi"), tool_result("toolu_x", "orphan")])
    assert len(server.requests) == 1


async def test_stream_text_thinking_and_tool_use_deltas(server: FakeAnthropicServer) -> None:
    calls = (
        ToolCall("toolu_a", "search_memory", '{"query": "项目截止日期"}'),
        ToolCall("toolu_b", "search_memory", '{"query": "deadline of project X"}'),
    )
    reply = ServerReply(
        "让我搜索两次。", tool_calls=calls, reasoning="先中文再英文", usage=Usage(500, 60, 400)
    )
    server.push(reply, reply)
    llm = make_llm(server)

    events = await collect(llm, [system("助手"), user("截止日期？")], tools=[SEARCH])

    texts = [e.text for e in events if e.kind == "text"]
    assert len(texts) > 1
    assert "".join(texts) == "让我搜索两次。"
    assert "".join(e.text for e in events if e.kind == "reasoning") == "先中文再英文"
    assert [e.text for e in events if e.kind == "tool_call"] == ["search_memory", "search_memory"]
    done = events[-1]
    assert done.kind == "done" and done.response is not None
    assert done.response.message.tool_calls == calls
    assert done.response.message.extra.get("thinking_signature") == "sig-fake"
    assert done.response.usage == Usage(500, 60, 400)
    assert done.response.finish_reason == "tool_calls"
    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["system"] == "助手"

    # Streaming and not streaming give the same message.
    assert (await llm.complete([user("截止日期？")], tools=[SEARCH])).message == done.response.message


async def test_usage_sums_input_cache_reads_and_cache_writes(server: FakeAnthropicServer) -> None:
    # Wire: input_tokens=100, cache_read=3000, cache_creation=900 -> prompt 4000, cached 3000.
    reply = ServerReply(
        "ok",
        usage=Usage(prompt_tokens=4000, completion_tokens=20, cached_tokens=3000),
        cache_write_tokens=900,
    )
    server.push(reply, reply)
    llm = make_llm(server)

    response = await llm.complete([user("hi")])
    streamed = (await collect(llm, [user("hi")]))[-1].response

    assert response.usage == Usage(4000, 20, 3000)
    assert response.usage.uncached_prompt_tokens == 1000
    assert streamed is not None and streamed.usage == response.usage


async def test_overflow_becomes_context_overflow_error_with_limit(server: FakeAnthropicServer) -> None:
    server.push(OVERFLOW, "never reached")
    with pytest.raises(ContextOverflowError) as info:
        await make_llm(server).complete([user("长" * 100)])
    assert info.value.limit == 200000
    assert len(server.requests) == 1
    assert server.pending == 1  # not retried: the scripted success was never played


async def test_overflow_when_opening_a_stream(server: FakeAnthropicServer) -> None:
    server.push(OVERFLOW)
    with pytest.raises(ContextOverflowError) as info:
        await collect(make_llm(server), [user("hi")])
    assert info.value.limit == 200000


async def test_rate_limit_with_retry_after_is_retried_then_succeeds(server: FakeAnthropicServer) -> None:
    server.push(
        anthropic_error(
            429,
            "Number of request tokens has exceeded your per-minute rate limit",
            type="rate_limit_error",
            headers={"retry-after": "0"},
        ),
        "好了",
    )
    response = await make_llm(server).complete([user("hi")])
    assert text_of(response.message.content) == "好了"
    assert len(server.requests) == 2


async def test_rate_limit_error_carries_retry_after(server: FakeAnthropicServer) -> None:
    server.push(anthropic_error(429, "rate limited", type="rate_limit_error", headers={"retry-after": "12"}))
    with pytest.raises(RateLimitError) as info:
        await make_llm(server, retry=ONCE).complete([user("hi")])
    assert info.value.retry_after == 12.0  # type: ignore[attr-defined]


async def test_overloaded_and_dropped_connection_are_retried(server: FakeAnthropicServer) -> None:
    server.push(anthropic_error(529, "Overloaded", type="overloaded_error"), Disconnect(), "ok")
    response = await make_llm(server).complete([user("hi")])
    assert text_of(response.message.content) == "ok"
    assert len(server.requests) == 3


async def test_500_exhausts_retries_as_transient(server: FakeAnthropicServer) -> None:
    server.default = anthropic_error(500, "Internal server error", type="api_error")
    with pytest.raises(TransientLLMError) as info:
        await make_llm(server).complete([user("hi")])
    assert info.value.status == 500
    assert len(server.requests) == FAST.max_attempts


async def test_wrong_key_is_authentication_error_and_not_retried(server: FakeAnthropicServer) -> None:
    llm = AnthropicLLM("claude-test", base_url=server.base_url, api_key="sk-ant-wrong", retry=FAST)
    with pytest.raises(AuthenticationError) as info:
        await llm.complete([user("hi")])
    assert info.value.status == 401
    assert len(server.requests) == 1


async def test_other_400_is_bad_request_and_not_retried(server: FakeAnthropicServer) -> None:
    server.push(
        anthropic_error(400, "max_tokens: 100000 > 64000, which is the maximum allowed for this model")
    )
    with pytest.raises(BadRequestError) as info:
        await make_llm(server).complete([user("hi")], max_tokens=100000)
    assert not isinstance(info.value, ContextOverflowError)
    assert len(server.requests) == 1


def test_missing_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicLLM("claude-test")
