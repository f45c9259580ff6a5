"""OpenAI chat dicts <-> messages: lossless round trips and errors that name the field and the fix."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.errors import MessageFormatError
from contextmem.formats.anthropic import from_anthropic, to_anthropic
from contextmem.formats.openai import from_openai, messages_from_openai, messages_to_openai, to_openai
from contextmem.messages import (
    AssistantMessage,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    text_of,
)

CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "天气"}'}}

CORPUS: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "system", "content": [{"type": "text", "text": "part one"}], "name": "policy"},
    {"role": "developer", "content": "Answer in Chinese."},
    {"role": "user", "content": "北京明天天气怎么样？"},
    {"role": "user", "content": "hi", "name": "alice"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    },
    {"role": "user", "content": []},
    {"role": "assistant", "content": "It will rain."},
    {"role": "assistant", "tool_calls": [CALL]},
    {"role": "assistant", "content": None, "tool_calls": [CALL], "refusal": None, "audio": None},
    {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "The user wants weather; call search.",
        "tool_calls": [
            CALL,
            {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": ""}},
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {
        "role": "assistant",
        "content": "done",
        "tool_calls": None,
        "function_call": None,
        "annotations": [{"type": "url_citation", "url_citation": {"url": "https://x.org"}}],
        "refusal": "no",
    },
    {"role": "assistant", "content": "", "tool_calls": [], "name": None},
    {  # Gemini's OpenAI-compatible thought signature lives on the tool call
        "role": "assistant",
        "tool_calls": [{**CALL, "extra_content": {"google": {"thought_signature": "c2ln"}}, "index": 0}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "小雨, 12°C"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "12:00"}], "name": "now"},
]


@pytest.mark.parametrize("d", CORPUS, ids=lambda d: d["role"])
def test_round_trip_corpus(d: dict[str, Any]) -> None:
    assert to_openai(from_openai(d)) == d


def test_fields_are_read_into_message_values() -> None:
    msgs = messages_from_openai(CORPUS)
    assert msgs[1] == SystemMessage((TextPart("part one"),), name="policy")
    assert isinstance(msgs[2], SystemMessage) and msgs[2].developer
    assert msgs[5] == UserMessage(
        (
            TextPart("What is in this picture?"),
            ImagePart("https://example.com/cat.png", "high"),
            ImagePart("data:image/png;base64,iVBORw0KGgo="),
        )
    )
    tools = msgs[10]
    assert isinstance(tools, AssistantMessage)
    assert tools.reasoning == "The user wants weather; call search."
    assert tools.tool_calls == (ToolCall("call_1", "search", '{"q": "天气"}'), ToolCall("call_2", "now", ""))
    refused = msgs[12]
    assert refused.extra["refusal"] == "no" and refused.extra["tool_calls"] is None
    assert msgs[15] == ToolMessage("call_1", "小雨, 12°C")
    assert messages_to_openai(msgs) == CORPUS


def test_reasoning_alias_is_read_and_written_as_reasoning_content() -> None:
    m = from_openai({"role": "assistant", "content": "4", "reasoning": "2+2"})
    assert isinstance(m, AssistantMessage) and m.reasoning == "2+2"
    assert to_openai(m) == {"role": "assistant", "content": "4", "reasoning_content": "2+2"}


def test_extra_is_a_copy_not_shared_with_the_input() -> None:
    d: dict[str, Any] = {"role": "assistant", "content": "x", "annotations": [{"type": "url_citation"}]}
    m = from_openai(d)
    d["annotations"].append({"type": "other"})
    assert to_openai(m)["annotations"] == [{"type": "url_citation"}]


def test_anthropic_only_extra_is_not_sent_to_openai() -> None:
    m = AssistantMessage("hi", reasoning="r", extra={"thinking_signature": "sig", "annotations": []})
    assert to_openai(m) == {"role": "assistant", "content": "hi", "reasoning_content": "r", "annotations": []}


def _call(**changes: Any) -> dict[str, Any]:
    call: dict[str, Any] = json.loads(json.dumps(CALL))
    for key, value in changes.items():
        if key in ("name", "arguments"):
            call["function"][key] = value
        else:
            call[key] = value
    return call


ERRORS: list[tuple[Any, str, str]] = [
    ({"content": "hi"}, "messages[3].role", "add 'role'"),
    ({"role": "function", "name": "f", "content": "1"}, "messages[3].role", "'role': 'tool'"),
    ({"role": "robot", "content": "x"}, "messages[3].role", "use one of"),
    ({"role": "tool", "content": "42"}, "messages[3].tool_call_id", "set 'tool_call_id'"),
    ({"role": "user", "content": 123}, "messages[3].content", "pass the text as a str"),
    ({"role": "user", "content": {"text": "hi"}}, "messages[3].content", "pass the text as a str"),
    ({"role": "user"}, "messages[3].content", "pass the text as a str"),
    ({"role": "system", "content": None}, "messages[3].content", "pass the text as a str"),
    ({"role": "user", "content": [{"type": "text", "text": 5}]}, "messages[3].content[0].text", "as a str"),
    ({"role": "user", "content": [{"type": "input_audio"}]}, "messages[3].content[0].type", "convert audio"),
    ({"role": "user", "content": ["hi"]}, "messages[3].content[0]", "use parts of type"),
    (
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
        "messages[3].content[0].type",
        "use parts of type 'text'",
    ),
    (
        {"role": "user", "content": [{"type": "image_url", "image_url": "https://x/y.png"}]},
        "messages[3].content[0].image_url",
        '"image_url": {"url"',
    ),
    (
        {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]},
        "messages[3].content[0].cache_control",
        "remove it",
    ),
    ({"role": "assistant", "tool_calls": {"id": "c"}}, "messages[3].tool_calls", "pass [{"),
    (
        {"role": "assistant", "tool_calls": [_call(id=None)]},
        "messages[3].tool_calls[0].id",
        "the id the model",
    ),
    (
        {"role": "assistant", "tool_calls": [_call(name="")]},
        "messages[3].tool_calls[0].function.name",
        "name",
    ),
    (
        {"role": "assistant", "tool_calls": [_call(arguments="{bad")]},
        "messages[3].tool_calls[0].function.arguments",
        "json.dumps",
    ),
    (
        {"role": "assistant", "tool_calls": [_call(arguments="[1, 2]")]},
        "messages[3].tool_calls[0].function.arguments",
        "wrap the arguments in an object",
    ),
    (
        {"role": "assistant", "tool_calls": [_call(arguments={"q": 1})]},
        "messages[3].tool_calls[0].function.arguments",
        "json.dumps",
    ),
    (
        {"role": "assistant", "tool_calls": [_call(type="custom")]},
        "messages[3].tool_calls[0].type",
        "'function'",
    ),
    (
        {"role": "assistant", "content": "x", "reasoning_content": 1},
        "messages[3].reasoning_content",
        "as a str",
    ),
    ({"role": "user", "content": "x", "name": 7}, "messages[3].name", "as a str"),
    (
        {"role": "tool", "tool_call_id": "c", "content": "x", "is_error": True},
        "messages[3].is_error",
        "rename",
    ),
]


@pytest.mark.parametrize(("d", "field", "fix"), ERRORS, ids=[e[1] + ":" + e[2] for e in ERRORS])
def test_malformed_input_names_field_and_fix(d: Any, field: str, fix: str) -> None:
    with pytest.raises(MessageFormatError) as caught:
        messages_from_openai([{"role": "user", "content": "ok"}] * 3 + [d])
    assert caught.value.field == field
    assert fix in caught.value.fix
    assert "Fix:" in str(caught.value)


def test_error_without_index_says_message() -> None:
    with pytest.raises(MessageFormatError) as caught:
        from_openai({"role": "user", "content": 123})
    assert caught.value.field == "message.content"
    assert "123" in str(caught.value)


# --- property: every valid dict survives the round trip ------------------------------------------

_CHINESE = st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), max_size=12)
TEXT = st.one_of(st.text(max_size=20), _CHINESE)
TEXT_PART = st.builds(lambda t: {"type": "text", "text": t}, TEXT)
IMAGE_URL = st.fixed_dictionaries(
    {
        "url": st.one_of(
            st.just("https://example.com/a.png"), st.builds("data:image/png;base64,{}".format, TEXT)
        )
    },
    optional={"detail": st.sampled_from(["auto", "low", "high"])},
)
IMAGE_PART = st.builds(lambda i: {"type": "image_url", "image_url": i}, IMAGE_URL)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT, lambda inner: st.lists(inner, max_size=3), max_leaves=5
)
ARGUMENTS = st.one_of(
    st.just(""),
    st.dictionaries(TEXT, JSON_VALUE, max_size=3).map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.dictionaries(TEXT, JSON_VALUE, max_size=3).map(json.dumps),
)
TOOL_CALL = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=10),
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": st.text(min_size=1, max_size=10), "arguments": ARGUMENTS}),
    },
    optional={"extra_content": st.dictionaries(TEXT, TEXT, max_size=2)},
)
NAME = {"name": st.one_of(st.none(), TEXT)}


def _role(role: str, content: st.SearchStrategy[Any], **optional: st.SearchStrategy[Any]) -> Any:
    return st.fixed_dictionaries({"role": st.just(role), "content": content}, optional={**NAME, **optional})


def _unique_ids(d: dict[str, Any]) -> bool:
    ids = [c["id"] for c in d.get("tool_calls") or []]
    return len(ids) == len(set(ids))


VALID = st.one_of(
    _role("system", st.one_of(TEXT, st.lists(TEXT_PART, max_size=3))),
    _role("developer", TEXT),
    _role("user", st.one_of(TEXT, st.lists(st.one_of(TEXT_PART, IMAGE_PART), max_size=4))),
    _role("tool", st.one_of(TEXT, st.lists(TEXT_PART, max_size=2)), tool_call_id=st.text(min_size=1)).filter(
        lambda d: "tool_call_id" in d
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant")},
        optional={
            **NAME,
            "content": st.one_of(st.none(), TEXT, st.lists(TEXT_PART, max_size=2)),
            "reasoning_content": st.one_of(st.none(), TEXT),
            "tool_calls": st.one_of(st.none(), st.lists(TOOL_CALL, max_size=3)),
            "refusal": st.one_of(st.none(), TEXT),
            "audio": st.none(),
            "annotations": st.lists(st.dictionaries(TEXT, TEXT, max_size=2), max_size=2),
        },
    ).filter(_unique_ids),
)


# Pinned at 300 in every profile: above the dev default for the wire format, not CI's 1,000 (~20 ms each).
@settings(max_examples=300)
@given(VALID)
def test_property_round_trip(d: dict[str, Any]) -> None:
    assert to_openai(from_openai(d)) == d


# --- across formats: OpenAI -> ours -> Anthropic -> ours -----------------------------------------

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "你是助手。"},
    {"role": "user", "content": "查一下北京和上海的天气"},
    {
        "role": "assistant",
        "content": "好的。",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "北京"}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": '{"city":"上海"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "晴"},
    {"role": "tool", "tool_call_id": "c2", "content": "雨"},
    {"role": "assistant", "content": "北京晴，上海雨。"},
]


def test_openai_to_anthropic_and_back_keeps_text_calls_and_results() -> None:
    ours = messages_from_openai(CONVERSATION)
    system, wire = to_anthropic(ours)
    assert system == "你是助手。"
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "assistant"]
    back = from_anthropic(wire, system)
    assert [text_of(m.content) for m in back] == [text_of(m.content) for m in ours]
    assert [type(m) for m in back] == [type(m) for m in ours]
    calls_before = ours[2].tool_calls if isinstance(ours[2], AssistantMessage) else ()
    calls_after = back[2].tool_calls if isinstance(back[2], AssistantMessage) else ()
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls_after] == [
        ("c1", "weather", {"city": "北京"}),
        ("c2", "weather", {"city": "上海"}),
    ]
    assert [(c.id, c.name) for c in calls_before] == [(c.id, c.name) for c in calls_after]
    assert [(m.tool_call_id, m.content) for m in back if isinstance(m, ToolMessage)] == [
        ("c1", "晴"),
        ("c2", "雨"),
    ]
