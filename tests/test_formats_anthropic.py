"""Anthropic Messages API <-> messages: round trips of realistic conversations, and malformed input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextmem.errors import MessageFormatError
from contextmem.formats.anthropic import from_anthropic, to_anthropic
from contextmem.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"

TOOLS_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "Compare the weather in Paris and 东京."},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Two cities, two calls.", "signature": "EqQBCkYIARgCIkD"},
            {"type": "text", "text": "Checking both."},
            {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}},
            {
                "type": "tool_use",
                "id": "toolu_02",
                "name": "weather",
                "input": {"city": "東京", "units": ["c"]},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "18°C, cloudy"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_02",
                "content": [{"type": "text", "text": "timeout"}],
                "is_error": True,
            },
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Paris is 18°C; Tokyo failed."}]},
]

CORPORA: dict[str, tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]] = {
    "plain text": (
        "You are terse.",
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    ),
    "chinese": (
        "你是一个乐于助人的助手。",
        [
            {"role": "user", "content": "请总结这段对话。"},
            {"role": "assistant", "content": [{"type": "text", "text": "好的，总结如下：……"}]},
        ],
    ),
    "tools, thinking, error result": (None, TOOLS_TURN),
    "images": (
        None,
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
                    {"type": "text", "text": "What differs?"},
                ],
            },
            {"role": "assistant", "content": "The colour."},
        ],
    ),
    "tool result with text after it": (
        None,
        [
            {"role": "user", "content": "ls"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "sh", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt", "is_error": False},
                    {"type": "text", "text": "now cat it"},
                ],
            },
        ],
    ),
    "redacted thinking and unknown blocks are kept": (
        None,
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
                    },
                    {"type": "text", "text": "summarise", "cache_control": {"type": "ephemeral"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "first", "signature": "s1"},
                    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                    {
                        "type": "text",
                        "text": "Done.",
                        "citations": [{"type": "char_location", "cited_text": "d"}],
                    },
                ],
            },
        ],
    ),
    "cached system blocks": (
        [
            {"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "x"},
        ],
        [{"role": "user", "content": "go"}],
    ),
}


@pytest.mark.parametrize("name", list(CORPORA))
def test_round_trip(name: str) -> None:
    system, messages = CORPORA[name]
    assert to_anthropic(from_anthropic(messages, system)) == (system, messages)


def test_tool_turn_maps_to_message_values() -> None:
    msgs = from_anthropic(TOOLS_TURN, "sys")
    assert msgs[0] == SystemMessage("sys")
    assert msgs[1] == UserMessage("Compare the weather in Paris and 东京.")
    call_turn = msgs[2]
    assert isinstance(call_turn, AssistantMessage)
    assert call_turn.reasoning == "Two cities, two calls."
    assert call_turn.extra["thinking_signature"] == "EqQBCkYIARgCIkD"
    assert call_turn.content == (TextPart("Checking both."),)
    assert call_turn.tool_calls == (
        ToolCall("toolu_01", "weather", '{"city": "Paris"}'),
        ToolCall("toolu_02", "weather", '{"city": "東京", "units": ["c"]}'),
    )
    assert msgs[3] == ToolMessage("toolu_01", "18°C, cloudy")
    assert msgs[4] == ToolMessage("toolu_02", (TextPart("timeout"),), extra={"is_error": True})
    assert len(msgs) == 6


def test_tool_results_then_user_text_split_into_tool_and_user_messages() -> None:
    _, messages = CORPORA["tool result with text after it"]
    msgs = from_anthropic(messages)
    assert [type(m) for m in msgs] == [UserMessage, AssistantMessage, ToolMessage, UserMessage]
    assert msgs[3] == UserMessage((TextPart("now cat it"),))


def test_images_become_image_parts() -> None:
    _, messages = CORPORA["images"]
    user = from_anthropic(messages)[0]
    assert isinstance(user, UserMessage)
    assert user.content[:2] == (
        ImagePart(f"data:image/png;base64,{PNG}"),
        ImagePart("https://example.com/a.jpg"),
    )


def test_redacted_thinking_is_kept_in_extra() -> None:
    _, messages = CORPORA["redacted thinking and unknown blocks are kept"]
    reply = from_anthropic(messages)[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.reasoning == "first"
    assert reply.extra["anthropic_blocks"] == [
        [1, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}]
    ]


def test_messages_built_in_code_convert_to_anthropic() -> None:
    msgs: list[Message] = [
        SystemMessage("a"),
        SystemMessage("b", developer=True),
        UserMessage((TextPart("look"), ImagePart("data:image/jpeg;base64,/9j/4AAQ", "low"))),
        AssistantMessage(None, tool_calls=(ToolCall("c", "f", ""),)),
        ToolMessage("c", "ok", extra={"is_error": False}),
        UserMessage("thanks"),
    ]
    system, wire = to_anthropic(msgs)
    assert system == "a\n\nb"
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c", "content": "ok", "is_error": False}],
        },
        {"role": "user", "content": "thanks"},
    ]
    assert to_anthropic([UserMessage("x")]) == (None, [{"role": "user", "content": "x"}])


def test_bad_tool_arguments_raise_on_the_way_out() -> None:
    with pytest.raises(MessageFormatError) as caught:
        to_anthropic([AssistantMessage(tool_calls=(ToolCall("c", "f", "[1]"),))])
    assert "wrap the arguments in an object" in caught.value.fix


def _tool_use(**changes: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
    block.update(changes)
    return {"role": "assistant", "content": [block]}


ERRORS: list[tuple[Any, str, str]] = [
    ({"role": "system", "content": "x"}, "messages[1].role", "system=..."),
    ({"content": "x"}, "messages[1].role", "only user/assistant"),
    ({"role": "user", "content": "x", "name": "bob"}, "messages[1].name", "keep only 'role' and 'content'"),
    ({"role": "user", "content": 5}, "messages[1].content", "pass the text as a str"),
    ({"role": "user", "content": None}, "messages[1].content", "pass the text as a str"),
    ({"role": "user", "content": [{"text": "x"}]}, "messages[1].content[0]", '{"type": "text"'),
    ({"role": "user", "content": [{"type": "text", "text": 1}]}, "messages[1].content[0].text", "as a str"),
    (
        {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
        "messages[1].content[0].tool_use_id",
        "id",
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]},
        "messages[1].content[0].is_error",
        "true or false",
    ),
    (
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "document"}]}],
        },
        "messages[1].content[0].content[0]",
        "plain text blocks",
    ),
    (_tool_use(id=None), "messages[1].content[0].id", "'id' and 'name'"),
    (_tool_use(name=3), "messages[1].content[0].name", "'id' and 'name'"),
    (_tool_use(input="{}"), "messages[1].content[0].input", "as an object"),
    (
        {"role": "assistant", "content": [{"type": "thinking", "thinking": None, "signature": "s"}]},
        "messages[1].content[0].thinking",
        "as a str",
    ),
]


@pytest.mark.parametrize(("d", "field", "fix"), ERRORS, ids=[e[1] + ":" + e[2] for e in ERRORS])
def test_malformed_input_names_field_and_fix(d: Any, field: str, fix: str) -> None:
    with pytest.raises(MessageFormatError) as caught:
        from_anthropic([{"role": "user", "content": "ok"}, d])
    assert caught.value.field == field
    assert fix in caught.value.fix
    assert "Fix:" in str(caught.value)


def test_system_blocks_must_be_text() -> None:
    with pytest.raises(MessageFormatError) as caught:
        from_anthropic([], [{"type": "image", "source": {}}])
    assert caught.value.field == "system[0]"


def test_arguments_are_json_of_the_input() -> None:
    msgs = from_anthropic([_tool_use(input={"path": "/tmp/数据.csv", "n": 1.5})])
    call = msgs[0].tool_calls[0] if isinstance(msgs[0], AssistantMessage) else None
    assert call is not None
    assert call.arguments == '{"path": "/tmp/数据.csv", "n": 1.5}'
    assert json.loads(call.arguments) == {"path": "/tmp/数据.csv", "n": 1.5}
