"""Issue 52, item 9: ``engine.add`` takes what an OpenAI Responses API loop holds (the ``Response``, or
``*response.output``), and a whole ChatCompletion is refused naming the message to pass. Real ``openai``
SDK objects, built as the SDK builds them from a reply (``model_validate``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contextmem.errors import HistoryError, MessageFormatError
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage

from .engine_helpers import make_engine
from .security.doors import assert_one_line_error, hostile_text

openai_types = pytest.importorskip("openai.types")
from openai.types.chat import ChatCompletion  # noqa: E402
from openai.types.responses import Response  # noqa: E402

OUTPUT: list[dict[str, Any]] = [
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look it up."}]},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Checking the deploy log.", "annotations": []}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_7",
        "name": "read_log",
        "arguments": '{"service": "billing"}',
        "status": "completed",
    },
]


def _response(output: list[dict[str, Any]]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1_760_000_000,
            "model": "gpt-4.1-mini",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": output,
        }
    )


@pytest.mark.parametrize("form", ["items", "response"])
async def test_a_responses_reply_is_one_assistant_message_and_goes_back_as_it_came(
    tmp_path: Path, form: str
) -> None:
    engine = await make_engine(tmp_path)
    await engine.add({"role": "user", "content": "Why did billing fail?"})
    response = _response(OUTPUT)
    if form == "items":
        await engine.add(*response.output)
    else:
        await engine.add(response)
    await engine.add({"type": "function_call_output", "call_id": "call_7", "output": "OOMKilled at 03:12"})
    request = await engine.build("You are on call.")
    reply, result = request.messages[-2:]
    assert isinstance(reply, AssistantMessage) and isinstance(result, ToolMessage)
    assert reply.content == "Checking the deploy log."
    assert reply.reasoning == "Look it up."
    assert reply.tool_calls == (ToolCall("call_7", "read_log", '{"service": "billing"}'),)
    assert result.tool_call_id == "call_7" and result.content == "OOMKilled at 03:12"
    items = request.to_responses()
    assert [i.get("id") for i in items[2:5]] == ["rs_1", "msg_1", "fc_1"]  # verbatim, ids kept
    chat = request.to_openai()
    assert "agents_items" not in json.dumps(chat)  # the chat form carries no Responses items
    assert chat[-2]["tool_calls"][0]["id"] == "call_7"


async def test_a_whole_chat_completion_names_the_message_to_pass(tmp_path: Path) -> None:
    engine = await make_engine(tmp_path)
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}
            ],
        }
    )
    with pytest.raises(MessageFormatError) as caught:
        await engine.add(completion)
    assert "completion.choices[0].message" in str(caught.value)
    assert_one_line_error(caught.value)
    await engine.add(completion.choices[0].message)  # what the error says to pass
    assert len(engine.history) == 1


_HOSTILE = st.one_of(hostile_text(), st.integers(), st.none(), st.lists(hostile_text(), max_size=2))


@given(
    kind=st.sampled_from(["message", "reasoning", "function_call", "function_call_output", "shell_call"]),
    key=st.sampled_from(["role", "content", "call_id", "name", "arguments", "output", "summary", "id"]),
    value=_HOSTILE,
)
@example(kind="function_call_output", key="output", value=[""])  # a part that is no object: was raw
async def test_any_responses_item_is_stored_exactly_or_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, kind: str, key: str, value: Any
) -> None:
    """The door's property: an item with any field hostile is taken (and reads back from the store as the
    same message) or refused with one typed line; never a raw KeyError or TypeError."""
    engine = await make_engine(tmp_path_factory.mktemp("door"))
    await engine.add({"role": "user", "content": "go"})
    base = {
        "type": kind,
        "role": "assistant",
        "content": "ok",
        "call_id": "c1",
        "name": "f",
        "arguments": "{}",
    }
    item = {**base, key: value}
    try:
        await engine.add(item)
    except (MessageFormatError, HistoryError) as exc:  # a result with no call before it: HistoryError
        assert_one_line_error(exc)
        return
    stored = await engine.store.messages(engine.namespace, engine.session_id)
    assert [s.message for s in stored] == list(engine.history.messages)
