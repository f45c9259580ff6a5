"""OpenAICompatLLM against a real local HTTP server speaking Chat Completions, through the real SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextmem.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    ContextOverflowError,
    IncompleteReplyError,
    RateLimitError,
    TransientLLMError,
)
from contextmem.formats.openai import from_openai, to_openai
from contextmem.llm._sdk_errors import retry_after_seconds
from contextmem.llm.base import ModelCall, StreamEvent, ToolSpec, Usage
from contextmem.llm.cache import cache_key, keyed
from contextmem.llm.openai_compat import OpenAICompatLLM, _Assembly
from contextmem.llm.retry import RetryPolicy
from contextmem.messages import AssistantMessage, ToolCall, system, text_of, tool_result, user

from .servers import Disconnect, Empty, FakeOpenAIServer, ServerError, ServerReply, openai_error

FAST = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.01)
ONCE = RetryPolicy(max_attempts=1)
WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
OVERFLOW = openai_error(
    400,
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 "
    "tokens. Please reduce the length of the messages.",
    code="context_length_exceeded",
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key="sk-test") as s:
        yield s


def make_llm(server: FakeOpenAIServer, retry: RetryPolicy = FAST, **kw: object) -> OpenAICompatLLM:
    return OpenAICompatLLM("gpt-test", base_url=server.base_url, api_key="sk-test", retry=retry, **kw)  # type: ignore[arg-type]


async def collect(llm: OpenAICompatLLM, *args: object, **kw: object) -> list[StreamEvent]:
    return [event async for event in llm.stream(*args, **kw)]  # type: ignore[arg-type]


async def test_plain_reply_round_trips_chinese_and_sends_what_was_asked(server: FakeOpenAIServer) -> None:
    server.push(ServerReply("你好！我是助手。", usage=Usage(21, 9)))
    llm = make_llm(server, extra_body={"enable_thinking": False})

    response = await llm.complete([system("用中文回答"), user("你好")], max_tokens=256, temperature=0.3)

    assert response.message == AssistantMessage("你好！我是助手。")
    assert response.finish_reason == "stop"
    assert response.usage == Usage(21, 9, 0)
    assert response.model == "gpt-test"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["messages"] == [
        {"role": "system", "content": "用中文回答"},
        {"role": "user", "content": "你好"},
    ]
    assert request.body["max_tokens"] == 256
    assert request.body["temperature"] == 0.3
    assert request.body["enable_thinking"] is False
    assert "tools" not in request.body
    assert "stream" not in request.body


async def test_max_completion_tokens_param_for_reasoning_models(server: FakeOpenAIServer) -> None:
    server.push("ok")
    await make_llm(server, max_tokens_param="max_completion_tokens").complete([user("hi")], max_tokens=50)
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 50
    assert "max_tokens" not in body


async def test_tool_call_round_trip(server: FakeOpenAIServer) -> None:
    call = ToolCall("call_1", "get_weather", '{"city": "北京"}')
    server.push(ServerReply(None, tool_calls=(call,), reasoning="先查天气"), ServerReply("北京晴，25°C。"))
    llm = make_llm(server)
    history = [user("北京天气怎么样？")]

    first = await llm.complete(history, tools=[WEATHER])
    assert first.message.tool_calls == (call,)
    assert first.message.content is None
    assert first.message.reasoning == "先查天气"
    assert first.finish_reason == "tool_calls"
    assert server.requests[0].body["tools"] == [WEATHER.to_openai()]

    history += [first.message, tool_result("call_1", "晴，25°C")]
    second = await llm.complete(history, tools=[WEATHER])

    assert text_of(second.message.content) == "北京晴，25°C。"
    sent = server.requests[1].body["messages"]
    assert sent[1]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "北京"}'},
        }
    ]
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "晴，25°C"}


async def test_tool_result_without_its_call_is_a_bad_request(server: FakeOpenAIServer) -> None:
    # The fake server enforces the pairing rule like OpenAI does, so broken histories fail loudly.
    with pytest.raises(BadRequestError, match="role 'tool' must be a response"):
        await make_llm(server).complete([user("hi"), tool_result("call_9", "orphan")])
    assert len(server.requests) == 1


async def test_stream_text_reasoning_and_tool_call_deltas(server: FakeOpenAIServer) -> None:
    calls = (
        ToolCall("call_a", "get_weather", '{"city": "上海"}'),
        ToolCall("call_b", "get_weather", '{"city": "Paris, France"}'),
    )
    reply = ServerReply(
        "我来查一下两个城市。", tool_calls=calls, reasoning="需要两次调用", usage=Usage(300, 40, 256)
    )
    server.push(reply, reply)
    llm = make_llm(server)

    events = await collect(llm, [user("上海和巴黎的天气？")], tools=[WEATHER])

    texts = [e.text for e in events if e.kind == "text"]
    assert len(texts) > 1  # really streamed in pieces
    assert "".join(texts) == "我来查一下两个城市。"
    assert "".join(e.text for e in events if e.kind == "reasoning") == "需要两次调用"
    assert [e.text for e in events if e.kind == "tool_call"] == ["get_weather", "get_weather"]
    done = events[-1]
    assert done.kind == "done" and done.response is not None
    assert done.response.message.tool_calls == calls
    assert done.response.message.reasoning == "需要两次调用"
    assert done.response.usage == Usage(300, 40, 256)
    assert done.response.finish_reason == "tool_calls"
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}

    # Streaming and not streaming give the same message.
    assert (
        await llm.complete([user("上海和巴黎的天气？")], tools=[WEATHER])
    ).message == done.response.message


async def test_usage_reports_cached_prompt_tokens(server: FakeOpenAIServer) -> None:
    server.push(ServerReply("ok", usage=Usage(prompt_tokens=2048, completion_tokens=12, cached_tokens=1920)))
    response = await make_llm(server).complete([user("hi")])
    assert response.usage == Usage(2048, 12, 1920)
    assert response.usage.uncached_prompt_tokens == 128


async def test_overflow_becomes_context_overflow_error_with_limit_and_is_not_retried(
    server: FakeOpenAIServer,
) -> None:
    server.push(OVERFLOW, "never reached")
    with pytest.raises(ContextOverflowError) as info:
        await make_llm(server).complete([user("很长的对话" * 10)])
    assert info.value.limit == 128000
    assert info.value.status == 400
    assert len(server.requests) == 1


async def test_overflow_in_chinese_from_a_compatible_server(server: FakeOpenAIServer) -> None:
    server.push(openai_error(400, "Range of input length should be [1, 30720]", code="InvalidParameter"))
    with pytest.raises(ContextOverflowError) as info:
        await make_llm(server).complete([user("你好")])
    assert info.value.limit == 30720


async def test_overflow_when_opening_a_stream(server: FakeOpenAIServer) -> None:
    server.push(OVERFLOW)
    with pytest.raises(ContextOverflowError) as info:
        await collect(make_llm(server), [user("hi")])
    assert info.value.limit == 128000


async def test_rate_limit_with_retry_after_is_retried_then_succeeds(server: FakeOpenAIServer) -> None:
    server.push(
        openai_error(429, "Rate limit reached for requests", type="requests", headers={"Retry-After": "0"}),
        ServerReply("终于成功"),
    )
    response = await make_llm(server).complete([user("hi")])
    assert text_of(response.message.content) == "终于成功"
    assert len(server.requests) == 2


async def test_rate_limit_error_carries_retry_after(server: FakeOpenAIServer) -> None:
    server.push(openai_error(429, "Rate limit reached", type="requests", headers={"Retry-After": "7"}))
    with pytest.raises(RateLimitError) as info:
        await make_llm(server, retry=ONCE).complete([user("hi")])
    assert info.value.retry_after == 7.0  # type: ignore[attr-defined]
    assert info.value.status == 429


async def test_server_error_and_dropped_connection_are_retried(server: FakeOpenAIServer) -> None:
    server.push(
        openai_error(500, "The server had an error while processing your request.", type="server_error"),
        Disconnect(),
        ServerReply("ok"),
    )
    response = await make_llm(server).complete([user("hi")])
    assert text_of(response.message.content) == "ok"
    assert len(server.requests) == 3


async def test_persistent_server_error_gives_up_after_the_policy(server: FakeOpenAIServer) -> None:
    server.default = ServerError(503, {"error": {"message": "overloaded", "type": "server_error"}})
    with pytest.raises(TransientLLMError) as info:
        await make_llm(server).complete([user("hi")])
    assert info.value.status == 503
    assert len(server.requests) == FAST.max_attempts


async def test_timeout_is_transient(server: FakeOpenAIServer) -> None:
    server.push(ServerReply("too late", delay=0.5))
    with pytest.raises(TransientLLMError):
        await make_llm(server, retry=ONCE, timeout=0.05).complete([user("hi")])


async def test_wrong_key_is_authentication_error_and_not_retried(server: FakeOpenAIServer) -> None:
    llm = OpenAICompatLLM("gpt-test", base_url=server.base_url, api_key="sk-wrong", retry=FAST)
    with pytest.raises(AuthenticationError) as info:
        await llm.complete([user("hi")])
    assert info.value.status == 401
    assert len(server.requests) == 1


async def test_other_400_is_bad_request_not_overflow_and_not_retried(server: FakeOpenAIServer) -> None:
    server.push(openai_error(400, "Invalid value for 'temperature': must be <= 2.", code="invalid_value"))
    with pytest.raises(BadRequestError) as info:
        await make_llm(server).complete([user("hi")], temperature=5)
    assert not isinstance(info.value, ContextOverflowError)
    assert "temperature" in str(info.value)
    assert len(server.requests) == 1


async def test_keyless_self_hosted_server_needs_no_api_key() -> None:
    with FakeOpenAIServer(["ok"]) as server:
        llm = OpenAICompatLLM("qwen2.5:0.5b", base_url=server.base_url, retry=ONCE)
        assert text_of((await llm.complete([user("hi")])).message.content) == "ok"
        assert server.requests[0].headers["authorization"].startswith("Bearer ")


def test_hosted_openai_without_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAICompatLLM("gpt-4o")


def test_retry_after_parsing() -> None:
    assert retry_after_seconds({"retry-after": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_stream_assembly_splits_calls_that_reuse_an_index_and_fills_missing_ids() -> None:
    # Some compatible servers send every tool call at index 0, or without ids; the fold still separates them.
    def call_chunk(piece: dict[str, object]) -> dict[str, object]:
        return {"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}

    assembly = _Assembly()
    for piece in (
        {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x":'}},
        {"index": 0, "function": {"arguments": " 1}"}},
        {"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}},
        {"index": 5, "function": {"name": "h"}},
    ):
        assert assembly.feed(call_chunk(piece)) == []
    assembly.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    calls = assembly.response().message.tool_calls
    assert calls[:2] == (ToolCall("a", "f", '{"x": 1}'), ToolCall("b", "g", "{}"))
    assert (calls[2].name, calls[2].arguments) == ("h", "{}") and calls[2].id.startswith("call_")
    # a filled id is fresh each time, never the same in two turns (a reused id is refused by add)
    again = _Assembly()
    again.feed(call_chunk({"index": 0, "function": {"name": "h"}}))
    again.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert again.response().message.tool_calls[0].id != calls[2].id


async def test_strict_server_shim_sends_empty_content_beside_tool_calls(server: FakeOpenAIServer) -> None:
    """llama.cpp's server rejects ``content: null`` beside ``tool_calls`` (the Agents SDK and langchain
    send it); opted in, the wire copy carries ``""`` and the history keeps its own form."""
    call = ToolCall("call_1", "get_weather", '{"city": "Oslo"}')
    from_agents_sdk = from_openai({"role": "assistant", "content": None, "tool_calls": [_wire(call)]})
    history = [user("weather?"), from_agents_sdk, tool_result("call_1", "sunny")]
    server.push("ok", "ok")
    await make_llm(server).complete(history)
    await make_llm(server, strict_server=True).complete(history)
    default, strict = (r.body["messages"][1] for r in server.requests)
    assert default["content"] is None and default["tool_calls"] == [_wire(call)]
    assert strict["content"] == "" and strict["tool_calls"] == [_wire(call)]
    assert to_openai(from_agents_sdk)["content"] is None  # the stored message is unchanged


def _wire(call: ToolCall) -> dict[str, object]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def test_a_stream_that_ends_unfinished_is_an_error_never_a_message() -> None:
    """A dropped connection, or llama.cpp's server giving up on an over-long prompt (an empty stream)."""
    partial = _Assembly("openai:x")
    partial.feed({"choices": [{"index": 0, "delta": {"content": "The answer is"}}]})
    with pytest.raises(IncompleteReplyError, match=r"without a finish_reason \(13 characters"):
        partial.response()
    with pytest.raises(IncompleteReplyError, match="without a finish_reason"):
        _Assembly("openai:x").response()  # HTTP 200, empty body


@pytest.mark.parametrize("stream", [False, True])
async def test_an_empty_reply_is_an_error_never_a_message(server: FakeOpenAIServer, stream: bool) -> None:
    server.push(ServerReply(""), ServerReply(""))  # an empty stream is asked once more, without streaming
    llm = make_llm(server)
    with pytest.raises(IncompleteReplyError, match="empty reply"):
        if stream:
            await collect(llm, [user("hi")])
        else:
            await llm.complete([user("hi")])


@pytest.mark.parametrize("content_type", ["text/plain", "application/json"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_answering_an_empty_body_is_an_incomplete_reply(
    server: FakeOpenAIServer, stream: bool, content_type: str
) -> None:
    """HTTP 200 with nothing in it (an empty stream, then an empty non-streamed retry): the SDK hands the
    body back as text, or fails to parse it; either is a typed error, never an ``AttributeError``."""
    server.push(Empty(content_type), Empty(content_type))
    llm = make_llm(server, retry=ONCE)
    with pytest.raises(
        IncompleteReplyError, match=r"answered with an empty body; .* Fix: check that base_url"
    ):
        if stream:
            await collect(llm, [user("hi")])
        else:
            await llm.complete([user("hi")])
    assert [r.body.get("stream") for r in server.requests] == ([True, None] if stream else [None])


async def test_the_summary_degrades_to_the_draft_on_an_empty_server(
    server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The background summary over such a server: the extractive draft, one warning line, no traceback."""
    from contextmem.summarize import Summarizer
    from contextmem.tokens import get_counter

    server.default = Empty()
    history = [user("Deploy cart-api to staging on port 8443."), AssistantMessage("Deployed on 8443.")]
    with caplog.at_level("WARNING", logger="contextmem"):
        summary = await Summarizer(make_llm(server, retry=ONCE), get_counter("heuristic")).summarize(
            None, history
        )
    assert summary.source == "extractive" and "IncompleteReplyError" in (summary.fallback_reason or "")
    assert "8443" in summary.render()
    [record] = [r for r in caplog.records if r.name.startswith("contextmem")]
    assert record.levelname == "WARNING" and record.exc_info is None and "\n" not in record.getMessage()


def test_a_turn_on_an_empty_server_fails_in_one_line_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31, item 3: the CLI's turn fails with the typed error; the background summary (due after the
    second turn) falls back quietly instead of printing a traceback."""
    from contextmem.cli.main import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("CONTEXTMEM_COMPACT_MESSAGE_THRESHOLD", "3")
    with FakeOpenAIServer([ServerReply("one"), ServerReply("two")], default=Empty()) as server:
        argv = ["--workspace", str(tmp_path), "--embedder", "hash", "--model", "openai:gpt-test"]
        argv += ["--base-url", server.base_url, "--context-window", "32768", "ask", "--session", "s"]
        assert main([*argv, "first question"]) == 0
        assert main([*argv, "second question"]) == 0
        assert main([*argv, "third question"]) == 1
        summary_calls = [r for r in server.requests if "running memory" in r.body["messages"][0]["content"]]
    err = capsys.readouterr().err
    assert summary_calls, "the background summary was not asked: the test no longer covers it"
    assert "Traceback" not in err and "AttributeError" not in err
    [line] = err.strip().splitlines()
    assert "answered with an empty body" in line and "Fix:" in line


# --- prompt_cache_key -----------------------------------------------------------------------------


async def test_prompt_cache_key_is_sent_only_while_a_caller_set_one(server: FakeOpenAIServer) -> None:
    server.push("one", "two", "three")
    llm = make_llm(server, send_cache_key=True)

    with cache_key("session-a"):
        await llm.complete([user("hi")])
    events = [e async for e in keyed("session-b", llm.stream([user("hi")]))]
    await llm.complete([user("hi")])

    assert events[-1].kind == "done"
    keyed_call, streamed, plain = (r.body for r in server.requests)
    assert keyed_call["prompt_cache_key"] == "session-a"
    assert streamed["prompt_cache_key"] == "session-b" and streamed["stream"] is True
    assert "prompt_cache_key" not in plain


async def test_prompt_cache_key_goes_by_default_to_openai_itself_only(server: FakeOpenAIServer) -> None:
    server.push("ok")
    call = ModelCall([user("hi")])

    with cache_key("session-a"):
        await make_llm(server).complete([user("hi")])  # a local server: vLLM warns, strict ones reject it
        openai = OpenAICompatLLM("gpt-4o", api_key="sk-test")._request(call)
        deepseek = OpenAICompatLLM("deepseek-chat", provider="deepseek", api_key="sk-test")._request(call)
        off = OpenAICompatLLM("gpt-4o", api_key="sk-test", send_cache_key=False)._request(call)

    assert "prompt_cache_key" not in server.requests[0].body
    assert openai["prompt_cache_key"] == "session-a"
    assert "prompt_cache_key" not in deepseek and "prompt_cache_key" not in off
