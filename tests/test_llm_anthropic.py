"""AnthropicLLM against a real local HTTP server speaking the Messages API, through the real SDK."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    ContextOverflowError,
    RateLimitError,
    TransientLLMError,
)
from contextmem.formats.anthropic import (
    MAX_CACHE_BREAKPOINTS,
    from_anthropic,
    mark_cache_breakpoints,
    to_anthropic,
)
from contextmem.llm.anthropic_api import AnthropicLLM
from contextmem.llm.base import StreamEvent, ToolSpec, Usage
from contextmem.llm.retry import RetryPolicy
from contextmem.messages import AssistantMessage, Message, ToolCall, system, text_of, tool_result, user

from .servers import Disconnect, FakeAnthropicServer, ServerReply, anthropic_error
from .strategies import histories

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


# --- prompt-cache breakpoints ---------------------------------------------------------------------

EPHEMERAL = {"type": "ephemeral"}


def marked_blocks(body: object) -> list[dict[str, Any]]:
    """Every dict in ``body`` that carries ``cache_control``."""
    if isinstance(body, list):
        return [b for item in body for b in marked_blocks(item)]
    if isinstance(body, dict):
        own = [body] if "cache_control" in body else []
        return own + [b for value in body.values() for b in marked_blocks(value)]
    return []


def two_turns_with_a_tool_step() -> list[Message]:
    call = ToolCall("toolu_9", "search_memory", '{"query": "deadline"}')
    return [
        system("You are a memory assistant."),
        user("When is the launch?"),
        AssistantMessage("On 14 May."),
        user("And the deadline?"),
        AssistantMessage(None, tool_calls=(call,)),
        tool_result("toolu_9", "deadline: 2 May"),
    ]


async def test_cache_breakpoints_mark_system_newest_previous_call_and_previous_turn(
    server: FakeAnthropicServer,
) -> None:
    server.push("2 May.")
    messages = two_turns_with_a_tool_step()
    before = list(messages)

    await make_llm(server, cache_min_tokens=0).complete(messages, tools=[SEARCH])

    body = server.requests[0].body
    mark = {"cache_control": EPHEMERAL}
    assert body["system"] == [{"type": "text", "text": "You are a memory assistant.", **mark}]
    assert "cache_control" not in body["tools"][-1]  # the system block's marker covers the tools too
    wire = body["messages"]
    assert wire[0] == {"role": "user", "content": "When is the launch?"}
    assert wire[1]["content"] == [{"type": "text", "text": "On 14 May.", **mark}]  # previous turn's end
    assert wire[2]["content"] == [{"type": "text", "text": "And the deadline?", **mark}]  # previous call
    assert "cache_control" not in wire[3]["content"][-1]
    assert wire[4]["content"][-1]["cache_control"] == EPHEMERAL  # the newest message
    assert len(marked_blocks(body)) == 4
    # Only the wire copy is marked: the history is as it was, and maps to Anthropic without markers.
    assert messages == before and messages == two_turns_with_a_tool_step()
    assert marked_blocks(list(to_anthropic(messages))) == []


async def test_cache_breakpoints_stream_and_mark_the_last_tool_without_a_system_prompt(
    server: FakeAnthropicServer,
) -> None:
    server.push("ok")
    messages = [m for m in two_turns_with_a_tool_step() if m.kind != "system"]

    events = await collect(make_llm(server, cache_min_tokens=0), messages, tools=[SEARCH])

    assert events[-1].kind == "done"
    body = server.requests[0].body
    assert body["stream"] is True and "system" not in body
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert len(marked_blocks(body)) == 4


async def test_cache_breakpoints_keep_the_callers_markers_within_four(server: FakeAnthropicServer) -> None:
    server.push("ok")
    theirs = {"type": "ephemeral", "ttl": "1h"}
    history = from_anthropic(
        [
            {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": theirs}]},
            {"role": "assistant", "content": [{"type": "text", "text": "b", "cache_control": theirs}]},
            {"role": "user", "content": [{"type": "text", "text": "c", "cache_control": theirs}]},
            {"role": "assistant", "content": "d"},
            {"role": "user", "content": "e"},
        ],
        system="s",
    )

    await make_llm(server, cache_min_tokens=0).complete(history)

    body = server.requests[0].body
    marks = marked_blocks(body)
    assert len(marks) == 4
    assert [m["cache_control"] for m in marks].count(theirs) == 3  # all of the caller's are kept
    assert body["system"][0]["cache_control"] == EPHEMERAL  # the one slot left: tools + system


async def test_small_requests_and_cache_hints_off_are_sent_unmarked(server: FakeAnthropicServer) -> None:
    server.push("ok", "ok", "ok")
    big: list[Message] = [
        system("Facts: " + "the deploy window is Tuesday 10:00 to 12:00 UTC. " * 200),
        user("When?"),
    ]

    await make_llm(server).complete([system("short"), user("hi")])  # far below 1024 tokens
    await make_llm(server).complete(big)
    await make_llm(server, cache_min_tokens=None).complete(big)

    small, marked, off = (r.body for r in server.requests)
    assert small["system"] == "short" and marked_blocks(small) == []
    assert marked["system"][0]["cache_control"] == EPHEMERAL
    question = {"type": "text", "text": "When?", "cache_control": EPHEMERAL}
    assert marked["messages"] == [{"role": "user", "content": [question]}]
    assert isinstance(off["system"], str) and marked_blocks(off) == []


def _unmarked(value: object) -> object:
    """``value`` without cache markers, every string content or system as the text block it stands for."""
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    for key in ("content", "system"):
        if isinstance(out.get(key), str):
            out[key] = [{"type": "text", "text": out[key]}]
    return out


# Pinned at 150 in every profile: each example builds and checks Anthropic requests (~0.1 s).
@settings(max_examples=150, deadline=None)
@given(histories(max_turns=5), st.booleans(), st.booleans())
def test_cache_breakpoints_change_nothing_but_markers_and_never_exceed_four(
    history: list[Message], with_system: bool, with_tools: bool
) -> None:
    prompt, wire = to_anthropic([system("You help."), *history] if with_system else history)
    body: dict[str, object] = {"model": "m", "messages": wire, "max_tokens": 10}
    if prompt:
        body["system"] = prompt
    if with_tools:
        body["tools"] = [{"name": "search", "input_schema": {"type": "object"}}]
    before = copy.deepcopy(body)

    marked = mark_cache_breakpoints(body)

    assert body == before  # the caller's body (and the history it came from) is untouched
    marks = marked_blocks(marked)
    assert len(marks) <= MAX_CACHE_BREAKPOINTS
    assert all(m.get("type") not in ("thinking", "redacted_thinking") for m in marks)
    assert all(m.get("type") != "text" or m.get("text") for m in marks)
    key = "system" if prompt else "tools" if with_tools else None
    if key:
        assert isinstance(marked[key], list) and "cache_control" in marked[key][-1]
    assert _unmarked(marked) == _unmarked(before)
