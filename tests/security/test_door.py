"""Bad input at the door (issue 31, attacks 7 and 8): refused with a typed, bounded error, and cheap.

* A message value built by hand with a field of the wrong type raised ``AttributeError``/``TypeError``
  from deep inside; it is a :class:`MessageFormatError` naming the field, with the Fix.
* An error repeated the whole offending input (52.4 MB for a 50 MB message with no role); every error
  shows a value in about 80 characters.
* A 50 MB message was accepted and then blocked the event loop for tens of seconds; a message over
  ``max_message_bytes`` is refused before any pass over it (a tool result may be 10 times larger), and a
  large accepted one is checked and counted in a worker thread, never on the event loop.
* A tool call reusing the id of an earlier call still in the session was accepted silently, so the next
  request held two calls with one id (which providers reject); it is a :class:`HistoryError`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from contextmem.engine import ContextEngine
from contextmem.errors import HistoryError, MessageFormatError, MessageTooLargeError
from contextmem.messages import AssistantMessage, TextPart, ToolCall, ToolMessage, UserMessage
from contextmem.settings import Settings
from contextmem.store.open import open_store
from contextmem.testing import InMemorySessionStore
from contextmem.tokens import HeuristicCounter, MessageCounter

BIG = 5_000_000


async def open_engine(tmp: Path, store: Any = None, **settings: Any) -> ContextEngine:
    return await ContextEngine.open(
        "s1",
        store=store if store is not None else InMemorySessionStore(),
        settings=Settings(workspace=str(tmp), **settings),
        workspace_dir=tmp,
    )


async def test_message_values_of_the_wrong_type_are_typed_errors(tmp_path):
    engine = await open_engine(tmp_path)
    bad: list[tuple[Any, str]] = [
        ("just a string", "messages[0]"),
        (UserMessage(["text"]), "messages[0].content"),  # type: ignore[arg-type]
        (UserMessage((TextPart("a"), "b")), "messages[0].content[1]"),  # type: ignore[arg-type]
        (UserMessage("x", name=5), "messages[0].name"),  # type: ignore[arg-type]
        (AssistantMessage("x", tool_calls=[{"id": "c"}]), "messages[0].tool_calls"),  # type: ignore[arg-type]
        (AssistantMessage("x", tool_calls=({"id": "c"},)), "messages[0].tool_calls[0]"),  # type: ignore[arg-type]
        (ToolMessage(None, "x"), "messages[0].tool_call_id"),  # type: ignore[arg-type]
        (ToolMessage("c", 5), "messages[0].content"),  # type: ignore[arg-type]
    ]
    for value, field in bad:
        with pytest.raises(MessageFormatError) as caught:
            await engine.add(value)
        assert caught.value.field == field and "Fix: " in str(caught.value), value
    assert len(engine.history) == 0


async def test_errors_never_echo_a_huge_input(tmp_path):
    engine = await open_engine(tmp_path)
    huge = "x" * BIG
    inputs: list[Any] = [
        huge,  # a bare string
        {"content": huge},  # no role
        {"role": "user", "content": [{"type": "video", "data": huge}]},  # an unknown part
        {"role": "user", "content": "hi", "huge_key": huge},  # an unknown key
        {"role": huge, "content": "hi"},  # a role that is no role
        UserMessage("x", name=huge.encode()),  # type: ignore[arg-type]
    ]
    for value in inputs:
        with pytest.raises(MessageFormatError) as caught:
            await engine.add(value)
        text = str(caught.value)
        assert len(text) < 1000 and "Fix: " in text and "\n" not in text, text[:300]


async def test_a_message_over_max_message_bytes_is_refused_and_nothing_is_stored(tmp_path, store_url):
    store = open_store(store_url)
    engine = await open_engine(tmp_path, store, max_message_bytes=50_000)
    await engine.add(UserMessage("hello"), AssistantMessage("hi"))
    call = ToolCall("c1", "read_logs", "{}")
    await engine.add(UserMessage("read the logs"), AssistantMessage(None, tool_calls=(call,)))
    for value in (
        UserMessage("数" * 20_000),  # 60,000 bytes of UTF-8 in 20,000 characters
        {"role": "user", "content": "x" * 50_001},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 500_001},  # a tool result: 10 times more
        AssistantMessage(None, tool_calls=(ToolCall("c2", "f", '{"a": "' + "x" * 50_000 + '"}'),)),
    ):
        with pytest.raises(MessageTooLargeError) as caught:
            await engine.add(value)
        text = str(caught.value)
        assert "over the limit" in text and "Fix: " in text and "max_message_bytes" in text
        assert len(text) < 400
    assert (await engine.verify()).appended == 4  # nothing of them was stored
    await engine.add(ToolMessage("c1", "log line\n" * 50_000))  # 450 KB: a tool result may be this large
    await engine.add(AssistantMessage("read"))
    request = await engine.build("system")
    assert request.messages[-1] == AssistantMessage("read")
    assert (await engine.verify()).appended == 6
    await store.close()


class ThreadRecordingCounter:
    """Counts like the heuristic counter, and records on which thread each long text was counted."""

    name = "heuristic"

    def __init__(self) -> None:
        self.threads: list[str] = []

    def count_text(self, text: str) -> int:
        if len(text) > 100_000:
            self.threads.append(threading.current_thread().name)
        return HeuristicCounter().count_text(text)


async def test_a_large_message_is_counted_off_the_event_loop(tmp_path):
    counter = ThreadRecordingCounter()
    engine = await ContextEngine.open(
        "s1",
        store=InMemorySessionStore(),
        settings=Settings(workspace=str(tmp_path)),
        workspace_dir=tmp_path,
        counter=MessageCounter(counter),
    )
    call = ToolCall("c1", "read_logs", "{}")
    await engine.add(UserMessage("read the logs"), AssistantMessage(None, tool_calls=(call,)))
    await engine.add(ToolMessage("c1", "log line\n" * 200_000), AssistantMessage("done"))
    await engine.build("system")
    loop = threading.current_thread().name
    assert counter.threads and loop not in counter.threads, counter.threads


async def test_a_reused_tool_call_id_is_refused(tmp_path, store_url):
    store = open_store(store_url)
    engine = await open_engine(tmp_path, store)
    first = ToolCall("call_0", "search", '{"q": "a"}')
    await engine.add(UserMessage("find a"), AssistantMessage(None, tool_calls=(first,)))
    await engine.add(ToolMessage("call_0", "found a"), AssistantMessage("a is here"))
    again = AssistantMessage(None, tool_calls=(ToolCall("call_0", "search", '{"q": "b"}'),))
    with pytest.raises(HistoryError) as caught:  # a later turn reusing the id
        await engine.add(UserMessage("find b"), again)
    assert "'call_0'" in str(caught.value) and "Fix: " in str(caught.value)
    twice = [
        AssistantMessage(None, tool_calls=(ToolCall("x1", "search", "{}"),)),
        ToolMessage("x1", "one"),
        AssistantMessage(None, tool_calls=(ToolCall("x1", "search", "{}"),)),
    ]
    with pytest.raises(HistoryError):  # one append reusing an id of its own
        await engine.add(UserMessage("twice"), *twice)
    assert (await engine.verify()).appended == 4  # nothing of either was stored
    fresh = AssistantMessage(None, tool_calls=(ToolCall("call_1", "search", '{"q": "b"}'),))
    await engine.add(UserMessage("find b"), fresh, ToolMessage("call_1", "found b"), AssistantMessage("b"))
    request = await engine.build("system")
    ids = [c.id for m in request.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert ids == ["call_0", "call_1"]
    await store.close()
