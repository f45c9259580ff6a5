"""What ``ContextEngine.add`` does before anything is stored: read the input, bounded, off the event loop.

* **Size.** A message whose text (content, parts, tool calls, reasoning, names, ids, extra keys) is over
  ``max_message_bytes`` is a :class:`~contextmem.errors.MessageTooLargeError` before any pass over it
  (:func:`~contextmem.message_checks.check_size`, the bound ``contextmem count`` applies too); a dict's
  string content is measured before it is even parsed. A tool result may be
  :data:`TOOL_RESULT_FACTOR` times larger: its full text goes to a file (C5) and the context keeps a
  head and tail, while user and assistant text is sent whole and cut only in an emergency.
* **Off the event loop.** What is left to do over a large accepted message, the UTF-8 and nesting checks
  and its token count, runs in a worker thread (:func:`~contextmem.offloop.off_loop`); the count lands
  in the counter's cache, where the history and every later ``build`` find it.
  Before, a 5 MB message stalled the event loop 2.6 s (35 s for one long word), 50 MB 47 s.
* **One id, one call.** A tool call's id must be new to the session's live history
  (:func:`check_call_ids`): providers reject a request holding two calls with one id, and a result would
  pair with whichever call came first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import HistoryError, brief
from ..formats.inputs import MessageInput, read_each
from ..message_checks import TOOL_RESULT_FACTOR, check_size, text_bytes, too_large
from ..messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ..offloop import OFF_LOOP_BYTES, off_loop
from ..tokens import MessageCounter

__all__ = ["OFF_LOOP_BYTES", "TOOL_RESULT_FACTOR", "check_call_ids", "read_input", "text_bytes"]

_VALUES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


async def read_input(
    inputs: Sequence[MessageInput], max_bytes: int, counter: MessageCounter
) -> list[Message]:
    """The messages of ``inputs``, read, refused over ``max_bytes`` and counted: in a worker thread when
    they are large."""
    for i, value in enumerate(inputs):
        content = value.get("content") if isinstance(value, Mapping) else None
        if isinstance(content, str) and len(content) > max_bytes * TOOL_RESULT_FACTOR:  # not even parsed
            raise too_large(f"messages[{i}]", len(content), max_bytes, TOOL_RESULT_FACTOR)

    def read() -> list[Message]:
        msgs: list[Message] = []
        for i, m in read_each(inputs):
            check_size(m, f"messages[{i}]", max_bytes)
            msgs.append(m)
        counter.count_messages(msgs)  # cached by value: the history's own count is a lookup
        return msgs

    return await off_loop(sum(_input_size(value) for value in inputs), read)


def _input_size(value: MessageInput) -> int:
    """The text of an input, up to just over :data:`OFF_LOOP_BYTES` (a guess that errs large: an input that
    is neither a message value nor a dict with string content counts as over it)."""
    if isinstance(value, _VALUES):
        return text_bytes(value, OFF_LOOP_BYTES)
    content = value.get("content") if isinstance(value, Mapping) else None
    return len(content) if isinstance(content, str) else OFF_LOOP_BYTES + 1


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
