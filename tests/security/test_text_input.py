"""Text that cannot be stored is refused at the door (issue 12, points 5 and 9).

A lone surrogate (legal in JSON as ``"\\ud800"``) can be neither encoded as UTF-8 nor stored, so every
edge refuses it with a typed error naming the field and offset; nesting is bounded so no reader raises
RecursionError; JSON Lines errors name ``file:line``.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import JsonlLineError, MessageFormatError
from contextmem.eval.replay import load_transcript
from contextmem.formats.anthropic import from_anthropic, to_anthropic
from contextmem.formats.openai import from_openai, messages_from_openai, to_openai
from contextmem.jsonl import messages_from_jsonl, read_jsonl
from contextmem.message_checks import MAX_NESTING, check_arguments, check_json_value, check_message_text
from contextmem.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from ..strategies import histories

LONE = "\ud800"
DEEP = 100_000


def deep_list(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def deep_dict(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def refused(call: Any, *args: Any, **kwargs: Any) -> MessageFormatError:
    with pytest.raises(MessageFormatError) as caught:
        call(*args, **kwargs)
    str(caught.value).encode("utf-8")  # the message itself can be printed and logged
    assert "Fix:" in str(caught.value)
    return caught.value


# --- message values: every text field ---------------------------------------------------------------

VALUE_CASES: list[tuple[Message, str, int]] = [
    (UserMessage("ab" + LONE), "messages[3].content", 2),
    (UserMessage((TextPart("ok"), TextPart("x" + LONE))), "messages[3].content[1].text", 1),
    (UserMessage((ImagePart("https://e.x/" + LONE),)), "messages[3].content[0].image_url.url", 12),
    (UserMessage("hi", name="n" + LONE), "messages[3].name", 1),
    (ToolMessage("call" + LONE, "result"), "messages[3].tool_call_id", 4),
    (ToolMessage("c1", "résumé " + LONE), "messages[3].content", 7),
    (AssistantMessage("ok", reasoning="think" + LONE), "messages[3].reasoning", 5),
    (
        AssistantMessage(tool_calls=(ToolCall("c1", "f", '{"q": "' + LONE + '"}'),)),
        "messages[3].tool_calls[0].function.arguments",
        7,
    ),
    (
        AssistantMessage(tool_calls=(ToolCall("c1", "f" + LONE),)),
        "messages[3].tool_calls[0].function.name",
        1,
    ),
    (AssistantMessage(tool_calls=(ToolCall(LONE, "f"),)), "messages[3].tool_calls[0].id", 0),
    (UserMessage("hi", extra={"meta": {"tags": ["a", "b" + LONE]}}), "messages[3].meta.tags[1]", 1),
]


@pytest.mark.parametrize(("message", "field", "offset"), VALUE_CASES, ids=[c[1] for c in VALUE_CASES])
def test_a_lone_surrogate_in_any_text_field_is_refused_naming_field_and_offset(
    message: Message, field: str, offset: int
) -> None:
    error = refused(check_message_text, message, "messages[3]")
    assert error.field == field
    assert f"at character {offset}" in error.problem
    assert "U+D800" in error.problem


def test_an_escaped_lone_surrogate_in_arguments_is_refused() -> None:
    # Valid JSON text, all ASCII, but it decodes to text nothing downstream can encode.
    call = ToolCall("c1", "f", '{"q": "\\ud800"}')
    error = refused(check_message_text, AssistantMessage(tool_calls=(call,)), "messages[0]")
    assert error.field == "messages[0].tool_calls[0].function.arguments.q"
    paired = ToolCall("c1", "f", '{"q": "\\ud83d\\ude00", "path": "C:\\\\udata"}')  # a pair, and "\\u" text
    check_message_text(AssistantMessage(tool_calls=(paired,)))
    assert refused(check_arguments, call.arguments, "args").field == "args.q"
    # The Anthropic writer parses arguments: a typed error there, not an encoder crash later.
    assert refused(to_anthropic, [AssistantMessage(tool_calls=(call,))]).field.startswith("tool_calls[")


def test_a_surrogate_in_an_extra_key_is_refused() -> None:
    error = refused(check_message_text, UserMessage("hi", extra={"k" + LONE: 1}))
    assert error.field.startswith("message[") and error.field.endswith("(the key)")


# --- the OpenAI and Anthropic edges -------------------------------------------------------------------

WIRE_CASES: list[tuple[dict[str, Any], str]] = [
    ({"role": "user", "content": "x" + LONE}, "messages[1].content"),
    ({"role": "user", "content": [{"type": "text", "text": LONE}]}, "messages[1].content[0].text"),
    ({"role": "user", "content": "x", "name": LONE}, "messages[1].name"),
    ({"role": "system", "content": LONE}, "messages[1].content"),
    ({"role": "tool", "tool_call_id": LONE, "content": "x"}, "messages[1].tool_call_id"),
    ({"role": "assistant", "content": "x", "reasoning_content": LONE}, "messages[1].reasoning_content"),
    ({"role": "assistant", "content": "x", "reasoning": LONE}, "messages[1].reasoning"),
    ({"role": "assistant", "content": "x", "refusal": LONE}, "messages[1].refusal"),
    (
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": LONE}}],
        },
        "messages[1].tool_calls[0].function.arguments",
    ),
    (
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": "\\udfff"}'}}
            ],
        },
        "messages[1].tool_calls[0].function.arguments.a",
    ),
    (
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": LONE, "arguments": "{}"}}],
        },
        "messages[1].tool_calls[0].function.name",
    ),
]


@pytest.mark.parametrize(("bad", "field"), WIRE_CASES, ids=[c[1] for c in WIRE_CASES])
def test_messages_from_openai_refuses_lone_surrogates_naming_the_key(bad: dict[str, Any], field: str) -> None:
    error = refused(messages_from_openai, [{"role": "user", "content": "fine"}, bad])
    assert error.field == field


def test_a_surrogate_read_from_json_text_is_refused() -> None:
    """The reported bug: ``"\\ud800"`` is legal JSON, so it arrives through json.loads."""
    line = json.loads('{"role": "user", "content": "hello \\ud800 world"}')
    error = refused(from_openai, line, index=4)
    assert error.field == "messages[4].content"
    assert "at character 6" in error.problem


TOOL_USE = {"type": "tool_use", "id": "t", "name": "f", "input": {"q": LONE}}


@pytest.mark.parametrize(
    ("messages", "system", "field"),
    [
        ([{"role": "user", "content": LONE}], None, "messages[0].content"),
        (
            [{"role": "user", "content": [{"type": "text", "text": LONE}]}],
            None,
            "messages[0].content[0].text",
        ),
        (
            [{"role": "assistant", "content": [{"type": "thinking", "thinking": LONE, "signature": "s"}]}],
            None,
            "messages[0].content[0].thinking",
        ),
        (
            [{"role": "assistant", "content": [TOOL_USE]}],
            None,
            "messages[0].content[0].input.q",
        ),
        ([], "sys" + LONE, "system"),
    ],
)
def test_from_anthropic_refuses_lone_surrogates(messages: list[Any], system: Any, field: str) -> None:
    assert refused(from_anthropic, messages, system).field == field


# --- nesting: a typed error, never RecursionError ----------------------------------------------------


def _call(arguments: str) -> dict[str, Any]:
    fn = {"name": "f", "arguments": arguments}
    return {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": fn}]}


@pytest.mark.parametrize(
    "arguments",
    ["[" * DEEP + "]" * DEEP, '{"a":' * DEEP + "1" + "}" * DEEP, '{"a":' + "[" * 65 + "]" * 65 + "}"],
    ids=["list-100k", "object-100k", "object-66"],
)
def test_deeply_nested_arguments_are_a_message_format_error(arguments: str) -> None:
    error = refused(from_openai, _call(arguments), index=2)
    assert error.field.startswith("messages[2].tool_calls[0].function.arguments")
    refused(check_arguments, arguments, "args")


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "x", "metadata": deep_dict(DEEP)},
        {"role": "user", "content": deep_list(DEEP)},
        {"role": "user", "content": [{"type": "text", "text": "x", "deep": deep_list(DEEP)}]},
        {"role": "assistant", "tool_calls": deep_list(DEEP)},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": deep_dict(DEEP)}]},
    ],
    ids=["extra", "content", "content-part", "tool_calls", "function"],
)
def test_deeply_nested_dicts_passed_directly_are_refused(message: dict[str, Any]) -> None:
    error = refused(from_openai, message)
    assert "deeper than 64 levels" in error.problem
    refused(from_openai, deep_list(DEEP))  # not even a dict: still no RecursionError from repr


def test_a_cyclic_message_is_refused_as_too_deep() -> None:
    message: dict[str, Any] = {"role": "user", "content": "x"}
    message["self"] = message
    assert refused(from_openai, message).field == "message.self.self"


def test_deeply_nested_anthropic_input_is_refused() -> None:
    block = {"type": "tool_use", "id": "t", "name": "f", "input": deep_dict(DEEP)}
    refused(from_anthropic, [{"role": "assistant", "content": [block]}])
    refused(from_anthropic, [], deep_list(DEEP))
    refused(from_anthropic, [{"role": "user", "content": [{"type": "document", "x": deep_list(DEEP)}]}])


def test_extra_nesting_limit_is_the_same_for_values_and_dicts() -> None:
    """An extra value may nest MAX_NESTING - 1 levels (the message is level 1), on both sides of the edge."""
    fits = UserMessage("x", extra={"meta": deep_list(MAX_NESTING - 2, leaf=[])})
    check_message_text(fits)
    assert from_openai(to_openai(fits)) == fits
    too_deep = UserMessage("x", extra={"meta": deep_list(MAX_NESTING - 1, leaf=[])})
    assert refused(check_message_text, too_deep).field == "message.meta[0]"
    assert refused(from_openai, {"role": "user", "content": "x", "meta": too_deep.extra["meta"]})
    fn = {"name": "f", "arguments": "{}"}
    call = {"id": "c1", "type": "function", "function": fn, "x": deep_list(MAX_NESTING - 4, [])}
    check_message_text(from_openai({"role": "assistant", "tool_calls": [call]}))  # kept keys: same depth
    call["x"] = deep_list(MAX_NESTING - 3, [])
    refused(from_openai, {"role": "assistant", "tool_calls": [call]})


def test_what_from_anthropic_accepts_always_passes_the_value_check() -> None:
    """Kept blocks are stored one level deeper than they are read (two for ``system``); the readers' limits
    account for it, so whatever is accepted at the very limit can still be stored."""
    at_limit = deep_list(MAX_NESTING - 5, [])  # its deepest list sits at level MAX_NESTING - 1 on the wire
    block = {"type": "document", "source": at_limit}
    keys = {"type": "text", "text": "x", "citations": at_limit}
    for message in from_anthropic([{"role": "user", "content": [block, keys]}]):
        check_message_text(message)
    system_block = {"type": "text", "text": "s", "cache_control": deep_list(MAX_NESTING - 5, [])}
    for message in from_anthropic([], [system_block]):
        check_message_text(message)
    over = deep_list(MAX_NESTING - 4, [])
    refused(from_anthropic, [{"role": "user", "content": [{"type": "document", "source": over}]}])
    refused(from_anthropic, [], [{"type": "text", "text": "s", "cache_control": over}])


def test_check_json_value_bounds_depth_iteratively() -> None:
    check_json_value(deep_list(MAX_NESTING - 1, []), "v")
    refused(check_json_value, deep_list(MAX_NESTING, []), "v")
    refused(check_json_value, deep_dict(DEEP), "v")


# --- JSON Lines ------------------------------------------------------------------------------------


def write(tmp_path: Path, data: bytes, name: str = "transcript.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


USER = b'{"role": "user", "content": "hi"}'
ASSISTANT = b'{"role": "assistant", "content": "hello"}'


def test_a_bom_prefixed_transcript_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, b"\xef\xbb\xbf" + USER + b"\r\n\r\n" + ASSISTANT + b"\r\n")
    assert [m.kind for m in messages_from_jsonl(path)] == ["user", "assistant"]
    assert [n for n, _ in read_jsonl(path)] == [1, 3]  # blank lines skipped, still counted
    assert load_transcript(path) == ("", [UserMessage("hi"), AssistantMessage("hello")])


def test_a_line_separator_inside_a_string_does_not_split_the_line(tmp_path: Path) -> None:
    text = "one\u2028two\u0085three"
    path = write(tmp_path, json.dumps({"role": "user", "content": text}, ensure_ascii=False).encode())
    assert messages_from_jsonl(path) == [UserMessage(text)]


def test_a_surrogate_in_a_jsonl_line_names_file_line_and_field(tmp_path: Path) -> None:
    bad = b'{"role": "assistant", "content": [{"type": "text", "text": "ok \\ud800"}]}'
    path = write(tmp_path, USER + b"\n\n" + bad + b"\n")
    error = refused(load_transcript, path)
    assert isinstance(error, JsonlLineError)
    assert (error.source, error.line) == (str(path), 3)
    assert str(error).startswith(f"{path}:3: messages[1].content[0].text: contains '\\ud800'")
    assert "at character 3" in str(error)


def test_invalid_utf8_reports_the_line_not_a_decode_error(tmp_path: Path) -> None:
    path = write(tmp_path, USER + b'\n{"role": "user", "content": "caf\xe9"}\n')
    error = refused(read_jsonl, path)
    assert isinstance(error, JsonlLineError)
    assert (error.line, error.column) == (2, 33)
    assert "not valid UTF-8" in error.problem and "b'\\xe9'" in error.problem


@pytest.mark.parametrize(
    ("line", "problem", "column"),
    [
        (b'{"role": "user", "content": "hi"', "not valid JSON", 33),
        (b"[" * DEEP + b"]" * DEEP, "nests too deeply", 0),
        (b'["role", "user"]', "not an object", 0),
        (b'{"role": "user", "content": NaN}', "NaN, which is not JSON", 0),
    ],
    ids=["invalid-json", "deep", "not-object", "nan"],
)
def test_unreadable_lines_name_file_line_and_column(
    tmp_path: Path, line: bytes, problem: str, column: int
) -> None:
    path = write(tmp_path, USER + b"\n" + line + b"\n" + USER)
    error = refused(read_jsonl, path)
    assert isinstance(error, JsonlLineError)
    assert (error.line, error.column) == (2, column)
    assert problem in error.problem
    assert str(error).startswith(f"{path}:2")


def test_deep_nesting_inside_a_parsable_line_names_line_and_field(tmp_path: Path) -> None:
    deep = json.dumps({"role": "user", "content": "x", "meta": deep_list(500)}).encode()
    error = refused(messages_from_jsonl, write(tmp_path, USER + b"\n" + deep))
    assert str(error).startswith(f"{tmp_path / 'transcript.jsonl'}:2: messages[1].meta[0]: nests")


def test_stdin_is_read_for_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf" + USER + b"\n")))
    assert messages_from_jsonl("-") == [UserMessage("hi")]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"{oops\n")))
    assert str(refused(read_jsonl, "-")).startswith("<stdin>:1:2: is not valid JSON")


# --- properties --------------------------------------------------------------------------------------

valid_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
ident = valid_text.filter(bool)


@st.composite
def messages(draw: st.DrawFn, text: st.SearchStrategy[str] = valid_text) -> Message:
    """A message of any kind with ``text`` in every text field."""
    name = draw(st.none() | text)
    content = draw(text | st.lists(text.map(TextPart), min_size=1, max_size=3).map(tuple))
    kind = draw(st.sampled_from(["user", "assistant", "tool"]))
    if kind == "user":
        return UserMessage(content, name)
    if kind == "tool":
        return ToolMessage(draw(ident), content, name)
    calls = tuple(
        ToolCall(f"{draw(ident)}{k}", draw(ident), json.dumps({"q": draw(text)}, ensure_ascii=False))
        for k in range(draw(st.integers(0, 2)))
    )
    return AssistantMessage(draw(st.none() | st.just(content)), draw(st.none() | text), calls, name)


@given(messages())
def test_valid_unicode_passes_and_round_trips_through_openai(message: Message) -> None:
    check_message_text(message)
    assert from_openai(to_openai(message)) == message
    line = json.dumps(to_openai(message), ensure_ascii=False)
    assert from_openai(json.loads(line)) == message


@given(histories(max_turns=4))
def test_generated_histories_pass(history: list[Message]) -> None:
    for i, message in enumerate(history):
        check_message_text(message, f"messages[{i}]")


@given(valid_text, st.data())
def test_any_lone_surrogate_is_refused_with_its_offset(text: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(text)))
    surrogate = data.draw(st.characters(categories=["Cs"]))
    bad = text[:at] + surrogate + text[at:]
    choices: list[Message] = [
        UserMessage(bad),
        UserMessage((TextPart("x"), TextPart(bad))),
        ToolMessage("c1", bad),
        ToolMessage(bad, "x"),
        AssistantMessage("x", reasoning=bad),
        AssistantMessage(tool_calls=(ToolCall("c1", "f", bad),)),
        UserMessage("x", name=bad),
    ]
    message = data.draw(st.sampled_from(choices))
    error = refused(check_message_text, message, "messages[0]")
    assert f"at character {at}" in error.problem
    assert f"U+{ord(surrogate):04X}" in error.problem
    wire_field = refused(from_openai, to_openai(message), index=0).field
    assert wire_field == error.field.replace(".reasoning", ".reasoning_content")
