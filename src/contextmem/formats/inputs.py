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

from collections.abc import Iterable, Mapping
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
from ._checks import fail
from .anthropic import from_anthropic, from_anthropic_reply
from .openai import from_openai, from_openai_reply

__all__ = [
    "ANTHROPIC_ONLY_BLOCKS",
    "MessageInput",
    "is_anthropic",
    "is_anthropic_reply",
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
    """Every input read by :func:`read_message`, in order; errors name the input's position."""
    return [m for i, message in enumerate(messages) for m in read_message(message, i)]
