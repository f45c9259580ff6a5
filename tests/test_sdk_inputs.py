"""Issue 29: the engine takes what a user's agent loop already has — provider tool dicts, the SDKs' reply
objects, their usage — and hands back requests in either provider's form.

The SDK objects here are the real ``openai`` and ``anthropic`` pydantic models, built from the JSON their
APIs send (``model_validate``), so a field the SDK adds or drops shows up here first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextmem import (
    AssistantMessage,
    ContextEngine,
    ImagePart,
    MessageFormatError,
    Settings,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
    user,
)
from contextmem.engine.types import UsageTotals
from contextmem.llm.anthropic_api import AnthropicLLM
from contextmem.llm.base import ModelCall
from contextmem.testing import InMemorySessionStore

openai_types = pytest.importorskip("openai.types")
anthropic_types = pytest.importorskip("anthropic.types")

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = ToolSpec("weather", "The weather in a city.", SCHEMA)
OPENAI_TOOL = {
    "type": "function",
    "function": {"name": "weather", "description": WEATHER.description, "parameters": SCHEMA},
}
ANTHROPIC_TOOL = {
    "name": "weather",
    "description": WEATHER.description,
    "input_schema": SCHEMA,
    "cache_control": {"type": "ephemeral"},
}


async def _engine(tmp_path: Path) -> ContextEngine:
    return await ContextEngine.open(
        "s",
        store=InMemorySessionStore(),
        settings=Settings(workspace=tmp_path),
        workspace_dir=tmp_path / "files",
    )


def _one_line_with_fix(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and "Fix: " in text, text
    return text


# --- tools -----------------------------------------------------------------------------------------


async def test_build_takes_openai_tool_dicts(tmp_path: Path) -> None:
    """Was: AttributeError: 'dict' object has no attribute 'parameters'."""
    engine = await _engine(tmp_path)
    await engine.add(user("Weather in Oslo?"))
    request = await engine.build("You are helpful.", [OPENAI_TOOL])
    assert request.tools == (WEATHER,)
    assert request.estimate == (await engine.build("You are helpful.", [WEATHER])).estimate


async def test_build_takes_every_tool_form_alike(tmp_path: Path) -> None:
    engine = await _engine(tmp_path)
    await engine.add(user("Weather in Oslo?"))
    forms: list[Any] = [
        WEATHER,
        OPENAI_TOOL,
        OPENAI_TOOL["function"],  # the bare function
        {"type": "function", **OPENAI_TOOL["function"]},  # the Responses API's flat form
        ANTHROPIC_TOOL,  # cache_control is the request's business, not the tool's
        openai_types.chat.ChatCompletionFunctionTool.model_validate(OPENAI_TOOL),
        openai_types.shared.FunctionDefinition.model_validate(OPENAI_TOOL["function"]),
    ]
    request = await engine.build("You are helpful.", forms)
    assert request.tools == (WEATHER,) * len(forms)
    assert ToolSpec.from_openai(OPENAI_TOOL) == ToolSpec.from_anthropic(ANTHROPIC_TOOL) == WEATHER
    assert ToolSpec.from_anthropic(WEATHER.to_anthropic()) == WEATHER
    assert ToolSpec.of({"name": "ping"}) == ToolSpec("ping")  # no schema: a tool without parameters


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        ("weather", "tools[1]"),
        ({"type": "web_search_20250305", "name": "web_search"}, "tools[1].type"),
        ({"type": "function", "function": "weather"}, "tools[1].function"),
        ({"type": "function", "function": {"description": "no name"}}, "tools[1].function.name"),
        ({"name": "weather", "input_schema": "object"}, "tools[1].input_schema"),
        ({"name": "weather", "description": 7}, "tools[1].description"),
    ],
)
async def test_an_unknown_tool_shape_is_a_format_error_naming_it(
    tmp_path: Path, tool: Any, field: str
) -> None:
    engine = await _engine(tmp_path)
    await engine.add(user("hi"))
    with pytest.raises(MessageFormatError) as caught:
        await engine.build("sys", [OPENAI_TOOL, tool])
    assert caught.value.field == field
    _one_line_with_fix(caught.value)


# --- messages --------------------------------------------------------------------------------------

OPENAI_REPLY = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "annotations": [],
    "audio": None,
    "function_call": None,
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    ],
}


async def test_add_takes_the_openai_sdk_reply(tmp_path: Path) -> None:
    """Was: AttributeError: 'ChatCompletionMessage' object has no attribute 'name'."""
    engine = await _engine(tmp_path)
    reply = openai_types.chat.ChatCompletionMessage.model_validate(OPENAI_REPLY)
    await engine.add(
        user("Weather in Oslo?"), reply, {"role": "tool", "tool_call_id": "call_1", "content": "4°C"}
    )
    stored = engine.history.messages[1]
    assert stored == AssistantMessage(tool_calls=(ToolCall("call_1", "weather", '{"city": "Oslo"}'),))
    assert stored.extra == {}  # refusal, annotations, audio, function_call describe that response only
    sent = (await engine.build("sys")).to_openai()
    assert sent[2] == {"role": "assistant", "tool_calls": OPENAI_REPLY["tool_calls"]}


ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"},
        {"type": "text", "text": "Let me look.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo", "unit": None}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 20, "output_tokens": 9},
}


@pytest.mark.parametrize("as_dict", [False, True], ids=["sdk-object", "its-model_dump"])
async def test_add_takes_the_anthropic_sdk_reply_and_tool_result_dicts(tmp_path: Path, as_dict: bool) -> None:
    engine = await _engine(tmp_path)
    reply: Any = anthropic_types.Message.model_validate(ANTHROPIC_REPLY)
    reply = reply.model_dump() if as_dict else reply
    results = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "4°C"},
            {"type": "text", "text": "And tomorrow?"},
        ],
    }
    await engine.add(user("Weather in Oslo?"), reply, results)
    kinds = [m.kind for m in engine.history.messages]
    assert kinds == ["user", "assistant", "tool", "user"]  # one input, several messages
    assistant = engine.history.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.reasoning == "Need the weather."
    assert assistant.content == "Let me look."  # one text block reads as a string, as the adapter reads it
    assert assistant.tool_calls == (ToolCall("toolu_1", "weather", '{"city": "Oslo", "unit": null}'),)
    assert engine.history.messages[2] == ToolMessage("toolu_1", "4°C")
    body = (await engine.build("sys")).to_anthropic()
    assert body["system"] == "sys" and "tools" not in body
    sent = body["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": "Need the weather.", "signature": "sig-1"}  # signed
    assert sent[2] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "weather",
        "input": {"city": "Oslo", "unit": None},
    }
    assert body["messages"][2]["content"][0] == results["content"][0]


async def test_add_takes_anthropic_dicts_by_their_blocks(tmp_path: Path) -> None:
    engine = await _engine(tmp_path)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
    await engine.add(
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "look", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "look", "input": {"again": True}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a cat"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "n/a", "is_error": True},
            ],
        },
    )
    messages = engine.history.messages
    assert messages[0] == UserMessage((TextPart("What is this?"), ImagePart("data:image/png;base64,iVBO")))
    assert [m.kind for m in messages] == ["user", "assistant", "tool", "tool"]
    assert messages[3].extra == {"is_error": True}


async def test_plain_text_and_openai_dicts_read_as_before(tmp_path: Path) -> None:
    engine = await _engine(tmp_path)
    parts = [{"type": "text", "text": "hi"}]
    await engine.add(
        {"role": "user", "content": parts}, {"role": "assistant", "content": "hello", "refusal": None}
    )
    assert engine.history.messages[0] == UserMessage((TextPart("hi"),))
    # a dict the caller wrote is kept as written (lossless), unlike an SDK reply
    assert (await engine.build()).to_openai()[1] == {"role": "assistant", "content": "hello", "refusal": None}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (42, "messages[1]"),
        (
            {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
            "messages[1].content[0].tool_use_id",
        ),
        ({"role": "robot", "content": "x"}, "messages[1].role"),
        (user("\ud800"), "messages[1].content"),
    ],
)
async def test_a_bad_message_names_its_place_and_stores_nothing(tmp_path: Path, bad: Any, field: str) -> None:
    engine = await _engine(tmp_path)
    with pytest.raises(MessageFormatError) as caught:
        await engine.add(user("fine"), bad)
    assert caught.value.field == field
    _one_line_with_fix(caught.value)
    assert len(engine.history) == 0


# --- usage -----------------------------------------------------------------------------------------

CHAT_USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 9,
    "total_tokens": 129,
    "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
}
RESPONSES_USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 64, "cache_write_tokens": 0},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 129,
}
ANTHROPIC_USAGE = {
    "input_tokens": 16,
    "cache_read_input_tokens": 64,
    "cache_creation_input_tokens": 40,
    "output_tokens": 9,
}
EXPECTED = Usage(prompt_tokens=120, completion_tokens=9, cached_tokens=64)


@pytest.mark.parametrize(
    "usage",
    [
        EXPECTED,
        CHAT_USAGE,
        RESPONSES_USAGE,
        ANTHROPIC_USAGE,
        "CompletionUsage",
        "ResponseUsage",
        "anthropic.Usage",
    ],
)
async def test_record_usage_takes_the_usage_as_it_came(tmp_path: Path, usage: Any) -> None:
    sdk = {
        "CompletionUsage": lambda: openai_types.CompletionUsage.model_validate(CHAT_USAGE),
        "ResponseUsage": lambda: openai_types.responses.ResponseUsage.model_validate(RESPONSES_USAGE),
        "anthropic.Usage": lambda: anthropic_types.Usage.model_validate(ANTHROPIC_USAGE),
    }
    if isinstance(usage, str):
        usage = sdk[usage]()
    engine = await _engine(tmp_path)
    await engine.add(user("hi"))
    request = await engine.build("sys")
    assert Usage.of(usage) == EXPECTED
    engine.record_usage(request, usage)
    assert _billed(engine.stats().usage) == (1, 120, 64)
    assert engine.calibration.samples == 1


async def test_record_usage_of_none_records_nothing_and_a_stranger_is_an_error(tmp_path: Path) -> None:
    engine = await _engine(tmp_path)
    await engine.add(user("hi"))
    request = await engine.build("sys")
    engine.record_usage(request, None)  # a stream that reported no usage
    for stranger, field in [
        ({"tokens": 5}, "usage"),
        ({"prompt_tokens": "many"}, "usage.prompt_tokens"),
        (5, "usage"),
    ]:
        with pytest.raises(MessageFormatError) as caught:
            engine.record_usage(request, stranger)
        assert caught.value.field == field
        _one_line_with_fix(caught.value)
    assert _billed(engine.stats().usage) == (0, 0, 0)


def test_the_adapters_read_usage_with_the_same_functions() -> None:
    """One reader per provider shape: what the SDK adapters report is what record_usage records."""
    from contextmem.llm.openai_compat import OpenAICompatLLM

    openai_llm = OpenAICompatLLM("gpt-4o", base_url="http://127.0.0.1:9/v1", api_key="k")
    reply = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    assert openai_llm._reply({**reply, "usage": CHAT_USAGE}).usage == EXPECTED
    anthropic_llm = AnthropicLLM("claude-sonnet-4-5", base_url="http://127.0.0.1:9", api_key="k")
    raw = {"content": [{"type": "text", "text": "hi"}], "usage": ANTHROPIC_USAGE, "stop_reason": "end_turn"}
    assert anthropic_llm._reply(raw).usage == EXPECTED


# --- requests out ----------------------------------------------------------------------------------


async def test_to_anthropic_is_what_the_adapter_sends(tmp_path: Path) -> None:
    """Small or large (cache breakpoints marked past the adapter's threshold), the body is the adapter's."""
    engine = await _engine(tmp_path)
    llm = AnthropicLLM("claude-sonnet-4-5", base_url="http://127.0.0.1:9", api_key="k")
    await engine.add(user("Weather in Oslo?"))
    small = await engine.build("", [ANTHROPIC_TOOL])
    body = small.to_anthropic()
    assert set(body) == {"messages", "tools"}  # no system prompt: no system key
    assert body["tools"] == [WEATHER.to_anthropic()]  # the tool as a spec: the caller's marker is not kept
    assert "cache_control" not in json.dumps(body)  # too small for the cache
    await engine.add({"role": "assistant", "content": "It is cold. " * 800}, user("And tomorrow?"))
    large = await engine.build("You are helpful.", [OPENAI_TOOL])
    body = large.to_anthropic()
    assert body["system"] == [
        {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}
    ]
    sent = llm._request(ModelCall(large.messages, large.tools, max_tokens=large.max_tokens))
    assert {k: v for k, v in sent.items() if k not in ("model", "max_tokens")} == body


def _billed(usage: UsageTotals) -> tuple[int, int, int]:
    """The provider's side of the usage totals: calls, prompt tokens, cached tokens."""
    return usage.calls, usage.prompt_tokens, usage.cached_tokens
