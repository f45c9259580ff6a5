"""What ``ContextEngine.add`` does before anything is stored: read the input, bounded, off the event loop.

* **Size.** A message whose text (content, parts, tool calls, reasoning, names, ids, extra keys) is over
  ``max_message_bytes`` is a :class:`~contextmem.errors.MessageTooLargeError` before any pass over it; a
  dict's string content is measured before it is even parsed. A tool result may be
  :data:`TOOL_RESULT_FACTOR` times larger: its full text goes to a file (C5) and the context keeps a
  head and tail, while user and assistant text is sent whole and cut only in an emergency.
* **Off the event loop.** What is left to do over a large accepted message, the UTF-8 and nesting checks
  and its token count (slow on long text: BPE over one long word is far from linear), runs in a worker
  thread; the count lands in the counter's cache, where the history and every later ``build`` find it.
  Before, a 5 MB message stalled the event loop 2.6 s (35 s for one long word), 50 MB 47 s.
* **One id, one call.** A tool call's id must be new to the session's live history
  (:func:`check_call_ids`): providers reject a request holding two calls with one id, and a result would
  pair with whichever call came first.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence

from ..errors import HistoryError, MessageTooLargeError, brief
from ..formats.inputs import MessageInput, read_message
from ..messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ..tokens import MessageCounter

__all__ = ["OFF_LOOP_BYTES", "TOOL_RESULT_FACTOR", "check_call_ids", "read_input", "text_bytes"]

TOOL_RESULT_FACTOR = 10
"""A tool result may be this many times ``max_message_bytes``: it is offloaded (C5), not sent whole."""

OFF_LOOP_BYTES = 64 * 1024
"""Input with more text than this is read and counted in a worker thread."""

_VALUES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


async def read_input(
    inputs: Sequence[MessageInput], max_bytes: int, counter: MessageCounter
) -> list[Message]:
    """The messages of ``inputs``, read, refused over ``max_bytes`` and counted: in a worker thread when
    they are large."""
    for i, value in enumerate(inputs):
        content = value.get("content") if isinstance(value, Mapping) else None
        if isinstance(content, str) and len(content) > max_bytes * TOOL_RESULT_FACTOR:  # not even parsed
            raise _too_large(f"messages[{i}]", len(content), max_bytes, TOOL_RESULT_FACTOR)

    def read() -> list[Message]:
        msgs: list[Message] = []
        for i, value in enumerate(inputs):
            for m in read_message(value, i):
                factor = TOOL_RESULT_FACTOR if isinstance(m, ToolMessage) else 1
                if (size := text_bytes(m, max_bytes * factor)) > max_bytes * factor:
                    raise _too_large(f"messages[{i}]", size, max_bytes, factor)
                msgs.append(m)
        counter.count_messages(msgs)  # cached by value: the history's own count is a lookup
        return msgs

    if any(_large(value) for value in inputs):
        return await asyncio.to_thread(read)
    return read()


def _too_large(where: str, size: int, max_bytes: int, factor: int) -> MessageTooLargeError:
    return MessageTooLargeError(
        f"{where}.content",
        size,
        max_bytes * factor,
        "send a shorter text (a big document is better read by a tool, in parts), or raise "
        f"max_message_bytes (now {max_bytes:,}; a tool result may be {TOOL_RESULT_FACTOR} times it)",
    )


def _large(value: MessageInput) -> bool:
    """Whether an input may hold more than :data:`OFF_LOOP_BYTES` of text (a guess that errs large: an
    input that is neither a message value nor a dict with string content counts as large)."""
    if isinstance(value, _VALUES):
        return text_bytes(value, OFF_LOOP_BYTES) > OFF_LOOP_BYTES
    content = value.get("content") if isinstance(value, Mapping) else None
    return not isinstance(content, str) or len(content) > OFF_LOOP_BYTES


def text_bytes(message: Message, stop: int) -> int:
    """UTF-8 bytes of the text in ``message`` (content, parts, tool calls, reasoning, names, ids, ``extra``),
    counted until they pass ``stop``: a string longer than ``stop`` characters is over it without being
    encoded. Fields of the wrong type are skipped (:func:`check_message_text` names them)."""
    found: list[object] = []
    content = message.content
    if isinstance(content, tuple):
        found.extend(getattr(p, "text", getattr(p, "url", None)) for p in content)
    else:
        found.append(content)
    found.append(message.name)  # names and ids too: a 50 MB tool-call id is as large as 50 MB of text
    if isinstance(message, AssistantMessage):
        if isinstance(message.tool_calls, tuple):
            for c in message.tool_calls:
                found += [getattr(c, "arguments", None), getattr(c, "id", None), getattr(c, "name", None)]
        found.append(message.reasoning)
    elif isinstance(message, ToolMessage):
        found.append(message.tool_call_id)
    if message.extra:  # keys kept as written: their JSON
        found.append(json.dumps(message.extra, ensure_ascii=False, default=str))
    total = 0
    for text in found:
        if isinstance(text, str):
            total += len(text) if len(text) > stop or text.isascii() else len(text.encode("utf-8", "replace"))
            if total > stop:
                break
    return total


def check_call_ids(history: Sequence[Message], new: Sequence[Message]) -> None:
    """Raise :class:`HistoryError` when a tool call in ``new`` reuses the id of a call in the live
    ``history`` (or of another call in ``new``). Cheap when ``new`` makes no call (most appends)."""
    fresh = [(i, c.id) for i, m in enumerate(new) if isinstance(m, AssistantMessage) for c in m.tool_calls]
    if not fresh:
        return
    seen = {c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls}
    for index, call_id in fresh:
        if call_id in seen:
            raise HistoryError(
                f"new message {index} reuses tool call id {brief(call_id)}, which a call still in this "
                "session's context already has: providers reject a request with two calls of one id, and "
                "its result could pair with the wrong call. Fix: give every tool call a unique id (pass the "
                "ids the model returned; a loop that numbers its own calls must not restart each turn)."
            )
        seen.add(call_id)
