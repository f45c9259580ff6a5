"""Messages as users already have them -> contextmem messages: the one reader behind ``ContextEngine.add``.

A user's agent loop holds messages in its provider's forms, so each is read by what it is:

* a message value (:class:`~contextmem.messages.UserMessage`, ...) is kept, after
  :func:`~contextmem.message_checks.check_message_text`;
* an Anthropic response (the SDK's ``Message``, or its dict: :func:`is_anthropic_reply`) is read for its
  content blocks only (``id``, ``model``, ``stop_reason``, ``usage`` describe that response);
* another SDK object (anything with ``model_dump()``) is read as its dict, except an assistant one, which is
  the OpenAI SDK's ``ChatCompletionMessage``: only the keys that belong in history are kept (``refusal``,
  ``annotations``, ``audio``, ``function_call`` are not);
* a dict is an Anthropic message when it is only ``role`` and a list ``content`` holding a block only
  Anthropic has (:data:`ANTHROPIC_ONLY_BLOCKS`, or a block with ``cache_control`` or ``citations``), else
  an OpenAI chat message, kept as written. Plain text messages read the same in both.

An Anthropic user message of ``tool_result`` blocks becomes one tool message per block, so one input may
give several messages. Errors name the input as ``messages[i]``, ``i`` its position in the call, and show
a value in about 80 characters (:func:`~contextmem.errors.brief`), never the whole input.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeAlias

from ..message_checks import check_message_text
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    wire_form,
)
from ._checks import fail, require_list, require_mapping
from .anthropic import from_anthropic, from_anthropic_reply
from .openai import from_openai, from_openai_reply
from .responses import ITEMS_KEY, check_item, is_item, items_to_messages

__all__ = [
    "ANTHROPIC_ONLY_BLOCKS",
    "MessageInput",
    "is_anthropic",
    "is_anthropic_reply",
    "read_each",
    "read_message",
    "read_messages",
]

MessageInput: TypeAlias = Message | Mapping[str, Any] | Any
"""A message value, an OpenAI or Anthropic message dict, or an SDK reply object (``model_dump()``)."""

ANTHROPIC_ONLY_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_result",
        "image",
        "thinking",
        "redacted_thinking",
        "document",
        "search_result",
        "container_upload",
    }
)
"""Content block types the Anthropic Messages API has and OpenAI chat messages do not; so are the server
tools' blocks, whose types end in ``_tool_use`` or ``_tool_result`` (``web_search_tool_result``, ...)."""

_ANTHROPIC_ONLY_KEYS = ("cache_control", "citations")
_RESPONSE_FIX = "pass the Responses API's response as it came, or its items: engine.add(*response.output)"
_VALUES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


def is_anthropic(message: Mapping[str, Any]) -> bool:
    """Whether a message dict is in Anthropic's form rather than OpenAI's (see the module docstring)."""
    content = message.get("content")
    if set(message) - {"role", "content"} or not isinstance(content, list):
        return False
    return any(isinstance(block, Mapping) and _anthropic_only(block) for block in content)


def _anthropic_only(block: Mapping[str, Any]) -> bool:
    kind = block.get("type")
    if kind in ANTHROPIC_ONLY_BLOCKS or any(key in block for key in _ANTHROPIC_ONLY_KEYS):
        return True
    return isinstance(kind, str) and kind.endswith(("_tool_use", "_tool_result"))


def is_anthropic_reply(message: Mapping[str, Any]) -> bool:
    """Whether a dict is an Anthropic Messages API response (the SDK's ``Message``, or its dict): an
    assistant ``"type": "message"`` with the ``model`` that wrote it and a list of content blocks."""
    return (
        message.get("type") == "message"
        and message.get("role") == "assistant"
        and "model" in message
        and isinstance(message.get("content"), list)
    )


def read_message(message: MessageInput, index: int = 0) -> list[Message]:
    """One input as the messages it holds (several for an Anthropic message of tool results)."""
    where = f"messages[{index}]"
    if isinstance(message, _VALUES):
        check_message_text(message, where)
        return [message]
    if isinstance(message, Mapping):
        if is_anthropic_reply(message):
            return [from_anthropic_reply(message["content"], index=index)]
        if is_anthropic(message):
            return from_anthropic([message], start=index)
        return [from_openai(message, index=index)]
    data = wire_form(message)
    if not isinstance(data, Mapping):
        fail(
            where,
            "a message, a message dict or an SDK message object",
            message,
            "pass a contextmem message, an OpenAI or Anthropic message dict, or the SDK's reply as it came",
            show_type=True,
        )
    if data.get("role") == "assistant" and not is_anthropic_reply(data):
        return [from_openai_reply(data, index=index)]  # the OpenAI SDK's ChatCompletionMessage
    return read_message(data, index)


def read_messages(messages: Iterable[MessageInput]) -> list[Message]:
    """Every input read, in order (:func:`read_each`); errors name the input's position."""
    return [m for _, m in read_each(messages)]


def read_each(inputs: Iterable[MessageInput]) -> Iterator[tuple[int, Message]]:
    """Every input's messages with the input's position: each read by :func:`read_message`, except the
    OpenAI Responses API's (a ``Response``, or its items, ``*response.output``): a run of consecutive
    items is mapped together (:func:`~.responses.items_to_messages`), so a reasoning item, the reply's text
    and its function calls make one assistant message, as the model sent them."""
    run: list[tuple[int, Mapping[str, Any]]] = []
    for i, value in enumerate(inputs):
        items = _responses_items(value, i)
        if items is not None:
            run.extend((i, item) for item in items)
            continue
        yield from _read_run(run)
        run = []
        yield from ((i, m) for m in read_message(value, i))
    yield from _read_run(run)


def _responses_items(value: MessageInput, index: int) -> list[Mapping[str, Any]] | None:
    """The Responses-API items ``value`` holds (a ``Response``'s output, or one item), else ``None``. A
    whole ChatCompletion is refused, naming the message to pass."""
    if isinstance(value, _VALUES):
        return None
    data = value if isinstance(value, Mapping) else wire_form(value)
    if not isinstance(data, Mapping) or ("role" in data and "type" not in data):
        return None
    where = f"messages[{index}]"
    if data.get("object") == "chat.completion" or ("choices" in data and "role" not in data):
        fail(
            where,
            "a message, not a whole ChatCompletion",
            data.get("id", "ChatCompletion"),
            "pass its message: engine.add(completion.choices[0].message)",
        )
    if data.get("object") == "response" and "output" in data:
        output = require_list(data["output"], f"{where}.output", "a list of items", _RESPONSE_FIX)
        for j, item in enumerate(output):
            check_item(require_mapping(item, f"{where}.output[{j}]", _RESPONSE_FIX), f"{where}.output[{j}]")
        return output
    if is_item(data) and not is_anthropic_reply(data):
        check_item(data, where)
        return [data]
    return None


def _read_run(run: list[tuple[int, Mapping[str, Any]]]) -> Iterator[tuple[int, Message]]:
    """A run of items as messages, each checked as a message value is, named by its first item's input."""
    if not run:
        return
    at = 0
    for message in items_to_messages(item for _, item in run):
        index = run[min(at, len(run) - 1)][0]
        check_message_text(message, f"messages[{index}]")
        at += len(message.extra.get(ITEMS_KEY) or ())
        yield index, message
